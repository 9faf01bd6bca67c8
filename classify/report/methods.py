"""The report's words for readers: plain names of the correction methods (the technical name goes in
a tooltip) and the Methods paragraph a paper can cite, written from what was actually done."""

from __future__ import annotations

from typing import Any

from classify.classifiers.base import uses_llm
from classify.report.stats import SMALL_N

PLAIN = {
    "CC": "count of the model's labels",
    "PCC": "average of the model's calibrated probabilities",
    "ACC": "count of labels, adjusted for the model's confusions on gold",
    "PACC": "average of probabilities, adjusted for the model's confusions on gold",
    "EMQ": "probabilities re-weighted towards the corpus's own shares",
}


def plain_method(method: str) -> str:
    return PLAIN.get(method, method)


def _corrections(stats: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: d["correction"]
        for name, d in stats["dimensions"].items()
        if d["correction"].get("method") not in (None, "none")
    }


def methods_text(stats: dict[str, Any]) -> str:
    """What was estimated, how, with which intervals, and what they assume."""
    n_fail, n_rows = stats["n_failure_reports"], stats["n_rows"]
    model = stats.get("model") or "the classifier"
    if stats.get("screened"):
        who = (
            f"{n_fail} failure reports (of {n_rows} threads; {stats['n_screened_out']} were screened out by a "
            f"screening model as not failure reports"
            + (
                f", {stats['n_screened_out_review']} of them on its suggestion, before a person checked it"
                if stats.get("n_screened_out_review")
                else ""
            )
            + (
                f"; {stats['n_unscreened']} were never screened and count as failure reports"
                if stats.get("n_unscreened")
                else ""
            )
            + ")"
        )
    else:
        who = f"{n_rows} threads (not screened: threads that are not failure reports may be among them)"
    what = (
        "a prompted language model, not trained on the gold reports"
        if stats.get("model") and uses_llm(str(stats["model"]))
        # not "coded by people": the shipped gold was coded by a language model (gold/README.md)
        else "a classifier trained on the gold reports' labels (the gold set's documentation says how they were made)"
    )
    parts = [f"We labeled {who} with {model}, {what}."]
    corr = _corrections(stats)
    if corr:
        c0 = next(iter(corr.values()))
        chosen = "; ".join(
            f"{name.replace('_', ' ')}: {plain_method(c['method'])} ({c['method']})" for name, c in corr.items()
        )
        parts.append(
            "The share of each category was estimated by correcting the model's labels for its errors on gold, "
            "measured from out-of-fold predictions on the gold reports (quantification; Forman 2008, "
            "González et al. 2017). For each dimension one of five corrections (classify and count, CC; its "
            "probabilistic version, PCC; both adjusted by the confusion rates on gold, ACC and PACC; "
            "expectation-maximisation of the priors, EMQ, Saerens et al. 2002; implemented in QuaPy) was "
            f"chosen by its mean error on {c0.get('n_samples', 'several hundred')} samples of held-out gold "
            "reports whose category shares were shifted away from gold's (Dirichlet-distributed around gold's "
            f"shares): {chosen}."
        )
        parts.append(
            f"95% intervals are percentile bootstrap intervals over {c0.get('n_boot', 'the')} resamples of both "
            "gold (re-estimating the model's errors each time) and the corpus."
        )
    else:
        parts.append(
            "Shares are counts of the model's labels, not corrected for its errors, with 95% Wilson score "
            "intervals; they are biased wherever the model confuses categories unevenly."
        )
    sel = [name for name, d in stats["dimensions"].items() if d.get("denominator") == "shown"]
    if sel:
        parts.append(
            f"Shares of {', '.join(n.replace('_', ' ') for n in sel)} are of the reports whose thread shows one; "
            "the share of reports that show none is given apart."
        )
    status = [d.get("status") or {} for d in stats["dimensions"].values()]
    if any(s.get("coded") for s in status):
        parts.append("Labels coded by people count as coded.")
    if any(s.get("review") for s in status):
        parts.append(
            "Reports the model was not confident enough to label alone count with its suggestion until people "
            "code them."
        )
    parts.append(
        f"Per-library tables give counts{' and, for libraries of at least ' + str(SMALL_N) + ' reports, corrected estimates' if corr else ''}."
    )
    parts.append(
        "The intervals assume that the labeled reports are like the gold reports, so that the model's errors "
        "on gold carry over (the shares may differ, but what a report of each category looks like does not), "
        "that gold's labels are right, and that reports are independent; they do not cover a change in what "
        "the threads are (other libraries, other kinds of issue)."
    )
    return " ".join(parts)
