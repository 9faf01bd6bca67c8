"""`classify eval --by FIELD`: agreement per group of records (e.g. per repository).

Two designs, each with or without a `--test` file:
  within      one model per group: cross-validated inside the group (or trained on the group's gold
              records and tested on its records of the test file);
  leave-out   each group is predicted by a model trained on every other group only (`--leave-group-out`):
              how the model does on a source it never saw, the closest a single gold set has to a
              foreign set.
The run's pooled figures score every group's predictions together; `GroupedEval.metrics` adds each
group's figures, their unweighted mean over groups and the worst group. Groups too small to evaluate are
left out and named, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from classify.classifiers.base import Classifier, ModelOptions, Prediction
from classify.core.errors import UsageError
from classify.core.gold import GoldSet, content_hash
from classify.core.records import CORE_FIELDS, Record
from classify.evaluation.crossval import (
    EvalResult,
    _check_every_fold_can_train,
    assign_folds,
    cross_validate,
    evaluate_on_test,
    model_for,
)
from classify.evaluation.metrics import SMALL_N, compute_metrics

# The figures kept per group (per-category tables and confusion matrices stay with the pooled run).
SUMMARY_KEYS = ("accuracy", "macro_f1", "weighted_f1")


def check_group_args(by: str | None, leave_out: bool, *, limit: int | None, compare: object) -> None:
    """UsageError for options that do not go with --by (checked before any loading or training)."""
    if leave_out and by is None:
        raise UsageError("--leave-group-out needs --by FIELD (the field whose groups are left out in turn)")
    if by is not None and not by.strip():
        raise UsageError("--by: give a field name, e.g. repo")
    if by is not None and limit is not None:
        raise UsageError("--by does not go with --limit (each group is evaluated whole)")
    if by is not None and compare is not None:
        raise UsageError("--by does not go with --compare (the compared run's folds are not per group)")


def group_value(record: Record, by: str) -> str | None:
    """The record's value of `by` (a core field such as repo, or any other input column) as text."""
    v = getattr(record, by) if by in CORE_FIELDS else record.fields.get(by)
    return None if v is None or str(v).strip() == "" else str(v)


def record_groups(gold: GoldSet, by: str, what: str = "gold") -> list[str]:
    """One group per record of `gold`; UsageError naming the records that have no value."""
    groups = [group_value(r, by) for r in gold.records]
    missing = [r.id for r, g in zip(gold.records, groups) if g is None]
    if missing:
        raise UsageError(
            f"--by {by}: {len(missing)} of {len(gold)} {what} records have no {by} value "
            f"({', '.join(missing[:10])}{', ...' if len(missing) > 10 else ''})"
        )
    return [g for g in groups if g is not None]


def gold_part(gold: GoldSet, idx: list[int]) -> GoldSet:
    """Records `idx` of `gold` as a gold set of their own: same (possibly derived) taxonomy, labels and
    coder passes; the hash is that of the part."""
    records = [gold.records[i] for i in idx]
    labels = {d: [v[i] for i in idx] for d, v in gold.labels.items()}
    coders = {c: {d: [v[i] for i in idx] for d, v in dims.items()} for c, dims in gold.coders.items()}
    return GoldSet(records, gold.taxonomy, labels, coders, gold.path, content_hash(records, labels))


