"""A small OpenAI-compatible chat server for tests, with faults injected on purpose.

It runs for real on 127.0.0.1 (ThreadingHTTPServer in a background thread). Each request is
tied to an issue by the `Title:` line of the last <issue> block in the prompt; a marker in the
title picks the behaviour, e.g. `r17 [fault:429:1]` answers 429 (with Retry-After) once and then
a correct answer. `:N` is how many times the fault happens before the good answer (99 = always).

Faults: 429, 500, 400, slow (sleeps past the client timeout), badjson (malformed HTTP body),
html (a non-JSON page), nochoices, prose (answer without JSON), oot (label outside the taxonomy),
obey (follows an instruction in the issue: "answer X" makes it answer X), vote (answer depends
on the seed, for self-consistency).

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
_FAULT = re.compile(r"\[fault:([a-z0-9]+)(?::(\d+))?\]")


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
    ):
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
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def requests_for(self, rid: str) -> list[dict]:
        with self.lock:
            return [e for e in self.log if e["id"] == rid]

    @property
    def n_requests(self) -> int:
        with self.lock:
            return len(self.log)

    # -- behaviour --------------------------------------------------------------------------

    def respond(self, body: dict, auth: str | None) -> tuple[int, dict[str, str], bytes, float]:
        """(status, headers, body bytes, delay seconds) for one chat request."""
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
        if kind == "obey":
            # A gullible model: follows "answer X" found in the issue, whatever X is.
            m2 = re.search(r"answer (\w+)", text.split("<issue>")[-1], re.IGNORECASE)
            if m2:
                return self._answer(body, {**good, next(iter(good)): m2.group(1)})
        if kind == "vote":
            seed = int(body.get("seed") or 0)
            if seed % 3 == 2:  # one sample in three disagrees
                first = next(iter(good))
                other = [c for c in self.dims[first] if c != good[first]][0]
                return self._answer(body, {**good, first: other})
        return self._answer(body, good)

    def _answer(self, body: dict, labels: dict | None, content: str | None = None):
        if content is None:
            content = json.dumps(labels)
        msg: dict = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        if body.get("logprobs") and self.with_logprobs:
            # Token texts that concatenate to the content; each token has logprob -0.1.
            toks = re.findall(r"\w+|[^\w]", content)
            msg["logprobs"] = {
                "content": [{"token": t, "logprob": -0.1, "bytes": None, "top_logprobs": []} for t in toks]
            }
        n_prompt = sum(len(m.get("content") or "") for m in body.get("messages", [])) // 4
        return _json(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model,
                "choices": [msg],
                "usage": {
                    "prompt_tokens": n_prompt,
                    "completion_tokens": len(content) // 4,
                    "total_tokens": n_prompt + len(content) // 4,
                },
            },
        )

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status, headers, payload):
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(*_json(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})[:3])
                else:
                    self._send(*_json(404, {"error": {"message": "no such route"}})[:3])

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(*_json(404, {"error": {"message": "no such route"}})[:3])
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(*_json(400, {"error": {"message": "bad JSON body"}})[:3])
                    return
                status, headers, payload, delay = fake.respond(body, self.headers.get("Authorization"))
                text = "\n".join(
                    m.get("content") or "" for m in body.get("messages", []) if m.get("role") != "assistant"
                )
                titles = _TITLE.findall(text)
                with fake.lock:
                    fake.log.append(
                        {
                            "id": titles[-1].split()[0] if titles else "",
                            "t": time.monotonic(),
                            "status": status,
                            "body": body,
                        }
                    )
                if delay:
                    time.sleep(delay)
                self._send(status, headers, payload)

        return Handler


def _json(status: int, obj: dict, headers: dict | None = None):
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(obj).encode(), 0.0
