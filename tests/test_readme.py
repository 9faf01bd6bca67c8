"""The README stays a five-minute read, and what it and the pages it hands over to point at exists.

- README.md is at most 12,000 characters; detail lives in docs/.
- Every relative link (README and the docs pages below) names an existing file, and an anchor
  (`page.md#heading`) names a heading of that page, as GitHub builds anchors.
- Every `classify ...` command shown in them (code blocks and inline code) is a real command,
  and every `--option` it shows is one of that command's options.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from classify.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# The pages that took over what the README used to say.
PAGES = [README] + [ROOT / "docs" / n for n in ("evaluation.md", "labeling.md", "gold.md", "results.md")]
MAX_CHARS = 12_000

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.S)
INLINE = re.compile(r"`(classify [^`]+)`")


def _heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors: lowercased heading text, punctuation other than - and _ dropped, spaces -> -."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    anchors = set()
    for line in text.splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return anchors


def _links(page: Path) -> list[str]:
    return [t for t in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))) if "://" not in t]


def _commands(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    lines = [ln for block in FENCE.findall(text) for ln in block.splitlines()]
    lines += INLINE.findall(FENCE.sub("", text))
    out = []
    for ln in lines:
        for part in re.split(r"&&|;", ln.split(" #", 1)[0]):
            if part.strip().startswith("classify "):
                out.append(part.strip())
    return out


def _check_command(line: str, root: Any) -> str | None:
    """None if the command and its options exist, else what is wrong (root: typer's click group)."""
    tokens = [t.strip("[]") for t in shlex.split(line)[1:]]
    cmd = root
    i = 0
    while hasattr(cmd, "commands") and i < len(tokens) and not tokens[i].startswith("-"):
        sub = cmd.commands.get(tokens[i])
        if sub is None:
            return f"{line!r}: {cmd.name or 'classify'} has no command {tokens[i]}"
        cmd, i = sub, i + 1
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    for t in tokens[i:]:
        if t.startswith("--") and t.split("=", 1)[0] not in known:
            return f"{line!r}: {cmd.name} has no option {t.split('=', 1)[0]}"
    return None


def test_readme_is_a_five_minute_read():
    n = len(README.read_text(encoding="utf-8"))
    assert n <= MAX_CHARS, f"README.md has {n} characters; at most {MAX_CHARS} (move detail to docs/)"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    bad = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _heading_anchors(dest):
            bad.append(f"{target}: no heading with that anchor")
    assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_and_option_shown_exists(page):
    root = typer.main.get_command(app)
    commands = _commands(page)
    assert commands or page.name == "gold.md"  # the parser found what the page shows
    problems = [p for p in (_check_command(c, root) for c in commands) if p]
    assert not problems, "\n".join(problems)


def test_the_checks_catch_what_they_are_for(tmp_path):
    root = typer.main.get_command(app)
    assert _check_command("classify run --model x --target-kappa 0.87", root) is None
    assert "no option --out" in (_check_command("classify fetch github --repo a/b --out x", root) or "")
    assert _check_command("classify review build --labels out/labels.jsonl", root) is None
    assert _check_command("classify review", root) is None
    assert "has no command gihub" in (_check_command("classify fetch gihub --repo a/b", root) or "")
    page = tmp_path / "p.md"
    page.write_text("# A title: here\n[x](p.md#a-title-here) [y](p.md#nope) [z](missing.md)\n")
    assert _links(page) == ["p.md#a-title-here", "p.md#nope", "missing.md"]
    assert _heading_anchors(page) == {"a-title-here"}
