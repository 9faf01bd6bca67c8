"""Shared set-up for the review tests: a real gold subset, copies of the codebook, eval runs."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from classify.core.gold import load_gold
from classify.core.paths import DEFAULT_GOLD, DEFAULT_INPUT, DEFAULT_TAXONOMY
from classify.core.taxonomy import load_taxonomy


def gold_subset(tmp: Path, every: int = 5) -> tuple[Path, Path]:
    """Every `every`-th real gold record, and a copy of taxonomy v1, in tmp (apply writes beside them)."""
    (tmp / "gold").mkdir(parents=True, exist_ok=True)
    (tmp / "codebook").mkdir(parents=True, exist_ok=True)
    lines = DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[::every]
    gold = tmp / "gold" / "reports.jsonl"
    gold.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tax = tmp / "codebook" / "taxonomy-v1.yaml"
    shutil.copy(DEFAULT_TAXONOMY, tax)
    return gold, tax


def unlabeled_subset(tmp: Path, n: int = 12) -> Path:
    p = tmp / "issues.jsonl"
    p.write_text("\n".join(DEFAULT_INPUT.read_text(encoding="utf-8").splitlines()[:n]) + "\n", encoding="utf-8")
    return p


def fake_eval_run(tmp: Path, gold_path: Path, tax_path: Path, flips: dict, name: str = "20260101-000000-fake") -> Path:
    """An eval run folder with predictions built directly: the model agrees with gold (p=0.85) except
    on `flips` {(id, dim): (label, confidence)}, where it confidently prefers another label."""
    tax = load_taxonomy(tax_path)
    g = load_gold(gold_path, tax)
    run = tmp / "evals" / name
    run.mkdir(parents=True)
    rows = []
    for i, r in enumerate(g.records):
        row = {"id": r.id, "fold": i % 2}
        for d in tax.dimension_ids:
            ids = tax.dimensions[d].ids
            gl = g.labels[d][i]
            label, conf = flips.get((r.id, d), (gl or ids[0], 0.85))
            rest = (1 - conf) / (len(ids) - 1)
            proba = {c: (conf if c == label else rest) for c in ids}
            row.update({f"gold_{d}": gl, d: label, f"{d}_confidence": conf, f"{d}_proba": proba})
        rows.append(row)
    (run / "predictions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
    meta = {
        "model": "fake-model",
        "mode": "cv",
        "taxonomy": tax.label,
        "taxonomy_fingerprint": tax.fingerprint(),
        "gold": str(gold_path),
        "gold_hash": g.hash,
        "n_gold": len(g),
        "created_at": "2026-01-01T00:00:00+00:00",
    }
    dims = {d: {"n": 1, "kappa": {"kappa": 0.5, "lo": 0.4, "hi": 0.6}} for d in tax.dimension_ids}
    (run / "metrics.json").write_text(json.dumps({"meta": meta, "dimensions": dims}), encoding="utf-8")
    return run


def tree_state(*roots: Path) -> dict[str, str]:
    """Every file under the roots with its content hash: to assert that nothing changed."""
    out = {}
    for root in roots:
        for p in sorted(Path(root).rglob("*")):
            if p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def read_jsonl(p: Path) -> list[dict]:
    return [json.loads(x) for x in Path(p).read_text(encoding="utf-8").splitlines() if x.strip()]


def built_queue(tmp: Path) -> dict:
    """A gold subset, a fake eval run that confidently disputes one api_misuse root cause, and the
    queue `classify review build` makes of them (tmp/review/queue.json)."""
    from typer.testing import CliRunner

    from classify.cli.main import app

    gp, tp = gold_subset(tmp)
    g = load_gold(gp, load_taxonomy(tp))
    rid = next(r.id for r, y in zip(g.records, g.labels["root_cause"]) if y == "api_misuse")
    run = fake_eval_run(tmp, gp, tp, {(rid, "root_cause"): ("algorithm_logic", 0.9)})
    qp = tmp / "review" / "queue.json"
    args = ["review", "build", "-e", run, "-g", gp, "-t", tp, "--no-cleanlab", "-o", qp]
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return {
        "tmp": tmp,
        "gold": gp,
        "tax": tp,
        "queue": qp,
        "dec": qp.parent / "decisions.jsonl",
        "id": rid,
        "output": res.output,
    }
