"""Dependencies between the package's layers point one way:

    core <- encoders <- classifiers <- evaluation <- (labeling, report, review, ingest) <- cli

Every `import` and `from ... import` is checked, at module level and inside functions (the package
imports heavy things lazily), plus `importlib.import_module("classify....")` with a literal name.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "classify"

# layer -> the other layers it may import. cli may import anything.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "encoders": {"core"},
    "classifiers": {"core", "encoders"},
    "ingest": {"core"},
    "evaluation": {"core", "encoders", "classifiers"},
    # labeling will derive thresholds by cross-validation, hence evaluation
    "labeling": {"core", "encoders", "classifiers", "evaluation"},
    # the corpus report reads labels rows (core.labelrow) and corrects them with evaluation's gold profile
    "report": {"core", "classifiers", "evaluation"},
    "review": {"core", "evaluation", "labeling"},
    # the browser workbench: people in the loop, on top of review's decisions and apply step
    "workbench": {"core", "evaluation", "labeling", "review"},
    "cli": {"core", "encoders", "classifiers", "ingest", "evaluation", "labeling", "report", "review", "workbench"},
}
ROOT_MODULES = {"__init__.py"}  # the package root re-exports the public API lazily; it is no layer


def _imported_names(node: ast.AST, package: list[str]) -> list[str]:
    """Absolute dotted names that `node` imports (empty when it is not an import)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package[: len(package) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        # `from classify import evaluation` names a layer through the imported name
        return [f"{mod}.{a.name}" for a in node.names] if mod == package[0] else [mod]
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if (
            name == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            return [node.args[0].value]
    return []


def layering_violations(package_dir: Path, allowed: dict[str, set[str]] = ALLOWED) -> list[str]:
    """One line per import that breaks the layering: `file:line: layer imports name (allowed: ...)`."""
    pkg = package_dir.name
    problems: list[str] = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir)
        if len(rel.parts) == 1:
            if rel.name not in ROOT_MODULES:
                problems.append(f"{path}:1: module outside any layer (put it in one of {sorted(allowed)})")
            continue
        layer = rel.parts[0]
        if layer not in allowed:
            problems.append(f"{path}:1: unknown layer {layer!r}: add it to ALLOWED in tests/test_layering.py")
            continue
        package = [pkg, *rel.parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for name in _imported_names(node, package):
                parts = name.split(".")
                if parts[0] != pkg:
                    continue
                target = parts[1] if len(parts) > 1 else None
                if target == layer or target == "__version__":
                    continue
                if target not in allowed:
                    problems.append(
                        f"{path}:{node.lineno}: {layer} imports {name}: the package root "
                        "re-exports every layer, import from the layer itself"
                    )
                elif target not in allowed[layer]:
                    problems.append(
                        f"{path}:{node.lineno}: {layer} imports {name} "
                        f"(allowed: {', '.join(sorted(allowed[layer])) or 'nothing in ' + pkg})"
                    )
    return problems


def test_package_layers_point_one_way():
    problems = layering_violations(PACKAGE_DIR)
    assert not problems, "layering violations:\n" + "\n".join(problems)


def test_every_layer_folder_has_rules():
    layers = {p.name for p in PACKAGE_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert layers == set(ALLOWED), f"layers without rules or rules without a layer: {layers ^ set(ALLOWED)}"


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A tiny package `pkg` with layers core <- enc <- top and every kind of import in it."""
    pkg = tmp_path / "pkg"
    for layer in ("core", "enc", "top"):
        _write(pkg, f"{layer}/__init__.py", "")
    _write(pkg, "__init__.py", "")
    _write(pkg, "core/a.py", "import os\nfrom pkg.core import b\n")  # same layer: fine
    _write(pkg, "enc/a.py", "from pkg.core.a import x\nfrom ..core import b\n")  # allowed, absolute and relative
    _write(pkg, "top/a.py", "import pkg.enc.a\n")
    return pkg


RULES = {"core": set(), "enc": {"core"}, "top": {"core", "enc"}}


def test_checker_passes_a_clean_package(planted):
    assert layering_violations(planted, RULES) == []


@pytest.mark.parametrize(
    "rel,source,line,needle",
    [
        (
            "core/late.py",
            "import os\n\ndef f():\n    from pkg.enc.a import y  # lazy, inside a function\n",
            4,
            "pkg.enc.a",
        ),
        ("core/rel.py", "from ..top import a\n", 1, "pkg.top"),
        ("core/sub/deep.py", "from ...enc import a\n", 1, "pkg.enc"),
        ("enc/named.py", "from pkg import top\n", 1, "pkg.top"),
        ("enc/dyn.py", "import importlib\nm = importlib.import_module('pkg.top.a')\n", 2, "pkg.top.a"),
        ("enc/root.py", "from pkg import helper\n", 1, "pkg.helper: the package root"),
    ],
)
def test_checker_catches_a_planted_violation(planted, rel, source, line, needle):
    _write(planted, rel, source)
    problems = layering_violations(planted, RULES)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{planted / rel}:{line}: ") and needle in problems[0]


def test_checker_flags_modules_outside_a_layer(planted):
    _write(planted, "flat.py", "")
    _write(planted, "newlayer/x.py", "")
    problems = layering_violations(planted, RULES)
    assert any("flat.py:1: module outside any layer" in p for p in problems)
    assert any("unknown layer 'newlayer'" in p for p in problems)
