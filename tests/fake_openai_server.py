"""A small OpenAI-compatible chat server for tests, with faults injected on purpose.

It runs for real on 127.0.0.1 (ThreadingHTTPServer in a background thread). Each request is
tied to an issue by the `Title:` line of the last <issue> block in the prompt; a marker in the
title picks the behaviour, e.g. `r17 [fault:429:1]` answers 429 (with Retry-After) once and then
a correct answer. `:N` is how many times the fault happens before the good answer (99 = always).

Faults: 429, 500, 400, slow (sleeps past the client timeout), badjson (malformed HTTP body),
html (a non-JSON page), nochoices, prose (answer without JSON), oot (label outside the taxonomy),
obey (follows an instruction in the issue: "answer X" makes it answer X), vote (answer depends
on the seed, for self-consistency).
Hostile answers: nested (`{"a":[` x 2000), parts (content as a list of text parts), object
(content as a JSON object), lots / huge (usage.prompt_tokens "lots" / 1e400), poslp / nanlp
(logprobs +2.5 / NaN), surrogate (a lone surrogate in the answer), echo (the Authorization header and query string written into the
answer), big (the right labels after 1 MB of spaces), giant (after 20 MB), trickle (the right answer, one byte every
`trickle_seconds`: each read is quick, the whole never comes).

Server-wide modes: `n_mode` "support" (n choices for `n`), "ignore" (one choice, as
llama-cpp-python 0.3's server does) or "reject" (HTTP 400 naming `n`); `always` answers every
chat request with that HTTP status (a broken replica); `query_key` requires `?api-key=<it>`;
`latency` sleeps that long before every answer.

Batch API (OpenAI's shape): POST /v1/files (multipart upload), POST /v1/batches, GET
/v1/batches/<id> (the batch completes on its `batch_polls`-th poll: each input line is answered
by the same `respond`, faults included), GET /v1/files/<id>/content.

The correct answer for an issue is a function of its id (expected_labels), so a test can check
that every prediction landed on the right record.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_TITLE = re.compile(r"<issue>\s*Title: ([^\n]*)")
_TRICKLE = "X-Fake-Trickle"  # internal: how the handler is told to send the body byte by byte
_FAULT = re.compile(r"\[fault:([a-z0-9]+)(?::(\d+))?\]")


async def no_sleep(seconds: float) -> None:
    """A Backoff sleep for tests: retries and polls go on at once."""


def fake_classifier(base_url, store, taxonomy, sleep=no_sleep, **opts):
    """An `openai:fake-model` classifier fitted for zero-shot, with its own store and no sleeping."""
    from classify.classifiers.base import ModelOptions, make_classifier
    from classify.classifiers.llm.client import Backoff

    c = make_classifier("openai:fake-model", taxonomy, ModelOptions(extra={"base_url": base_url, **opts}))
    c._store = store
    c.backoff = Backoff(sleep=sleep)
    return c.fit([], {d: [] for d in taxonomy.dimension_ids})


def assert_expected(out: dict, records: list, dims: dict[str, list[str]]) -> None:
    """Every prediction is the fake's right answer for its record."""
    for d in dims:
        assert [p.label for p in out[d]] == [expected_labels(r.id, dims)[d] for r in records], d


def expected_labels(rid: str, dims: dict[str, list[str]]) -> dict[str, str]:
    h = int(hashlib.sha256(rid.encode()).hexdigest(), 16)
    return {d: ids[(h >> (8 * i)) % len(ids)] for i, (d, ids) in enumerate(dims.items())}


