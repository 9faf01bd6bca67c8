"""Declared dependencies are exactly the imported ones.

Every third-party module the package imports (at module level or inside a function: heavy ones are
imported lazily) must come from a distribution pyproject.toml declares, and every declared runtime
dependency must be imported somewhere. The `dev` extra holds tools the test command runs (pytest
and its plugins, linters), not libraries the package imports, so it is not checked.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "classify"
UNCHECKED_EXTRAS = {"dev"}
# Declared but never imported, on purpose: distribution -> why. Keep it short.
RUNTIME_ONLY: dict[str, str] = {}
# Import names of optional distributions that may not be installed here (packages_distributions()
# only knows installed ones): import name -> distribution.
NOT_INSTALLED = {"llama_cpp": "llama-cpp-python", "ray": "ray"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    assert m, f"cannot read a distribution name from requirement {req!r}"
    return _norm(m.group(1))


def declared() -> dict[str, str]:
    """Normalized distribution name -> where it is declared (`dependencies` or `extra <name>`)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out = {_requirement_name(r): "dependencies" for r in project.get("dependencies", [])}
    for extra, reqs in project.get("optional-dependencies", {}).items():
        if extra not in UNCHECKED_EXTRAS:
            for r in reqs:
                out.setdefault(_requirement_name(r), f"extra {extra}")
    return out


def third_party_imports(package: Path) -> dict[str, list[str]]:
    """Top-level name of every absolute import outside the standard library and the package -> file:line list."""
    found: dict[str, list[str]] = {}
    for f in sorted(package.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"), str(f))
        for node in ast.walk(tree):  # every import, also those inside functions
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == package.name or top == "__future__":
                    continue
                found.setdefault(top, []).append(f"{f.relative_to(package.parent)}:{node.lineno}")
    return found


def distributions_of(imports: dict[str, list[str]]) -> tuple[dict[str, set[str]], list[str]]:
    """Import name -> normalized distributions providing it, and the import names nothing provides."""
    provided = md.packages_distributions()
    out, unknown = {}, []
    for name in imports:
        dists = provided.get(name) or ([NOT_INSTALLED[name]] if name in NOT_INSTALLED else [])
        if dists:
            out[name] = {_norm(d) for d in dists}
        else:
            unknown.append(name)
    return out, unknown


def test_every_import_is_declared():
    imports = third_party_imports(PACKAGE)
    dists, unknown = distributions_of(imports)
    assert not unknown, f"imported, but no installed distribution provides them: {unknown}"
    decl = declared()
    missing = {name: sorted(d) for name, d in dists.items() if not d & set(decl)}
    assert not missing, "imported but not declared in pyproject.toml:\n" + "\n".join(
        f"  {name} (distribution {', '.join(d)}), imported at {', '.join(imports[name][:3])}"
        for name, d in missing.items()
    )


def test_every_declared_dependency_is_imported():
    dists, _ = distributions_of(third_party_imports(PACKAGE))
    imported = set().union(*dists.values())
    unused = {d: where for d, where in declared().items() if d not in imported and d not in RUNTIME_ONLY}
    assert not unused, (
        f"declared but never imported (drop them, or list them in RUNTIME_ONLY with the reason): {unused}"
    )
    stale = set(RUNTIME_ONLY) - set(declared())
    assert not stale, f"RUNTIME_ONLY lists distributions that are not declared: {stale}"


def test_the_checks_catch_a_planted_violation(tmp_path):
    pkg = tmp_path / "plant"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import json\nfrom plant import sub\n")
    (pkg / "sub" / "mod.py").write_text(
        "def f():\n    import yaml.constructor\n    from numpy import linalg\n    from . import x\n"
    )
    imports = third_party_imports(pkg)
    assert set(imports) == {"yaml", "numpy"} and imports["yaml"] == ["plant/sub/mod.py:2"]
    dists, unknown = distributions_of({**imports, "no_such_module_xyz": []})
    assert dists["yaml"] == {"pyyaml"} and unknown == ["no_such_module_xyz"]
    assert _requirement_name("llama-cpp-python[server]==0.3.36") == "llama-cpp-python"
    assert _requirement_name("PyYAML>=6") == "pyyaml"
