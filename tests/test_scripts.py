"""scripts/test.sh, the README's test command, on a fresh machine: it installs the browser the suite
drives, sets up, checks, runs pytest, and says how long it took. Run here in a copy of the project
whose setup, linters and pytest are stand-ins that record their calls (the real ones take minutes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def fresh(tmp_path):
    """A project copy on a machine without Chromium: apt-get, sudo and the tools log their calls."""
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test.sh", proj / "scripts" / "test.sh")
    (proj / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", proj / ".ci" / "run")
    log = tmp_path / "calls.log"
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("apt-get", "sudo", "ruff", "mypy"):
        _stub(bin_ / tool, f'echo "{tool} $*" >> {log}' + ('\nexec "$@"' if tool == "sudo" else ""))
    _stub(bin_ / "python", f'echo "python $*" >> {log}; exit "${{PYTEST_RC:-0}}"')
    _stub(proj / "scripts" / "setup.sh", f'echo "setup.sh $*" >> {log}; mkdir -p .venv/bin; : > .venv/bin/activate')
    env = {
        **os.environ,
        "PATH": f"{bin_}:{os.environ['PATH']}",
        "CLASSIFY_CHROMIUM": str(tmp_path / "no-chromium"),
        "CLASSIFY_CHROMEDRIVER": str(tmp_path / "no-chromedriver"),
    }
    env.pop("CLASSIFY_SKIP_BROWSER", None)
    return proj, log, env


def test_test_sh_installs_the_browser_runs_everything_and_reports_its_time(fresh):
    proj, log, env = fresh
    r = subprocess.run(["bash", ".ci/run"], cwd=proj, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert any(c.startswith("apt-get install -y chromium chromium-driver") for c in calls), calls
    order = [c.split()[0] for c in calls if not c.startswith(("apt-get", "sudo"))]
    assert order == ["setup.sh", "ruff", "ruff", "mypy", "python"]
    assert "python -m pytest -q tests" in calls[-1]
    assert re.search(r"test\.sh: passed in \d+ s, pytest \d+ s$", r.stderr.strip()), r.stderr


def test_test_sh_reports_a_failing_suite_with_its_time_and_exit_code(fresh):
    proj, log, env = fresh
    env = {**env, "PYTEST_RC": "1", "CLASSIFY_SKIP_BROWSER": "1"}
    r = subprocess.run(["bash", "scripts/test.sh", "-x"], cwd=proj, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "apt-get" not in log.read_text()  # skipped browser: nothing installed
    assert "python -m pytest -q tests -x" in log.read_text()
    assert re.search(r"test\.sh: failed \(exit 1\) in \d+ s, pytest \d+ s$", r.stderr.strip()), r.stderr
