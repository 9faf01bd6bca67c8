"""Dry run: how many requests a run would make and roughly how many tokens, without sending any.

Prompts are rendered exactly as a real run would (few-shot selection included, which only needs
the local embedding model). Tokens are estimated at ~4 characters per token, a common rule for
English text with most tokenizers; treat them as a rough figure. Requests already answered in
the response cache are counted apart: they cost nothing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from classify.core.records import Record

CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 4  # role markers and separators per chat message


def estimate_tokens(text: str) -> int:
    return int(round(len(text) / CHARS_PER_TOKEN))


@dataclass
class DryRunEstimate:
    model: str
    endpoint: str | None
    records: int
    requests: int  # requests a run would send (cache misses, one per sample)
    cached: int  # requests the response cache already answers
    prompt_tokens: int  # estimated, for the requests to send
    completion_tokens: int  # estimated upper-typical answer length, for the requests to send
    cost_usd: float | None = None  # when prices per 1M tokens are given
    prompt_hash: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _answer_tokens(clf) -> int:
    """Typical answer: the JSON object with the longest ids, plus a rationale when asked."""
    ans = {d: max(dim.ids, key=len) for d, dim in clf.taxonomy.dimensions.items()}
    n = estimate_tokens(json.dumps(ans)) + 4
    if clf.settings.rationale:
        n += 60
    return min(n, clf.settings.eff_max_tokens)


def dry_run_estimate(
    clf, records: list[Record], price_in: float | None = None, price_out: float | None = None
) -> DryRunEstimate:
    """Estimate for labeling `records` with a fitted LLMClassifier. Prices are USD per 1M tokens
    (defaults: the classifier's price_in/price_out options)."""
    price_in = clf.settings.price_in if price_in is None else price_in
    price_out = clf.settings.price_out if price_out is None else price_out
    plans = clf.plan(records)
    client = clf.client()
    per_answer = _answer_tokens(clf)
    requests = cached = p_tok = c_tok = 0
    for plan in plans:
        prompt = sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in plan.messages)
        for params in plan.params:
            if client.cached(plan.messages, params, clf.schema):
                cached += 1
                continue
            requests += 1
            p_tok += prompt
            c_tok += per_answer
    cost = None
    if price_in is not None or price_out is not None:
        cost = (p_tok * (price_in or 0.0) + c_tok * (price_out or 0.0)) / 1e6
    return DryRunEstimate(
        clf.spec,
        clf.endpoint.describe()["endpoint"],
        len(records),
        requests,
        cached,
        p_tok,
        c_tok,
        cost,
        clf.prompts.hash,
    )


def format_estimate(e: DryRunEstimate) -> str:
    lines = [
        f"dry run: {e.model} ({e.endpoint}), prompt set {e.prompt_hash}",
        f"  records:            {e.records}",
        f"  requests to send:   {e.requests}" + (f"  (+{e.cached} answered by the response cache)" if e.cached else ""),
        f"  prompt tokens:      ~{e.prompt_tokens:,}",
        f"  completion tokens:  ~{e.completion_tokens:,}",
    ]
    if e.cost_usd is not None:
        lines.append(f"  estimated cost:     ~${e.cost_usd:,.4f}")
    else:
        lines.append("  estimated cost:     (give price_in/price_out, USD per 1M tokens)")
    lines.append("  no request was sent; token figures are rough (~4 characters per token)")
    return "\n".join(lines)


def dry_run_estimates(clf, gold, records: list[Record]) -> list[str]:
    """Fit the LLM parts of `clf` on gold (few-shot pools) and estimate labeling `records`, one
    printable estimate per LLM. An ensemble sends requests through its LLM members only, and only
    they are fitted: its trained members would encode and train for nothing."""
    from classify.classifiers.llm.classifier import LLMClassifier

    parts = [c for c in [clf, *clf.make_members()] if isinstance(c, LLMClassifier)]
    out = []
    try:
        for c in parts:
            c.fit(gold.records, gold.labels)
            out.append(format_estimate(dry_run_estimate(c, records)))
    finally:  # free what the estimate opened (response caches, few-shot encoders)
        for c in parts:
            c.close()
    return out
