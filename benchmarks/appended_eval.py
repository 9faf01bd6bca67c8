"""Train on the gold reports collected first, score on those appended later: one eval run per spec.

Gold files only grow by appending; the shipped gold's last 169 reports were collected later and
chosen for showing their cause (other shares than the first 407), so they are the closest thing
the project has to reports it has never seen. This writes the two parts (the gold file's lines, in
order) to evals/appended/ and runs `classify eval --gold <first part> --test <appended part>` for
each spec, into evals/appended/<timestamp>-<spec> (test)/. Prints kappa with its 95% CI, accuracy
and macro F1 per dimension, and the run's seconds.

    python benchmarks/appended_eval.py [--specs tfidf-embed,setfit] [--first 407]
"""

from __future__ import annotations

import argparse
import os

from classify import ModelOptions, run_eval
from classify.core.paths import DEFAULT_GOLD, EVALS_DIR


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", default="tfidf-embed,setfit")
    ap.add_argument("--first", type=int, default=407)
    a = ap.parse_args()
    out = EVALS_DIR / "appended"
    out.mkdir(parents=True, exist_ok=True)
    lines = DEFAULT_GOLD.read_text(encoding="utf-8").splitlines(keepends=True)
    first, rest = out / f"gold-first-{a.first}.jsonl", out / f"appended-{len(lines) - a.first}.jsonl"
    first.write_text("".join(lines[: a.first]), encoding="utf-8")
    rest.write_text("".join(lines[a.first :]), encoding="utf-8")
    print(f"load average: {os.getloadavg()[0]:.1f}; train {first.name}, test {rest.name}")
    for spec in a.specs.split(","):
        run = run_eval(spec, gold=first, test=rest, options=ModelOptions(show_progress=False), out_dir=out)
        figs = ", ".join(
            f"{d} {s.kappa:.3f} [{s.kappa_lo:.3f}, {s.kappa_hi:.3f}] acc {s.accuracy:.3f} macro-F1 {s.macro_f1:.3f}"
            for d, s in run.scores.items()
            if d in ("symptom", "root_cause", "root_cause_group") and s.kappa is not None
        )
        print(f"{spec}: {figs}; {run.result.seconds:.0f} s -> {run.out_dir}")


if __name__ == "__main__":
    main()
