"""The workbench's JSON API (the pages use it; scripts and tests can too).

Every endpoint acts for the session's coder (classify.workbench.auth); reads are plain functions
and writes parse the body, then do the SQLite work in a thread: blocking work never runs on the
event loop, so one slow request does not stall every coder."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from classify.workbench import figures
from classify.workbench.auth import acting_coder, json_body, viewer
from classify.workbench.items import Code, ItemState
from classify.workbench.project import Forbidden, LabelError
from classify.workbench.web import Workbench, wb_of


def _code_json(c: Code) -> dict[str, Any]:
    return {"labels": c.labels, "note": c.note, "unsure": c.unsure, "at": c.at}


def _item_json(wb: Workbench, st: ItemState, coder: str | None) -> dict:
    out: dict[str, Any] = {
        "id": st.id,
        "title": st.record.get("title"),
        "url": st.record.get("url"),
        "assigned": st.assigned,
        "n_codes": len(st.codes),
    }
    if coder:
        first, mine = st.codes.get(coder), st.latest.get(coder)
        out["coded"] = mine is not None
        out["code"] = _code_json(mine) if mine else None  # the coder's latest code
        out["first_code"] = _code_json(first) if first else None  # what agreement and export use
        if mine is not None or wb.project.show_suggestions:
            out["suggestion"] = st.suggestion
        if wb.project.can_see_codes(st, coder):
            out["codes"] = {c: s.labels for c, s in st.codes.items()}  # first codes
            out["changed"] = {c: st.latest[c].labels for c in st.revised(wb.project.dims)}
            out["decision"] = (
                {"labels": st.decision.labels, "note": st.decision.note, "by": st.decision.adjudicator}
                if st.decision
                else None
            )
    return out


def items(request: Request) -> Response:
    wb = wb_of(request)
    coder = viewer(request, request.query_params.get("coder"))
    states = wb.project.states()
    if coder:
        states = [s for s in states if coder in s.assigned]
    return JSONResponse({"items": [_item_json(wb, s, coder) for s in states]})


def item(request: Request) -> Response:
    wb = wb_of(request)
    coder = viewer(request, request.query_params.get("coder"))
    st = wb.project.state(request.path_params["item_id"])
    return JSONResponse({**_item_json(wb, st, coder), "record": st.record})


async def code(request: Request) -> Response:
    wb = wb_of(request)
    body = await json_body(request)
    item_id = request.path_params["item_id"]

    def work() -> Response:
        wb.project.state(item_id)  # 404 before anything else
        coder = acting_coder(request, body.get("coder"))
        c = wb.project.add_code(item_id, coder, body.get("labels"), body.get("note", ""), body.get("unsure", False))
        return JSONResponse({"id": item_id, "coder": coder, **_code_json(c)}, status_code=201)

    return await run_in_threadpool(work)


async def decision(request: Request) -> Response:
    wb = wb_of(request)
    body = await json_body(request)
    item_id = request.path_params["item_id"]

    def work() -> Response:
        wb.project.state(item_id)
        coder = acting_coder(request, body.get("adjudicator"))
        d = wb.project.decide(item_id, coder, body.get("labels"), body.get("note", ""), body.get("proposals"))
        return JSONResponse({"id": item_id, "labels": d.labels, "note": d.note, "by": d.adjudicator, "at": d.at}, 201)

    return await run_in_threadpool(work)


def history(request: Request) -> Response:
    wb = wb_of(request)
    coder = acting_coder(request, request.query_params.get("coder"))
    st = wb.project.state(request.path_params["item_id"])
    if not wb.project.can_see_codes(st, coder):
        raise Forbidden(f"{coder} has not coded {st.id} yet")
    return JSONResponse({"id": st.id, "history": wb.project.history(st.id)})


def agreement(request: Request) -> Response:
    wb = wb_of(request)
    if wb.require_tokens:
        acting_coder(request)
    coders = wb.project.coders()
    a = request.query_params.get("a", coders[0])
    b = request.query_params.get("b", coders[1] if len(coders) > 1 else coders[0])
    for c in (a, b):
        wb.project.require_coder(c)
    if a == b:
        raise LabelError("agreement needs two different coders (?a=...&b=...)", {})
    return JSONResponse(wb.cached(("pair", a, b), lambda: figures.pair_agreement(wb.project, a, b, n_boot=wb.n_boot)))


def agreement_details(request: Request) -> Response:
    """The agreement page's figures for the session's coder: the items to adjudicate list codes, so
    it needs a session (blindness: only items the coder may see)."""
    wb = wb_of(request)
    who = acting_coder(request, request.query_params.get("coder"))
    return JSONResponse(wb.cached(("summary", who), lambda: figures.summary(wb.project, who, n_boot=wb.n_boot)))