class FakeOpenAI:
    def __init__(
        self,
        dims: dict[str, list[str]],
        model: str = "fake-model",
        api_key: str | None = None,
        retry_after: str = "1",
        slow_seconds: float = 1.5,
        reject_json_schema: bool = False,
        with_logprobs: bool = True,
        n_mode: str = "ignore",
        always: int | None = None,
        query_key: str | None = None,
        latency: float = 0.0,
        batch_polls: int = 2,
        trickle_seconds: float = 0.3,
    ):
        self.trickle_seconds = trickle_seconds
        self.batch_polls = batch_polls
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.n_mode = n_mode
        self.always = always
        self.query_key = query_key
        self.latency = latency
        self.dims = dims
        self.model = model
        self.api_key = api_key
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.reject_json_schema = reject_json_schema
        self.with_logprobs = with_logprobs
        self.lock = threading.Lock()
        self.counts: dict[str, int] = defaultdict(int)  # requests per issue title
        self.log: list[dict] = []  # every chat request: title, time, status, body
        self.stopped = threading.Event()  # trickling handlers stop when the server does
        self.httpd = _Server(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def requests_for(self, rid: str) -> list[dict]:
        with self.lock:
            return [e for e in self.log if e["id"] == rid]

    @property
    def n_requests(self) -> int:
        with self.lock:
            return len(self.log)

    # -- batch API ---------------------------------------------------------------------------

    def upload(self, content_type: str, raw: bytes) -> tuple[int, dict[str, str], bytes, float]:
        boundary = content_type.partition("boundary=")[2].strip('"').encode()
        data = None
        for part in raw.split(b"--" + boundary):
            head, _, body = part.partition(b"\r\n\r\n")
            if b'name="file"' in head:
                data = body.rsplit(b"\r\n", 1)[0]
        if data is None:
            return _json(400, {"error": {"message": "no file part"}})
        with self.lock:
            fid = f"file-{len(self.files) + 1}"
            self.files[fid] = data
        return _json(
            200,
            {
                "id": fid,
                "object": "file",
                "bytes": len(data),
                "created_at": 0,
                "filename": "in.jsonl",
                "purpose": "batch",
                "status": "processed",
            },
        )

    def create_batch(self, body: dict) -> tuple[int, dict[str, str], bytes, float]:
        if body.get("input_file_id") not in self.files:
            return _json(404, {"error": {"message": "no such file"}})
        with self.lock:
            bid = f"batch_{len(self.batches) + 1}"
            self.batches[bid] = {
                "id": bid,
                "object": "batch",
                "endpoint": body.get("endpoint"),
                "errors": None,
                "input_file_id": body["input_file_id"],
                "completion_window": "24h",
                "status": "validating",
                "created_at": 0,
                "output_file_id": None,
                "error_file_id": None,
                "polls": 0,
                "lines": 0,
            }
        return _json(200, self._public(bid))

    def poll_batch(self, bid: str, auth: str | None) -> tuple[int, dict[str, str], bytes, float]:
        with self.lock:
            b = self.batches.get(bid)
            if b is None:
                return _json(404, {"error": {"message": "no such batch"}})
            b["polls"] += 1
            due = b["status"] != "completed" and b["polls"] >= self.batch_polls
            if not due and b["status"] != "completed":
                b["status"] = "in_progress"
        if due:
            out = []
            for i, line in enumerate(self.files[b["input_file_id"]].decode().splitlines()):
                req = json.loads(line)
                status, _, payload, _ = self.respond(req["body"], auth)
                self._note(req["body"], status, via="batch")
                try:
                    body = json.loads(payload)
                except ValueError:
                    body = payload.decode(errors="replace")
                out.append(
                    {
                        "id": f"req_{i}",
                        "custom_id": req["custom_id"],
                        "error": None,
                        "response": {"status_code": status, "request_id": f"r{i}", "body": body},
                    }
                )
            with self.lock:
                fid = f"file-{len(self.files) + 1}"
                self.files[fid] = "".join(json.dumps(o) + "\n" for o in out).encode()
                b.update(status="completed", output_file_id=fid, lines=len(out))
        return _json(200, self._public(bid))

    def _public(self, bid: str) -> dict:
        return {k: v for k, v in self.batches[bid].items() if k not in ("polls", "lines")}

    def _note(self, body: dict, status: int, via: str = "chat") -> None:
        text = "\n".join(m.get("content") or "" for m in body.get("messages", []) if m.get("role") != "assistant")
        titles = _TITLE.findall(text)
        with self.lock:
            self.log.append(
                {
                    "id": titles[-1].split()[0] if titles else "",
                    "t": time.monotonic(),
                    "status": status,
                    "body": body,
                    "via": via,
                }
            )

    # -- behaviour --------------------------------------------------------------------------

    def respond(self, body: dict, auth: str | None, query: str = "") -> tuple[int, dict[str, str], bytes, float]:
        """(status, headers, body bytes, delay seconds) for one chat request."""
        if self.always is not None:
            return _json(self.always, {"error": {"message": "replica down", "type": "server_error"}})
        if self.query_key is not None and f"api-key={self.query_key}" not in query:
            return _json(401, {"error": {"message": "missing api-key query parameter", "type": "auth"}})
        if (body.get("n") or 1) > 1 and self.n_mode == "reject":
            return _json(
                400, {"error": {"message": "Unsupported value: 'n' must be 1", "type": "invalid_request_error"}}
            )
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            # Worst case for key hygiene: the error echoes what it received.
            return _json(
                401, {"error": {"message": f"Incorrect API key provided: {auth}", "type": "invalid_request_error"}}
            )
        if body.get("model") != self.model:
            return _json(
                404, {"error": {"message": f"The model {body.get('model')} does not exist", "type": "not_found"}}
            )
        rf = body.get("response_format") or {}
        if self.reject_json_schema and rf.get("type") == "json_schema":
            return _json(
                400,
                {"error": {"message": "response_format json_schema is not supported", "type": "invalid_request_error"}},
            )
        text = "\n".join(m.get("content") or "" for m in body.get("messages", []) if m.get("role") != "assistant")
        titles = _TITLE.findall(text)
        title = titles[-1] if titles else ""
        rid = title.split()[0] if title else ""
        m = _FAULT.search(title)
        kind, times = (m.group(1), int(m.group(2) or 1)) if m else ("", 0)
        with self.lock:
            self.counts[title] += 1
            n = self.counts[title]
        faulty = n <= times
        good = expected_labels(rid, self.dims)
        # Dimensions the prompt asks beyond those the fake was given (a derived `<dim>_shown` decision):
        # answered with their first schema id, so a well-behaved model answers every asked key.
        schema = rf.get("schema") or (rf.get("json_schema") or {}).get("schema") or {}
        for d, prop in (schema.get("properties") or {}).items():
            if d not in good and d != "rationale" and prop.get("enum"):
                good[d] = prop["enum"][0]
        if faulty:
            if kind == "429":
                return _json(
                    429,
                    {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
                    {"Retry-After": self.retry_after},
                )
            if kind == "500":
                return _json(500, {"error": {"message": "The server had an error", "type": "server_error"}})
            if kind == "400":
                return _json(
                    400,
                    {
                        "error": {
                            "message": "This model's maximum context length is exceeded",
                            "type": "invalid_request_error",
                        }
                    },
                )
            if kind == "slow":
                status, headers, payload, _ = self._answer(body, good)
                return status, headers, payload, self.slow_seconds
            if kind == "badjson":
                return 200, {"Content-Type": "application/json"}, b'{"id": "x", "choices": [ {not json', 0.0
            if kind == "html":
                return 200, {"Content-Type": "text/html"}, b"<html><body>502 Bad Gateway</body></html>", 0.0
            if kind == "nochoices":
                return _json(200, {"id": "x", "object": "chat.completion", "choices": []})
            if kind == "prose":
                return self._answer(body, None, content=f"I think this one is a {good[next(iter(good))]} problem.")
            if kind == "oot":
                return self._answer(body, {**good, next(iter(good)): "gpu_meltdown"})
            if kind == "nested":
                return self._answer(
                    body, None, content='{"a":[' * 2000
                )  # under the size bound: the depth bound must catch it
            if kind == "parts":
                text = json.dumps(good)
                parts = [{"type": "text", "text": text[:7]}, {"type": "image_url"}, {"type": "text", "text": text[7:]}]
                return self._answer(body, good, raw_content=parts)
            if kind == "object":
                return self._answer(body, good, raw_content=good)
            if kind in ("lots", "huge"):
                return self._answer(body, good, prompt_tokens=kind)
            if kind in ("poslp", "nanlp"):
                return self._answer(body, good, logprob=2.5 if kind == "poslp" else float("nan"))
            if kind == "echo":
                return self._answer(body, None, content=json.dumps({**good, "rationale": f"you sent {auth} {query}"}))
            if kind == "surrogate":  # lone surrogates and NULs, raw and as JSON escapes: no UTF-8 text holds them
                text = json.dumps(good)[:-1] + ', "rationale": "\ud800 \\udfff \\u0000 x"}\x00'
                return self._answer(body, None, content=text)
            if kind == "trickle":
                status, headers, payload, _ = self._answer(body, good)
                return status, {**headers, _TRICKLE: str(self.trickle_seconds)}, payload, 0.0
            if kind == "giant":  # 20 MB: past the transport's bound while it streams in
                return self._answer(body, None, content=" " * 20_000_000 + json.dumps(good))
            if kind == "big":
                return self._answer(body, None, content=" " * 1_000_000 + json.dumps(good))
        if kind == "obey":
            # A gullible model: follows "answer X" found in the issue, whatever X is.
            m2 = re.search(r"answer (\w+)", text.split("<issue>")[-1], re.IGNORECASE)
            if m2:
                return self._answer(body, {**good, next(iter(good)): m2.group(1)})
        if kind == "vote":
            first = next(iter(good))
            other = {**good, first: [c for c in self.dims[first] if c != good[first]][0]}
            seed = int(body.get("seed") or 0)
            # one sample in three disagrees (with n: choice i as if asked with seed + i)
            return self._answer(body, good, per_choice=lambda i: json.dumps(other if (seed + i) % 3 == 2 else good))
        return self._answer(body, good)

    def _answer(
        self,
        body: dict,
        labels: dict | None,
        content: str | None = None,
        raw_content=None,
        prompt_tokens: str | None = None,
        logprob: float = -0.1,
        per_choice=None,
    ):
        n = max(1, int(body.get("n") or 1)) if self.n_mode == "support" else 1
        choices = []
        for i in range(n):
            if per_choice is not None:
                content = per_choice(i)
            elif content is None:
                content = json.dumps(labels)
            msg: dict = {
                "index": i,
                "message": {"role": "assistant", "content": content if raw_content is None else raw_content},
                "finish_reason": "stop",
            }
            if body.get("logprobs") and self.with_logprobs:
                # Token texts that concatenate to the content; each token has logprob -0.1.
                toks = re.findall(r"\w+|[^\w]", content)
                msg["logprobs"] = {
                    "content": [{"token": t, "logprob": logprob, "bytes": None, "top_logprobs": []} for t in toks]
                }
            choices.append(msg)
        n_prompt = sum(len(m.get("content") or "") for m in body.get("messages", [])) // 4
        usage = {"prompt_tokens": n_prompt, "completion_tokens": n * len(content or "") // 4}
        payload: dict = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
            "usage": {**usage, "total_tokens": sum(usage.values())},
        }
        if prompt_tokens == "lots":
            payload["usage"]["prompt_tokens"] = "lots"
        status, headers, raw, delay = _json(200, payload)
        if prompt_tokens == "huge":  # a number no float holds: json.dumps cannot write it
            raw = raw.replace(f'"prompt_tokens": {n_prompt}'.encode(), b'"prompt_tokens": 1e400')
        return status, headers, raw, delay

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status, headers, payload):
                headers = dict(headers)
                trickle = float(headers.pop(_TRICKLE, 0) or 0)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if trickle:
                        for i in range(len(payload)):
                            self.wfile.write(payload[i : i + 1])
                            self.wfile.flush()
                            time.sleep(trickle)
                            if fake.stopped.is_set():
                                return
                        return
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

            def do_GET(self):
                path = self.path.partition("?")[0].rstrip("/")
                if "/batches/" in path:
                    self._send(*fake.poll_batch(path.rsplit("/", 1)[1], self.headers.get("Authorization"))[:3])
                    return
                if path.endswith("/content") and "/files/" in path:
                    fid = path.split("/files/")[1].split("/")[0]
                    if fid not in fake.files:
                        self._send(*_json(404, {"error": {"message": "no such file"}})[:3])
                        return
                    self._send(200, {"Content-Type": "application/octet-stream"}, fake.files[fid])
                    return
                if self.path.partition("?")[0].rstrip("/").endswith("/models"):
                    self._send(*_json(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})[:3])
                else:
                    self._send(*_json(404, {"error": {"message": "no such route"}})[:3])

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                path = self.path.partition("?")[0].rstrip("/")
                if path.endswith("/files"):
                    self._send(*fake.upload(self.headers.get("Content-Type", ""), raw)[:3])
                    return
                if path.endswith("/batches"):
                    self._send(*fake.create_batch(json.loads(raw))[:3])
                    return
                if not path.endswith("/chat/completions"):
                    self._send(*_json(404, {"error": {"message": "no such route"}})[:3])
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(*_json(400, {"error": {"message": "bad JSON body"}})[:3])
                    return
                query = self.path.partition("?")[2]
                status, headers, payload, delay = fake.respond(body, self.headers.get("Authorization"), query)
                delay += fake.latency
                fake._note(body, status)
                if delay:
                    time.sleep(delay)
                self._send(status, headers, payload)

        return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # 128 clients connecting at once are queued, not refused


def _json(status: int, obj: dict, headers: dict | None = None):
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(obj).encode(), 0.0
