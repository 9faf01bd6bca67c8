"""The helpers every part shares: the text hash, Retry-After, redaction."""

from __future__ import annotations

import hashlib
import time
from email.utils import formatdate

import httpx

from classify.core.hashing import text_hash
from classify.core.http import redact, retry_after_seconds


def test_text_hash_is_the_key_existing_caches_were_written_with():
    # Before it moved to core, encoder.py, finetune.py and llm/fewshot.py each had a copy:
    # sha256 over the UTF-8 bytes, full hex digest. Anything else would orphan every cached vector.
    for text in ("", "kernel crash on H100", "naïve \u2028 emoji \U0001f600"):
        assert text_hash(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    from classify.encoders import encoder, finetune

    assert encoder.text_hash is text_hash and finetune.text_hash is text_hash


def test_few_shot_key_separates_fields():
    from classify.classifiers.llm.fewshot import _text_key
    from classify.core.records import Record

    assert _text_key(Record(id="1", title="a", body="bc")) != _text_key(Record(id="2", title="ab", body="c"))
    assert _text_key(Record(id="1", title="a", body="b")) == _text_key(Record(id="2", title="a", body="b"))


def test_retry_after_seconds_and_milliseconds():
    assert retry_after_seconds({"Retry-After": "7"}) == 7.0  # any case: a plain dict is not httpx.Headers
    assert retry_after_seconds(httpx.Headers({"retry-after": "2.5"})) == 2.5
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    for bad in ({}, None, {"retry-after": "soon"}, {"retry-after": "nan"}, {"retry-after": ""}):
        assert retry_after_seconds(bad) is None


def test_retry_after_http_date_is_measured_from_the_server_clock():
    # The server's clock says 1000 s after ours: the wait is 30 s all the same.
    server_now = time.time() + 1000
    h = {"retry-after": formatdate(server_now + 30, usegmt=True), "date": formatdate(server_now, usegmt=True)}
    assert 29 <= retry_after_seconds(h) <= 31
    # Without a Date header our own clock is all there is.
    assert 58 <= retry_after_seconds({"retry-after": formatdate(time.time() + 60, usegmt=True)}) <= 61
    assert retry_after_seconds({"retry-after": formatdate(time.time() - 60, usegmt=True)}) == 0.0


def test_redact_secrets_and_token_shapes():
    msg = "401 for key=SECRETVALUE, token ghp_abcdefghijklmnopqrstuvwxyz012345 and sk-proj-abcdefghijklmnop"
    out = redact(
        msg, ["SECRETVALUE", None, "ab"]
    )  # None and too-short secrets are skipped, not blanking "ab" everywhere
    assert "SECRETVALUE" not in out and "ghp_" not in out and "sk-proj" not in out and out.count("[redacted]") == 3
    # The GitHub client's messages carry repository names, which the broad pattern would cut into.
    url = "GET https://api.github.com/repos/acme/keystone-authentication/issues: HTTP 500"
    assert redact(url, [], keylike=False) == url
    assert redact(url) != url  # what keylike=False protects against
    assert redact("ghp_abcdefghijklmnopqrstuvwxyz0123", keylike=False) == "[redacted]"
