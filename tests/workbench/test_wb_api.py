"""The workbench's JSON API and library (Starlette's TestClient): every refusal, blindness,
history, agreement figures, export as gold that `classify gold validate` accepts, and the
adjudications flowing into `classify review apply`. The rules of issue 20 (first codes count,
identity from the session, ...) are in test_wb_rules.py."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from typer.testing import CliRunner
from wb_helpers import EVIL_TITLE, ask, client, write_input

from classify.cli.main import app as cli
from classify.core.gold import load_gold
from classify.core.taxonomy import load_taxonomy
from classify.evaluation.metrics import kappa_ci
from classify.workbench.adjudicate import export
from classify.workbench.figures import pair_agreement
from classify.workbench.project import Project

runner = CliRunner()


@pytest.fixture
def project(tmp_path) -> Project:
    p = Project.create(tmp_path / "proj", write_input(tmp_path / "in.jsonl"), ["a", "b"])
    yield p
    p.close()


def _ids(p: Project) -> list[str]:
    return p.item_ids()


CODE = {"symptom": "crash", "root_cause": None}


def test_refusals_store_nothing(project):
    i = _ids(project)[0]
    a = client(project, "a")
    st, got = ask(a, "POST", f"/api/items/{i}/codes", {"labels": {"symptom": "explosion", "root_cause": None}})
    assert st == 422 and "explosion" in got["error"] and "crash" in got["allowed"]["symptom"]
    assert "software_incompatibility" in got["allowed"]["root_cause"]
    st, got = ask(a, "POST", f"/api/items/{i}/codes", {"coder": "a", "labels": {"symptom": "crash"}})
    assert st == 422 and "missing label for root_cause" in got["error"]
    st, got = ask(a, "POST", f"/api/items/{i}/codes", {"coder": "a", "labels": {**CODE, "mood": "x"}})
    assert st == 422 and "mood" in got["error"]
    st, got = ask(a, "POST", "/api/items/nope-1/codes", {"coder": "a", "labels": CODE})
    assert st == 404 and "nope-1" in got["error"]
    st, got = ask(client(project, "mallory"), "POST", f"/api/items/{i}/codes", {"labels": CODE})
    assert st == 403 and "log in first" in got["error"]  # an unknown name in the cookie is no session
    st, got = ask(client(project), "POST", f"/api/items/{i}/codes", {"coder": "a", "labels": CODE})
    assert st == 403  # no session: a claimed coder is not an identity
    # not JSON: a cross-site form could send this without a preflight
    st, got = ask(a, "POST", f"/api/items/{i}/codes", raw=b"coder=a", headers={"Content-Type": "text/plain"})
    assert st == 415
    st, got = ask(a, "POST", f"/api/items/{i}/codes", raw=b"{not json", headers={"Content-Type": "application/json"})
    assert st == 400
    st, got = ask(a, "POST", f"/api/items/{i}/codes", {"labels": CODE}, headers={"Origin": "http://evil.example"})
    assert st == 403 and "cross-origin" in got["error"]
    st, got = ask(a, "GET", "/api/items", headers={"Host": "attacker.example"})
    assert st == 400  # DNS rebinding: a foreign Host name is refused
    assert all(not s.codes for s in project.states())
    with project._lock:
        assert project.db.execute("SELECT COUNT(*) FROM codes").fetchone()[0] == 0


def test_coder_not_assigned_is_refused(tmp_path):
    p = Project.create(tmp_path / "p", write_input(tmp_path / "in.jsonl"), ["a", "b", "c"], overlap=0.0)
    st = p.states()[0]
    other = next(c for c in p.coders() if c not in st.assigned)
    code, got = ask(client(p, other), "POST", f"/api/items/{st.id}/codes", {"labels": CODE})
    assert code == 403 and "not assigned" in got["error"]
    p.close()


def test_blind_until_coded_and_history_kept(tmp_path):
    inp = write_input(tmp_path / "in.jsonl")
    rows = [json.loads(x) for x in inp.read_text().splitlines()]
    rows[1].update(symptom="hang", symptom_confidence=0.81, model="embed-logreg")  # a model's suggestion
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = Project.create(tmp_path / "p", inp, ["a", "b"])
    i = rows[1]["id"]
    a, b = client(p, "a"), client(p, "b")
    assert ask(a, "POST", f"/api/items/{i}/codes", {"labels": CODE, "note": "first"})[0] == 201
    st, got = ask(b, "GET", f"/api/items/{i}")
    assert st == 200 and "codes" not in got and "suggestion" not in got  # b has not coded: blind
    st, got = ask(b, "GET", "/api/items")
    assert all("codes" not in it and "suggestion" not in it for it in got["items"])
    assert ask(b, "GET", f"/api/items/{i}/history")[0] == 403
    assert ask(b, "GET", "/api/agreement/details")[1]["disagreements"] == []
    st, got = ask(a, "GET", f"/api/items/{i}")
    assert got["suggestion"]["symptom"]["label"] == "hang" and got["codes"] == {"a": CODE}
    # a changes their mind: a new row, the old one stays in the history (and stays a's first code)
    assert ask(a, "POST", f"/api/items/{i}/codes", {"labels": {**CODE, "symptom": "hang"}})[0] == 201
    st, got = ask(a, "GET", f"/api/items/{i}/history")
    assert [h["labels"]["symptom"] for h in got["history"]] == ["crash", "hang"]
    assert all(h["by"] == "a" and h["at"] for h in got["history"])
    st, got = ask(a, "GET", f"/api/items/{i}")
    assert got["code"]["labels"]["symptom"] == "hang" and got["first_code"]["labels"]["symptom"] == "crash"
    assert got["codes"] == {"a": CODE} and got["changed"] == {"a": {**CODE, "symptom": "hang"}}
    p.close()


def test_agreement_matches_an_independent_kappa_and_is_null_when_undefined(project):
    ids = _ids(project)
    a = ["crash", "crash", "hang", "build_failure", "crash"]
    b = ["crash", "hang", "hang", "build_failure", "crash"]
    ca, cb = client(project, "a"), client(project, "b")
    st, got = ask(ca, "GET", "/api/agreement")
    assert st == 200 and got["symptom"] == {"kappa": None, "lo": None, "hi": None, "n": 0, "small": False}
    for i, x, y in zip(ids, a, b):
        ask(ca, "POST", f"/api/items/{i}/codes", {"labels": {"symptom": x, "root_cause": None}})
        ask(cb, "POST", f"/api/items/{i}/codes", {"labels": {"symptom": y, "root_cause": "software_incompatibility"}})
    st, got = ask(ca, "GET", "/api/agreement")
    # by hand: po = 4/5; pe = sum over labels of p_a * p_b
    pa = {"crash": 3 / 5, "hang": 1 / 5, "build_failure": 1 / 5}
    pb = {"crash": 2 / 5, "hang": 2 / 5, "build_failure": 1 / 5}
    pe = sum(pa[k] * pb[k] for k in pa)
    expected = (4 / 5 - pe) / (1 - pe)
    assert got["symptom"]["kappa"] == pytest.approx(expected) and got["symptom"]["n"] == 5
    assert got["symptom"]["lo"] <= expected <= got["symptom"]["hi"]
    assert got["symptom"]["small"] is True  # 5 items: under 30
    # a said "not shown" throughout: no item for the cause's own kappa; the cause-shown row has them all
    assert got["root_cause"] == {"kappa": None, "lo": None, "hi": None, "n": 0, "small": False}
    shown = got["root_cause_shown"]
    assert shown["n"] == 5 and shown["kappa"] == pytest.approx(0.0) and shown["single_category"] == ["a", "b"]
    # the same figure gold stats computes (kappa_ci is what coder_agreement calls)
    assert kappa_ci(a, b, n_boot=10)["kappa"] == pytest.approx(expected)


def test_kappa_undefined_when_both_use_one_category(project):
    ids = _ids(project)[:3]
    for i in ids:
        for c in "ab":
            project.add_code(i, c, {"symptom": "crash", "root_cause": "software_incompatibility"})
    got = pair_agreement(project, "a", "b", n_boot=50)
    assert got["symptom"]["kappa"] is None and got["symptom"]["n"] == 3  # perfect but undefined: n/a, not 1


def test_adjudication_export_validate_and_review_apply(project, tmp_path, monkeypatch):
    ids = _ids(project)
    for n, i in enumerate(ids):
        project.add_code(i, "a", {"symptom": "crash", "root_cause": None})
        project.add_code(
            i, "b", {"symptom": "crash" if n else "hang", "root_cause": None}, note="b's note", unsure=n == 0
        )
    out = tmp_path / "gold.jsonl"
    early = export(project, tmp_path / "early.jsonl")  # the open disagreement is left out, and named
    assert early.n == 4 and early.open_items == {"disagreement not adjudicated": [ids[0]]} and early.queue is None
    ca = client(project, "a")
    bad = {"adjudicator": "a", "labels": {"symptom": "hang", "root_cause": None}, "note": ""}
    st, got = ask(ca, "POST", f"/api/items/{ids[0]}/decision", bad)
    assert st == 422 and "note" in got["error"]
    prop = {"kind": "add_cue", "dimension": "symptom", "category": "nonexistent", "cue": "include", "text": "x"}
    st, got = ask(ca, "POST", f"/api/items/{ids[0]}/decision", {**bad, "note": "why", "proposals": [prop]})
    assert st == 422 and "nonexistent" in got["error"]
    prop["category"] = "hang"
    prop["text"] = "a kernel that never returns"
    st, got = ask(
        ca, "POST", f"/api/items/{ids[0]}/decision", {**bad, "note": "it hangs, no crash", "proposals": [prop]}
    )
    assert st == 201, got
    r = runner.invoke(cli, ["workbench", "export", "--project", str(project.folder), "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 5
    first = rows[0]
    assert first["symptom"] == "hang" and first["coder_a"] == {"symptom": "crash", "root_cause": None}
    assert first["coder_b"]["symptom"] == "hang" and "it hangs" in first["adjudication_note"]
    assert "CODEBOOK:" in first["adjudication_note"]
    r = runner.invoke(cli, ["gold", "validate", "--gold", str(out)])
    assert r.exit_code == 0 and "ok: 5 records" in r.output, r.output
    g = load_gold(out, load_taxonomy())
    assert g.coders["a"]["symptom"][0] == "crash"
    # the adjudication flows into the review loop's apply step: new gold with history, new codebook
    queue = tmp_path / "gold-review" / "queue.json"
    assert queue.exists()
    r = runner.invoke(
        cli,
        ["review", "apply", "--queue", str(queue), "--out-taxonomy", str(tmp_path / "taxonomy-v2.yaml")],
    )
    assert r.exit_code == 0, r.output
    v2 = [json.loads(x) for x in (tmp_path / "gold.v2.jsonl").read_text().splitlines()]
    hist = v2[0]["review_history"][0]
    assert hist["reviewer"] == "a" and hist["action"] == "keep" and hist["new"] == "hang"
    tax2 = load_taxonomy(tmp_path / "taxonomy-v2.yaml")
    assert "a kernel that never returns" in tax2.dimensions["symptom"].category("hang").include
    # csv and a dataset folder too
    for name in ("gold.csv", "gold.hf"):
        r = runner.invoke(cli, ["workbench", "export", "-p", str(project.folder), "--out", str(tmp_path / name)])
        assert r.exit_code == 0, r.output
        assert runner.invoke(cli, ["gold", "validate", "--gold", str(tmp_path / name)]).exit_code == 0


def test_escaping_of_issue_text(project):
    i = _ids(project)[0]
    html = client(project, "a").get(f"/code/{i}").text
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned" in html
    assert 'onerror="window' not in html
    assert 'href="javascript' not in html
    assert EVIL_TITLE not in html


def test_cli_refusals(tmp_path):
    inp = write_input(tmp_path / "in.jsonl")
    proj = tmp_path / "p"
    r = runner.invoke(cli, ["workbench", "serve", "--project", str(proj)])
    assert r.exit_code == 2 and "no project here" in r.output
    r = runner.invoke(cli, ["workbench", "serve", "--project", str(proj), "--input", str(inp), "--coders", "a,a"])
    assert r.exit_code == 2 and "twice" in r.output
    r = runner.invoke(
        cli, ["workbench", "serve", "--project", str(proj), "--input", str(inp), "--coders", "a", "--overlap", "1"]
    )
    assert r.exit_code == 2 and "two coders" in r.output
    assert not (proj / "workbench.sqlite").exists()
    Project.create(proj, inp, ["a", "b"]).close()
    r = runner.invoke(cli, ["workbench", "serve", "--project", str(proj), "--input", str(inp)])
    assert r.exit_code == 2 and "--input only apply when creating" in r.output
    r = runner.invoke(cli, ["workbench", "serve", "--project", str(proj), "--coders", "a,c"])
    assert r.exit_code == 2 and "coders are a,b" in r.output
    # any other address than loopback needs tokens: refused before binding
    r = runner.invoke(cli, ["workbench", "serve", "--project", str(proj), "--host", "0.0.0.0"])
    assert r.exit_code == 2 and "needs a token for every coder" in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "title": "", "body": ""}\n')
    r = runner.invoke(
        cli, ["workbench", "serve", "--project", str(tmp_path / "q"), "--input", str(bad), "--coders", "a,b"]
    )
    assert r.exit_code == 2 and "empty title and body" in r.output
    r = runner.invoke(cli, ["workbench", "export", "--project", str(proj), "--out", str(tmp_path / "g.jsonl")])
    assert r.exit_code == 2 and "nothing to export" in r.output


def test_tokens_required_beyond_loopback(tmp_path):
    p = Project.create(tmp_path / "p", write_input(tmp_path / "in.jsonl"), ["a", "b"])
    r = runner.invoke(cli, ["workbench", "tokens", "--project", str(p.folder)])
    assert r.exit_code == 0
    tokens = dict(line.split("\t") for line in r.output.splitlines() if "\t" in line)
    assert set(tokens) == {"a", "b"}
    p.close()
    p = Project.open(tmp_path / "p")
    with p._lock:
        stored = [h for (h,) in p.db.execute("SELECT token_hash FROM coders")]
    assert tokens["a"] not in stored and all(len(h) == 64 for h in stored)  # hashed, not the token
    i = p.item_ids()[0]
    c = client(p, "a", require_tokens=True)  # the picker's cookie counts for nothing in token mode
    assert ask(c, "POST", f"/api/items/{i}/codes", {"coder": "a", "labels": CODE})[0] == 403
    auth = {"Authorization": f"Bearer {tokens['b']}"}
    st, got = ask(c, "POST", f"/api/items/{i}/codes", {"coder": "a", "labels": CODE}, headers=auth)
    assert st == 403 and "belongs to 'b'" in got["error"]
    st, got = ask(c, "POST", f"/api/items/{i}/codes", {"coder": "b", "labels": CODE}, headers=auth)
    assert st == 201
    assert ask(c, "GET", "/api/agreement")[0] == 403
    p.close()


def test_form_posts_need_the_csrf_token(project):
    c = client(project)
    c.cookies.set("wb_csrf", "real")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert ask(c, "POST", "/login", raw=b"coder=a&csrf=guess", headers=form)[0] == 403
    assert ask(c, "POST", "/login", raw=b"coder=a&csrf=real", headers=form)[0] == 303


def test_wal_and_version(project):
    with project._lock:
        assert project.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert Path(project.folder / "workbench.sqlite").exists()


def test_served_url_brackets_an_ipv6_host():
    from classify.workbench.server import served_url

    assert served_url("::1", 8765) == "http://[::1]:8765/"
    assert served_url("127.0.0.1", 8765) == "http://127.0.0.1:8765/"
    assert served_url("localhost", 80) == "http://localhost:80/"


def test_kappa_zero_when_one_coder_used_one_category_is_explained(project):
    ids = _ids(project)[:4]
    for i, y in zip(ids, ["crash", "hang", "crash", "hang"]):
        project.add_code(i, "a", {"symptom": "crash", "root_cause": None})  # a: one category throughout
        project.add_code(i, "b", {"symptom": y, "root_cause": None})
    got = pair_agreement(project, "a", "b", n_boot=50)
    assert got["symptom"]["kappa"] == pytest.approx(0.0) and got["symptom"]["single_category"] == ["a"]
    st, page = ask(client(project, "a"), "GET", "/agreement")
    assert st == 200
    assert "no better than chance" in page and "used a single category" in page


def test_an_encoded_slash_is_part_of_the_item_id(tmp_path):
    # ids the pages URL-encode as one path segment: `a/history` is an item, not the history of `a`
    inp = write_input(tmp_path / "in.jsonl", n=5, evil=False)
    rows = [json.loads(x) for x in inp.read_text().splitlines()]
    ids = ["a", "a/history", "a/codes", "50%2Foff", "é/x"]
    for r, i in zip(rows, ids):
        r["id"] = i
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = Project.create(tmp_path / "p", inp, ["a", "b"])
    a = client(p, "a")
    seg = {i: quote(i, safe="") for i in ids}
    for n, i in enumerate(ids[1:]):  # "a" itself stays uncoded: its history is 403 for coder a
        symptom = ["crash", "hang", "build_failure", "crash"][n]
        st, got = ask(a, "POST", f"/api/items/{seg[i]}/codes", {"labels": {**CODE, "symptom": symptom}})
        assert st == 201 and got["id"] == i, (i, st, got)
    for i in ids:
        st, got = ask(a, "GET", f"/api/items/{seg[i]}")
        assert st == 200 and got["id"] == i, (i, st, got)
    for i in ids[1:]:
        st, got = ask(a, "GET", f"/api/items/{seg[i]}/history")
        assert st == 200 and got["id"] == i and len(got["history"]) == 1
    assert ask(a, "GET", "/api/items/a/history")[0] == 403  # a raw slash: the history of `a`
    # the codes went to the items named, not to `a`
    assert [s.id for s in p.states() if s.codes] == ids[1:]
    p.close()
