"""The LLM classifier behind `openai:<model>` and `local:<name|file.gguf>` specs.

One request per issue returns a label for every dimension (one JSON object). Options come from
ModelOptions.extra (see settings.py and docs/llm.md). Invalid answers are re-asked with the
validation error fed back, up to `repair_retries` times, then recorded as status="invalid" with
the raw answer kept; a bulk run never stops on one bad answer.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from classify.classifiers.base import Classifier, ModelOptions, ModelSpecError, Prediction, SharedPool
from classify.classifiers.llm.answer import answer_schema, parse_answer, span_probability
from classify.classifiers.llm.cache import LLMStore
from classify.classifiers.llm.client import Backoff, ChatClient, ChatResult, ClientStats, RequestFailed
from classify.classifiers.llm.endpoint import Endpoint, check_reachable, make_endpoint
from classify.classifiers.llm.prompts import Example, PromptSet
from classify.classifiers.llm.server import DEFAULT_LOCAL, LocalServerError, resolve_local_model, shared_server
from classify.classifiers.llm.settings import LLMSettings
from classify.core.causeshown import shown_partners
from classify.core.paths import cache_dir
from classify.core.records import Record
from classify.core.taxonomy import Taxonomy

if TYPE_CHECKING:
    from classify.classifiers.llm.fewshot import ExampleSelector

# One loaded encoder for few-shot selection serves every fold of a cross-validation.
FEWSHOT_ENCODERS: SharedPool[Any] = SharedPool(keep_idle=1)


@dataclass
class Plan:
    """Everything needed to label one record, before any request is made."""

    record: Record
    examples: list[Example]
    messages: list[dict[str, str]]
    params: list[dict[str, Any]] = field(default_factory=list)  # one per sample


def _local_model(spec: str) -> Path:
    """The GGUF file behind a `local:` spec; ModelSpecError if there is none."""
    try:
        return resolve_local_model(spec.partition(":")[2] or DEFAULT_LOCAL)
    except LocalServerError as e:
        raise ModelSpecError(str(e)) from None


class LLMClassifier(Classifier):
    Options = LLMSettings
    backoff: Backoff = Backoff()  # waits between retries (tests set one that does not sleep)

    @classmethod
    def check(cls, spec: str, taxonomy: Taxonomy, options: ModelOptions) -> LLMSettings:
        settings = super().check(spec, taxonomy, options)
        family, _, name = spec.partition(":")
        given = settings.model_fields_set
        # Settings that cannot act for this spec are refused, not carried along unused.
        moot = {"local": ("base_url", "api_key_env", "batch"), "openai": ("n_ctx", "n_threads")}.get(family, ())
        wrong = sorted(k for k in moot if k in given)
        if wrong:
            where = "the local server is started by classify" if family == "local" else "only for local: servers"
            raise ModelSpecError(f"{spec}: option {', '.join(wrong)}: {where}")
        if "repair" in given and not settings.batch:
            raise ModelSpecError(f"{spec}: option repair: only with batch (--batch)")
        if "k" in given and settings.strategy != "few-shot":
            raise ModelSpecError(f"{spec}: option k (--shots): only with strategy few-shot")
        if family == "local":
            _local_model(spec)
        elif not name:
            raise ModelSpecError(f"{spec!r}: name the model, e.g. openai:gpt-4o-mini")
        return settings

    # What fit() sets (scikit-learn's convention: fitted attributes end in "_"; __init__ only stores).
    n_train_: dict[str, int]
    selector_: ExampleSelector | None  # few-shot: the training records examples come from
    encoder_key_: str | None  # few-shot: the encoder that embeds them
    pool_key_: tuple | None  # the FEWSHOT_ENCODERS entry this classifier holds
    stats_: ClientStats  # summed over predict() calls
    _store: LLMStore | None  # the response cache, opened on first use (tests may set their own)

    # -- what the settings imply, derived on first use (rendering a prompt needs no fit) ----------

    @property
    def settings(self) -> LLMSettings:
        return self.params

    @property
    def family(self) -> str:
        return self.spec.partition(":")[0]

    @cached_property
    def model_path(self) -> Path | None:
        """The GGUF file of a `local:` spec (None for the others)."""
        return _local_model(self.spec) if self.family == "local" else None

    @cached_property
    def endpoint(self) -> Endpoint:
        s = self.settings
        name = self.spec.partition(":")[2]
        if self.model_path is None:
            return make_endpoint(
                name,
                base_url=s.base_url,
                api_key_env=s.api_key_env,
                dialect=s.dialect,
                structured=s.structured,
                fold_system=s.fold_system,
                logprobs=s.logprobs,
                timeout=s.timeout,
            )
        name = name or DEFAULT_LOCAL
        alias = self.model_path.stem if name.lower().endswith(".gguf") else name
        endpoint = make_endpoint(
            alias,
            base_url=None,
            dialect=s.dialect or "llama-cpp",
            structured=s.structured,
            # logprobs off unless asked: they make the server compute logits for every prompt token
            fold_system=s.fold_system,
            logprobs=bool(s.logprobs),
            timeout=s.timeout or 600.0,
            identity=f"local:{self.model_path.name}:{self.model_path.stat().st_size}",
            key_required=False,
        )
        endpoint.api_key_env = ""
        return endpoint

    @cached_property
    def prompts(self) -> PromptSet:
        s = self.settings
        return PromptSet(
            s.prompts_dir,
            self.taxonomy,
            rationale=s.rationale,
            allow_null=s.allow_null,
            layout=s.layout,
            fold_system=self.endpoint.fold_system,
            max_chars=s.max_chars,
            example_chars=s.example_chars,
            include_discussion=self.options.include_discussion,
        )

    @cached_property
    def schema(self) -> dict[str, Any]:
        s = self.settings
        grammar = self.endpoint.structured == "json_object_schema"
        return answer_schema(self.taxonomy, s.rationale, s.allow_null, limit_rationale=grammar, grammar=grammar)

    @cached_property
    def partners(self) -> dict[str, str]:
        """dim -> its "<dim>_shown" decision (classify.core.causeshown), answered in the same request."""
        return shown_partners(self.taxonomy)

    # -- interface ---------------------------------------------------------------------------

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> LLMClassifier:
        self.schema  # noqa: B018 (the endpoint, prompts and schema: template errors surface here)
        self._release_encoder()
        self.n_train_ = {d: sum(1 for y in labels.get(d, []) if y is not None) for d in self.taxonomy.dimension_ids}
        self.selector_, self.encoder_key_ = None, None
        if not hasattr(self, "stats_"):
            self.stats_ = ClientStats()
        if self.settings.strategy == "few-shot":
            from classify.classifiers.baselines import make_encoder
            from classify.classifiers.llm.fewshot import ExampleSelector

            key = (
                self.options.encoder,
                self.options.batch_size,
                self.options.show_progress,
                self.settings.backend,
                str(cache_dir()),
                threading.get_ident(),
            )
            enc = FEWSHOT_ENCODERS.acquire(key, lambda: make_encoder(self.options, self.settings.backend))
            self.pool_key_ = key
            self.selector_ = ExampleSelector(
                records,
                labels,
                self.taxonomy.dimension_ids,
                enc,
                self.options.include_discussion,
                require_complete=not self.settings.allow_null,
                partners=self.partners,
            )
            self.encoder_key_ = enc.model_key
        return self

    def preflight(self) -> None:
        """The key is set and the server accepts connections (answers anything at all to GET /models),
        before minutes of training and encoding; `local:` servers are started by us later."""
        if self.family == "local":
            return
        self.endpoint.api_key()  # EndpointError when the variable is missing
        check_reachable(self.endpoint.urls, timeout=min(10.0, self.endpoint.timeout))

    def prepare(self, records: list[Record], progress: Callable[[int], None] | None = None) -> None:
        """Before a bulk run: embed (and cache) every record for few-shot selection in one pass."""
        self.check_fitted()
        if self.selector_ is not None and records:
            self.selector_.encoder.encode([r.text(self.options.include_discussion) for r in records], progress=progress)
        if self.settings.batch and records:  # one batch for the whole block, not one per chunk
            from classify.classifiers.llm.batch import prefetch

            _run(prefetch(self, self.plan(records)))

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        self.check_fitted()
        plans = self.plan(records)
        if self.model_path is not None and plans:
            server = shared_server(
                self.model_path,
                self.endpoint.model,
                n_ctx=self.settings.n_ctx,
                n_threads=self.settings.n_threads,
                logits_all=self.endpoint.logprobs,
            )
            self.endpoint.base_url = server.base_url
        s = self.settings
        if s.batch and plans:
            from classify.classifiers.llm.batch import prefetch

            _run(prefetch(self, plans))
        rows = _run(self._predict_async(plans, defer=s.batch and s.repair == "batch")) if plans else []
        return {d: [row[d] for row in rows] for d in self.taxonomy.dimension_ids}

    def provenance(self) -> dict[str, Any]:
        s = self.settings
        p: dict[str, Any] = {
            "model": self.spec,
            **self.endpoint.describe(),
            "prompt_hash": self.prompts.hash,
            "prompt_set": str(self.prompts.folder.name),
            "layout": s.layout,
            "strategy": s.strategy,
            "rationale": s.rationale,
            "samples": s.samples,
            "temperature": s.eff_temperature,
            "max_tokens": s.eff_max_tokens,
            "allow_null": s.allow_null,
            "taxonomy": self.taxonomy.label,
            "taxonomy_fingerprint": self.taxonomy.fingerprint(),
            "n_train": dict(getattr(self, "n_train_", {})),
        }
        if s.strategy == "few-shot":
            p["k"] = s.k
            p["encoder"] = getattr(self, "encoder_key_", None)
        if self.model_path is not None:
            p["gguf"] = self.model_path.name
        return p

    # -- planning ------------------------------------------------------------------------------

    def plan(self, records: list[Record]) -> list[Plan]:
        """Examples and rendered messages for each record (no request is made)."""
        s = self.settings
        examples: list[list[Example]]
        if s.strategy == "few-shot":
            self.check_fitted()  # the examples come from the training records
            assert self.selector_ is not None  # fit sets it for few-shot
            examples = self.selector_.select(records, s.k)
        else:
            examples = [[] for _ in records]
        plans = []
        for r, ex in zip(records, examples):
            params = [
                {"temperature": s.eff_temperature, "max_tokens": s.eff_max_tokens, "seed": self.options.seed + i}
                for i in range(s.samples)
            ]
            plans.append(Plan(r, ex, self.prompts.messages(r, ex), params))
        return plans

    def client(self, store: LLMStore | None = None, defer: bool = False) -> ChatClient:
        s = self.settings
        return ChatClient(
            self.endpoint,
            store if store is not None else self.store,
            concurrency=s.concurrency or (2 if self.family == "local" else 4),
            max_retries=s.max_retries,
            use_cache=s.cache,
            backoff=self.backoff,
            defer=defer,
        )

    @property
    def store(self) -> LLMStore:
        """The response cache, opened on first use (tests may set `_store` to their own)."""
        store = getattr(self, "_store", None)
        if store is None:
            store = self._store = LLMStore()
        return store

    # -- labelling -----------------------------------------------------------------------------

    async def _predict_async(self, plans: list[Plan], defer: bool = False) -> list[dict[str, Prediction]]:
        async with self.client(defer=defer) as client:
            tasks = [asyncio.create_task(self._label_one(client, p)) for p in plans]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                # A fatal error (bad key, unknown model) or Ctrl-C: stop the other requests before
                # the client closes under them.
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            finally:
                self._add_stats(client.stats)

    @property
    def stats(self) -> ClientStats:
        return getattr(self, "stats_", None) or ClientStats()

    def _add_stats(self, st: ClientStats) -> None:
        for k, v in st.as_dict().items():
            cur = getattr(self.stats_, k)
            setattr(self.stats_, k, cur + v)

    async def _label_one(self, client: ChatClient, plan: Plan) -> dict[str, Prediction]:
        firsts = await client.complete_samples(plan.messages, plan.params, self.schema, plan.record.id)
        samples = [await self._one_sample(client, plan, p, first) for p, first in zip(plan.params, firsts)]
        return self._aggregate(plan, samples)

    async def _one_sample(self, client: ChatClient, plan: Plan, params: dict[str, Any], first: Any):
        """(answer, raw content, token logprobs, transport error) after up to repair_retries re-asks
        of the `first` answer (a ChatResult, or the RequestFailed of its request)."""
        msgs = list(plan.messages)
        ans, raw, lp = None, None, None
        for attempt in range(self.settings.repair_retries + 1):
            try:
                if isinstance(first, RequestFailed):
                    raise first
                res: ChatResult = (
                    first if attempt == 0 else await client.complete(msgs, params, self.schema, plan.record.id)
                )
            except RequestFailed as e:
                return ans, raw, lp, str(e)
            raw, lp = res.content, res.logprobs
            ans = parse_answer(res.content, self.taxonomy, self.settings.allow_null, res.refused)
            if ans.ok:
                break
            err = ans.error_text()
            if res.finish_reason == "length":
                err += f" (the answer was cut off at {params['max_tokens']} tokens: answer shorter)"
            msgs = msgs + [
                {"role": "assistant", "content": res.content},
                {"role": "user", "content": self.prompts.repair_text(err)},
            ]
        return ans, raw, lp, None

    def _aggregate(self, plan: Plan, samples) -> dict[str, Prediction]:
        n = len(samples)
        ex_ids = [e.record.id for e in plan.examples]
        answers = [a for a, *_ in samples if a is not None]
        first_rationale = next((a.rationale for a in answers if a.rationale), None)
        out: dict[str, Prediction] = {}
        for d in self.taxonomy.dimension_ids:
            given = [a.labels[d] for a in answers if d in a.labels]
            # A dimension with a "shown" decision may be null where that decision is none_shown; its
            # votes are the causes named, so its shares are P(cause | shown) for compose().
            votes = [v for v in given if v is not None] if d in self.partners else given
            extra: dict[str, Any] = {"examples": ex_ids} if ex_ids else {}
            if not given:
                ans, raw, _, err = samples[-1]
                why = err or (ans.errors.get(d) if ans is not None else None) or "no answer"
                out[d] = Prediction(label=None, status="invalid", raw=raw, extra={**extra, "error": why})
                continue
            if not votes:  # every answer: no cause shown and none named (valid, nothing to rank)
                out[d] = Prediction(label=None, rationale=first_rationale, extra=extra)
                continue
            counts = Counter(votes)
            label = max(counts, key=lambda c: (counts[c], -votes.index(c)))  # ties: the earliest answer
            conf: float | None
            if n > 1:
                total = len(votes) if d in self.partners else n
                conf = counts[label] / total
                # a distribution over categories only: a null vote (allow_null: "cannot tell") lowers
                # the confidence above but is not a class of its own; a majority of them is an
                # abstention, with no distribution that calibration could turn back into a label
                named = {c: k for c, k in counts.items() if c is not None}
                proba = {str(c): k / sum(named.values()) for c, k in named.items()} if label is not None else None
            else:
                ans, raw, lp, _ = samples[0]
                conf = span_probability(lp, raw or "", ans.spans[d]) if d in ans.spans else None
                proba = None
            # The reasoning of an answer that chose this label (with samples > 1 they can differ).
            rationale = next((a.rationale for a in answers if a.rationale and a.labels.get(d) == label), None)
            out[d] = Prediction(
                label=label, confidence=conf, proba=proba, rationale=rationale or first_rationale, extra=extra
            )
        return out

    def close(self) -> None:
        store = getattr(self, "_store", None)
        if store is not None:
            store.close()
            self._store = None
        self._release_encoder()

    @property
    def store_open(self) -> bool:
        """Whether this classifier holds an open response cache (close() closes it)."""
        return getattr(self, "_store", None) is not None

    def _release_encoder(self) -> None:
        if getattr(self, "pool_key_", None) is not None:
            FEWSHOT_ENCODERS.release(self.pool_key_)
            self.pool_key_ = None


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to completion from sync code, also when an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target():
        try:
            box["v"] = asyncio.run(coro)
        except BaseException as e:  # handed back to the caller's thread
            box["e"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box["v"]
