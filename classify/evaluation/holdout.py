"""A held-back part of gold that a model, its profile and its thresholds never see.

The out-of-sample checks (`benchmarks/trust_holdout.py`, `benchmarks/shares_holdout.py`) split gold
the same way, so their figures describe the same reports.
"""

from __future__ import annotations

import numpy as np

from classify.core.gold import GoldSet, gold_from_records


def split_gold(gold: GoldSet, holdout: float, seed: int) -> tuple[GoldSet, GoldSet]:
    """(development, held back): `holdout` of gold held back, stratified by the first dimension and by
    whether the second is shown (null or not), so both parts keep gold's shares."""
    from sklearn.model_selection import train_test_split

    dims = gold.taxonomy.dimension_ids
    first = gold.labels[dims[0]]
    second = gold.labels[dims[1]] if len(dims) > 1 else [None] * len(gold)
    keys = [f"{a}|{b is not None}" for a, b in zip(first, second)]
    dev, held = train_test_split(np.arange(len(gold)), test_size=holdout, random_state=seed, stratify=keys)

    return _part(gold, [gold.records[i] for i in sorted(dev)]), _part(gold, [gold.records[i] for i in sorted(held)])


def split_first(gold: GoldSet, n: int) -> tuple[GoldSet, GoldSet]:
    """(the first `n` records, the rest): gold files only ever grow by appending, so the records
    added later are reports collected later, often with other shares (the shipped gold's last 169
    were chosen for showing their cause) - a held-back part whose shares differ from development's."""
    if not 0 < n < len(gold):
        raise ValueError(f"cannot split {len(gold)} records after the first {n}")
    return _part(gold, gold.records[:n]), _part(gold, gold.records[n:])


def _part(gold: GoldSet, records: list) -> GoldSet:
    """`records` of `gold` as a gold set of their own (same taxonomy and source)."""
    return gold_from_records(records, gold.taxonomy, source=gold.path or "<gold>")
