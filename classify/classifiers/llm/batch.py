"""Batch APIs for bulk runs (`--batch`): OpenAI's /v1/files + /v1/batches, half the price; vLLM's
batch file format is the same.

What a run needs from the server is found by running the classifier's own labeling with a client
that sends nothing (`ChatClient(defer=True)`): every request the response cache cannot answer is
noted. Those go into one batch input file (`custom_id` = the request's cache key), which is
uploaded and submitted; the batch is polled until it ends, and every answer in its output file is
read like any other (response.py) and cached. Labeling then runs as usual, from the cache. With
`repair=batch` the re-asks of invalid answers go into the next batch, up to `repair_retries`
rounds; with `repair=interactive` (default) they, and any request the batch did not answer, are
sent one by one.

Resumable: the batch id is stored (the request log's `batches` table) under a hash of the
requests it answers, so a run killed while waiting or collecting finds the same batch again
instead of paying for another.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai

from classify.classifiers.llm.cache import LLMStore
from classify.classifiers.llm.client import ChatClient, LLMError
from classify.classifiers.llm.response import ChatResult, MalformedResponse, read_response
from classify.core.http import redact
from classify.core.paths import cache_dir

if TYPE_CHECKING:
    from classify.classifiers.llm.classifier import LLMClassifier, Plan

CHAT_URL = "/v1/chat/completions"
DONE = ("completed", "failed", "expired", "cancelled")
MAX_POLL_FAILURES = 10  # polls in a row without an answer before the run stops (and can resume)
MAX_WAIT_SECONDS = 25 * 3600.0  # the completion window is 24 h: a batch not done by then is not coming


async def prefetch(clf: LLMClassifier, plans: list[Plan]) -> None:
    """Answer through batches what labeling `plans` needs: the first answers, and with
    repair=batch the re-asks too. Anything left is for the labeling pass that follows."""
    rounds = 1 + (clf.settings.repair_retries if clf.settings.repair == "batch" else 0)
    for _ in range(rounds):
        async with clf.client(defer=True) as probe:
            await asyncio.gather(*(clf._label_one(probe, p) for p in plans))
        if not probe.deferred:
            return
        async with clf.client() as client:
            try:
                await run_batch(client, clf.store, probe.deferred, poll_every=clf.settings.batch_poll)
            finally:
                clf._add_stats(client.stats)


def state_key(identity: str, keys: list[str]) -> str:
    return hashlib.sha256("\n".join([identity, *sorted(keys)]).encode()).hexdigest()


async def run_batch(
    client: ChatClient, store: LLMStore, requests: dict[str, dict[str, Any]], *, poll_every: float
) -> int:
    """Submit the batch for `requests` (cache key -> {"body", "record_id"}), or find the one
    already submitted for them, wait for it and cache its answers. Returns how many it answered."""
    assert client.pool is not None, "use ChatClient as an async context manager"
    route = client.pool.routes[0]
    api = route.client
    sk = state_key(client.endpoint.cache_identity, list(requests))
    known = store.batch(sk)
    try:
        if known is None:
            batch_id = await _submit(client, api, store, sk, route.name, requests)
        else:
            batch_id = known["batch_id"]
        batch = await _wait(client, api, batch_id, poll_every)
        if batch.status == "failed":
            store.save_batch(sk, route.name, batch_id, None, len(requests), "failed")
            errors = getattr(getattr(batch, "errors", None), "data", None) or []
            why = "; ".join(str(getattr(e, "message", e)) for e in errors[:3]) or "no reason given"
            raise LLMError(f"{route.name}: batch {batch_id} failed: {redact(why, client._secrets)}")
        answered = 0
        if batch.output_file_id:
            text = (await api.files.content(batch.output_file_id)).text
            answered = _collect(client, store, requests, text, route.name)
    except openai.APIStatusError as e:
        raise LLMError(
            f"{route.name}: the batch API answered HTTP {e.status_code}: {redact(str(e), client._secrets)[:300]}"
            + (" (run again to resume it)" if known or store.batch(sk) else "")
        ) from None
    store.save_batch(sk, route.name, batch_id, None, len(requests), "collected")
    return answered


async def _submit(client: ChatClient, api: Any, store: LLMStore, sk: str, name: str, requests) -> str:
    lines = [
        json.dumps({"custom_id": k, "method": "POST", "url": CHAT_URL, "body": r["body"]}, ensure_ascii=False)
        for k, r in requests.items()
    ]
    folder = batch_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sk[:16]}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")  # kept: what was asked, for inspection
    f = await api.files.create(file=(path.name, path.read_bytes(), "application/jsonl"), purpose="batch")
    b = await api.batches.create(input_file_id=f.id, endpoint=CHAT_URL, completion_window="24h")
    store.save_batch(sk, name, b.id, f.id, len(requests), "submitted")
    return b.id


async def _wait(client: ChatClient, api: Any, batch_id: str, poll_every: float) -> Any:
    failures = 0
    waited = 0.0
    while True:
        if waited > MAX_WAIT_SECONDS:
            raise LLMError(f"batch {batch_id}: not done after {waited / 3600:.0f} h of polling; run again to resume it")
        try:
            batch = await api.batches.retrieve(batch_id)
            failures = 0
            if batch.status in DONE:
                return batch
        except (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError) as e:
            failures += 1
            if failures >= MAX_POLL_FAILURES:
                raise LLMError(
                    f"batch {batch_id}: no answer to {failures} polls ({type(e).__name__}); run again to resume it"
                ) from None
        await client.backoff.sleep(poll_every)
        waited += poll_every


def _collect(client: ChatClient, store: LLMStore, requests, text: str, name: str) -> int:
    """Cache every usable answer in a batch output file; a line that is not one is skipped (its
    request is asked again). Each answer is logged like an interactive request."""
    answered = 0
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            continue
        key = item.get("custom_id") if isinstance(item, dict) else None
        if not isinstance(key, str) or key not in requests:
            continue  # not one of ours
        req = requests[key]
        response = item.get("response") if isinstance(item.get("response"), dict) else {}
        status = response.get("status_code")
        body = response.get("body")
        params = {k: v for k, v in req["body"].items() if k not in ("messages", "model")}
        log = dict(
            run_id=client.run_id,
            endpoint=f"{name} (batch)",
            model=client.endpoint.model,
            record_id=req.get("record_id"),
            key=key,
            attempt=1,
            messages=req["body"].get("messages"),
            params=params,
            latency_ms=None,
        )
        client.stats.requests += 1
        try:
            if status != 200:
                raise MalformedResponse(f"HTTP {status}")
            res, usage = read_response(body, max_tokens=_max_tokens(req["body"]), secrets=client._secrets)
        except MalformedResponse as e:
            store.log(**log, outcome="transient", http_status=status, error=redact(str(e), client._secrets)[:300])
            continue
        client.stats.prompt_tokens += usage.get("prompt_tokens", 0)
        client.stats.completion_tokens += usage.get("completion_tokens", 0)
        first: ChatResult = res[0]
        first.usage = usage
        store.put(key, client.endpoint.cache_identity, client.endpoint.model, first.to_json())
        store.log(
            **log,
            outcome="ok",
            http_status=200,
            error=None,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            response=first.content,
        )
        answered += 1
    return answered


def _max_tokens(body: dict[str, Any]) -> int | None:
    v = body.get("max_tokens", body.get("max_completion_tokens"))
    return v if isinstance(v, int) else None


def batch_folder() -> Path:
    """Where batch input files are kept (what was asked, for inspection)."""
    return cache_dir() / "batches"