@dataclass
class GroupedEval:
    by: str
    leave_out: bool
    result: EvalResult  # every group's predictions over the evaluated set (gold, or the test file)
    groups: list[str]  # group of each record of result.gold
    names: list[str]  # group of each fold id base (see _merge); sorted
    skipped: dict[str, str] = field(default_factory=dict)  # group -> why it was not evaluated
    n_train: dict[str, int] = field(default_factory=dict)  # group -> training records of its model(s)

    def design(self) -> str:
        k = self.result.params.get("k")
        if self.result.mode == "test":
            if self.leave_out:
                return (
                    f"leave one {self.by} out: each group's records of the test file are predicted by a model "
                    f"trained on the gold records of every other {self.by}"
                )
            return f"one model per {self.by}, trained on the group's gold records and tested on its records of the test file"
        if self.leave_out:
            return f"leave one {self.by} out: each group is predicted by a model trained on every other {self.by} only"
        return f"one model per {self.by}: {k}-fold cross-validation inside each group"

    def metrics(self, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
        """Per group: n, training size and the figures of each dimension; their mean over groups (each
        group counts once, whatever its size) and the worst group per dimension."""
        res = self.result
        per: dict[str, Any] = {}
        for g in sorted(set(self.groups)):
            idx = [i for i, gg in enumerate(self.groups) if gg == g and res.folds[i] != -2]
            if not idx:
                continue
            sub = replace(
                res,
                gold=gold_part(res.gold, idx),
                predictions={d: [p[i] for i in idx] for d, p in res.predictions.items()},
                folds=[res.folds[i] for i in idx],
            )
            m = compute_metrics(sub, n_boot=n_boot, seed=seed)
            per[g] = {
                "n": len(idx),
                "n_train": self.n_train.get(g),
                "dimensions": {
                    name: {"n": rep["n"], "kappa": rep["kappa"], **{k: rep[k] for k in SUMMARY_KEYS}}
                    for name, rep in m["dimensions"].items()
                },
            }
        return {
            "field": self.by,
            "leave_group_out": self.leave_out,
            "design": self.design(),
            "groups": per,
            "mean": _mean_over_groups(per),
            "worst": _worst_group(per),
            "skipped": dict(self.skipped),
        }


def _mean_over_groups(per: dict[str, Any]) -> dict[str, Any]:
    """Per dimension: the unweighted mean of each figure over the groups where it is defined."""
    names = {n for g in per.values() for n in g["dimensions"]}
    out: dict[str, Any] = {}
    for name in sorted(names, key=lambda n: list(next(iter(per.values()))["dimensions"]).index(n)):
        reps = [g["dimensions"][name] for g in per.values() if name in g["dimensions"]]
        kappas = [r["kappa"]["kappa"] for r in reps if r["kappa"]["kappa"] is not None]
        row: dict[str, Any] = {"kappa": _mean(kappas), "n_groups": len(kappas)}
        for k in SUMMARY_KEYS:
            row[k] = _mean([r[k] for r in reps if r[k] is not None])
        out[name] = row
    return out


def _worst_group(per: dict[str, Any]) -> dict[str, Any]:
    """Per dimension: the group with the lowest defined kappa (ties: the first by name)."""
    out: dict[str, Any] = {}
    for g, rep in sorted(per.items()):
        for name, r in rep["dimensions"].items():
            k = r["kappa"]["kappa"]
            if k is not None and (name not in out or k < out[name]["kappa"]):
                out[name] = {"group": g, "kappa": k, "n": r["n"]}
    return out


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def evaluate_groups(
    model: str | Classifier,
    gold: GoldSet,
    options: ModelOptions | None = None,
    *,
    by: str,
    leave_out: bool = False,
    k: int = 5,
    seed: int = 0,
    test: GoldSet | None = None,
    allow_overlap: bool = False,
    predicted: Callable[[int], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> GroupedEval:
    """Evaluate `spec` per group of `by` (see the module doc); `test` scores that file's records instead
    of cross-validating. UsageError when a record has no value, or fewer than two groups exist."""
    say = say or (lambda m: None)
    template = model_for(model, gold, options, seed)  # validated once; every group trains a clone
    spec = template.spec
    gold_groups = record_groups(gold, by)
    evaluated = test if test is not None else gold
    groups = record_groups(test, by, "test") if test is not None else gold_groups
    names = sorted(set(gold_groups) | set(groups))
    if test is None and len(set(groups)) < 2:
        raise UsageError(f"--by {by}: every evaluated record has the same {by} ({groups[0]}); nothing to compare")
    if test is None and leave_out:
        folds = [names.index(g) for g in gold_groups]
        for d in gold.taxonomy.dimension_ids:
            labeled = {g for g, y in zip(gold_groups, gold.labels[d]) if y is not None}
            if len(labeled) == 1:
                raise UsageError(
                    f"--by {by} --leave-group-out: every {d} label lies in {by} {labeled.pop()}; "
                    "the model that predicts it would have none to train on"
                )
        say(f"{spec}: leave one {by} out over {len(names)} groups of {len(gold)} gold records")
        res = cross_validate(
            template,
            gold,
            k=len(names),
            seed=seed,
            folds=folds,
            predicted=predicted,
            progress=lambda f, _k: say(f"  {by} {names[f - 1]} done"),
        )
        res.params = {"by": by, "leave_group_out": True, "groups": len(names), "seed": seed}
        sizes = {g: len(res.train_ids[j]) for j, g in enumerate(names) if j in res.train_ids}
        return GroupedEval(by, True, res, groups, names, {}, sizes)
    parts: list[tuple[int, list[int], EvalResult]] = []
    skipped: dict[str, str] = {}
    n_train: dict[str, int] = {}
    for j, g in enumerate(names):
        idx = [i for i, gg in enumerate(groups) if gg == g]
        if not idx:
            continue  # a group of gold absent from the test file: nothing to score
        if test is None:
            part, part_folds, why = _cv_part(gold, idx, k, seed)
            if part is None:
                skipped[g] = why
                continue
            r = cross_validate(template, part, k=k, seed=seed, folds=part_folds, predicted=predicted)
            n_train[g] = len(idx)
        else:
            train_idx = [i for i, gg in enumerate(gold_groups) if (gg != g) == leave_out]
            if not train_idx:
                skipped[g] = f"no gold record {'outside' if leave_out else 'of'} this {by} to train on"
                continue
            part = gold_part(gold, train_idx)
            missing = [d for d in gold.taxonomy.dimension_ids if all(y is None for y in part.labels[d])]
            if missing:
                skipped[g] = f"its training records have no {', '.join(missing)} label"
                continue
            r = evaluate_on_test(template, part, gold_part(test, idx), predicted=predicted, allow_overlap=allow_overlap)
            n_train[g] = len(train_idx)
        say(f"  {by} {g}: {len(idx)} records done")
        parts.append((j, idx, r))
    if not parts:
        why = "; ".join(f"{g}: {w}" for g, w in list(skipped.items())[:5]) + ("; ..." if len(skipped) > 5 else "")
        raise UsageError(f"--by {by}: none of the {len(skipped)} groups could be evaluated ({why})")
    for g, why in skipped.items():
        say(f"warning: {by} {g} left out: {why}")
    params: dict[str, Any] = {"by": by, "leave_group_out": leave_out, "groups": len(parts), "seed": seed}
    if test is None:
        params["k"] = k
    else:
        params.update(train=str(gold.path), train_hash=gold.hash)
    res = _merge(spec, evaluated, parts, k if test is None else 1, "cv" if test is None else "test", params)
    return GroupedEval(by, leave_out, res, groups, names, skipped, n_train)


def _cv_part(gold: GoldSet, idx: list[int], k: int, seed: int) -> tuple[GoldSet | None, list[int], str]:
    """The group's gold part and its folds, or None and why it cannot be cross-validated in k folds."""
    if len(idx) < k:
        return None, [], f"{len(idx)} records, too few for {k}-fold cross-validation"
    part = gold_part(gold, idx)
    folds = assign_folds(part, k, seed)
    try:
        _check_every_fold_can_train(part, folds, k)
    except ValueError as e:
        return None, [], str(e).replace("; add coded reports to gold", "")
    return part, folds, ""


def _merge(
    spec: str,
    base: GoldSet,
    parts: list[tuple[int, list[int], EvalResult]],
    width: int,
    mode: str,
    params: dict[str, Any],
) -> EvalResult:
    """The groups' results as one result over `base`: group j's fold f becomes fold j*width + f (a test
    part's -1 becomes j*width), so every fold id still names one model and its training records."""
    n = len(base)
    preds: dict[str, list[Prediction | None]] = {d: [None] * n for d in base.taxonomy.dimension_ids}
    folds = [-2] * n
    train_ids: dict[int, set[str]] = {}
    dups: list[dict[str, Any]] = []
    seconds = 0.0
    prov: dict[str, Any] = {}
    for j, idx, r in parts:

        def fid(f: int, j: int = j) -> int:
            return f if f == -2 else j * width + max(f, 0)

        for d, plist in r.predictions.items():
            if d in preds:
                for i, p in zip(idx, plist):
                    preds[d][i] = p
        for i, f in zip(idx, r.folds):
            folds[i] = fid(f)
        train_ids.update({fid(f): ids for f, ids in r.train_ids.items()})
        dups += [{**d, "fold": fid(d["fold"])} for d in r.near_duplicates]
        seconds += r.seconds
        prov = r.provenance
    dups.sort(key=lambda d: (-d["similarity"], d["fold"], d["id"], d["train_id"]))
    return EvalResult(spec, base, preds, folds, train_ids, prov, seconds, mode, params, dups)


def group_column(res: EvalResult, rows: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """prediction rows (one per evaluated record, in order) with the record's group added."""
    evaluated = [r for r, f in zip(res.gold.records, res.folds) if f != -2]
    return [{**row, "group": group_value(rec, by)} for row, rec in zip(rows, evaluated)]


def render_by_group(bg: dict[str, Any]) -> list[str]:
    """The report's per-group section: one table per dimension, each group then the mean and the worst."""
    from classify.evaluation.report import fmt_kappa  # report imports this module

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    by, groups = bg["field"], bg["groups"]
    lines = [
        f"## Per {by}",
        "",
        f"{bg['design'][0].upper()}{bg['design'][1:]}. Mean: the unweighted mean over the groups where the "
        "figure is defined (each group counts once, whatever its size); worst: the group with the lowest kappa.",
        "",
    ]
    dims = list(next(iter(groups.values()))["dimensions"]) if groups else []
    for name in dims:
        lines += [
            f"### {name}",
            "",
            f"| {by} | n | trained on | kappa [95% CI] | accuracy | macro-F1 | weighted-F1 |",
            "|---|---|---|---|---|---|---|",
        ]
        for g, rep in groups.items():
            r = rep["dimensions"].get(name)
            if r is None:
                continue
            lines.append(
                f"| {g} | {r['n']}{' (small)' if 0 < r['n'] < SMALL_N else ''} | {rep['n_train'] or '-'} | "
                f"{fmt_kappa(r['kappa'])} | {f(r['accuracy'])} | {f(r['macro_f1'])} | {f(r['weighted_f1'])} |"
            )
        m = bg["mean"].get(name) or {}
        lines.append(
            f"| **mean of {m.get('n_groups', 0)} groups** | | | {f(m.get('kappa'))} | {f(m.get('accuracy'))} | "
            f"{f(m.get('macro_f1'))} | {f(m.get('weighted_f1'))} |"
        )
        w = bg["worst"].get(name)
        lines += ["", f"Worst {by}: {w['group']} (kappa {w['kappa']:.3f}, n={w['n']})." if w else "Worst: n/a.", ""]
    if bg.get("skipped"):
        lines += [f"Left out ({len(bg['skipped'])} groups):", ""]
        lines += [f"- {g}: {why}" for g, why in bg["skipped"].items()] + [""]
    return lines
