"""The workbench's HTML pages: log in, code, agreement, adjudication, review of routed items.

Pages that only read are plain functions (Starlette runs them in a thread, off the event loop);
form posts read the form, then do the project work in a thread too."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from classify.core.errors import ClassifyError
from classify.workbench import figures
from classify.workbench.auth import form_fields, session_coder
from classify.workbench.items import ItemState
from classify.workbench.project import Forbidden, LabelError, NotFound, Project
from classify.workbench.render import render, safe_url
from classify.workbench.reviewtask import ReviewTask
from classify.workbench.web import page, wb_of


def _to_login() -> RedirectResponse:
    return RedirectResponse("/", status_code=303)


def _path(prefix: str, item_id: str) -> str:
    from urllib.parse import quote

    return prefix + quote(item_id, safe="")


def _issue(record: dict) -> dict:
    """The issue as _issue.html shows it: text rendered for reading, a link only to http(s)."""
    return {
        "rec": record,
        "body": render(record.get("body")),
        "discussion": render(record.get("discussion")),
        "url": safe_url(record.get("url")),
    }


def home(request: Request) -> Response:
    coder = session_coder(request)
    if coder:
        return RedirectResponse("/code", status_code=303)
    return page(request, "login.html", None)


async def login(request: Request) -> Response:
    wb = wb_of(request)
    form = await form_fields(request)
    resp = RedirectResponse("/code", status_code=303)
    if wb.require_tokens:
        if not await run_in_threadpool(wb.project.coder_for_token, form.get("token")):
            return await run_in_threadpool(page, request, "login.html", None, error="unknown token")
        resp.set_cookie("wb_token", form["token"], httponly=True, samesite="strict")
    else:
        name = form.get("coder")
        if name not in await run_in_threadpool(wb.project.coders):
            return await run_in_threadpool(page, request, "login.html", None, error=f"unknown coder {name!r}")
        resp.set_cookie("wb_coder", str(name), httponly=True, samesite="strict")
    return resp


async def logout(request: Request) -> Response:
    await form_fields(request)
    resp = _to_login()
    resp.delete_cookie("wb_coder")
    resp.delete_cookie("wb_token")
    return resp


def _my_items(project: Project, coder: str) -> list[ItemState]:
    return [s for s in project.states() if coder in s.assigned]


def code_page(request: Request) -> Response:
    wb = wb_of(request)
    coder = session_coder(request)
    if not coder:
        return _to_login()
    mine = _my_items(wb.project, coder)
    if not mine:
        return page(request, "code.html", coder, item=None, done=True)
    wanted = request.path_params.get("item_id")
    if wanted is None:
        st = next((s for s in mine if coder not in s.codes), None)
        if st is None:
            return page(request, "code.html", coder, item=None, done=True, n=len(mine))
    else:
        st = next((s for s in mine if s.id == wanted), None)
        if st is None:
            raise NotFound(f"no item {wanted!r} among {coder}'s items")
    i = mine.index(st)
    first, mine_code = st.codes.get(coder), st.latest.get(coder)
    show_sug = wb.project.show_suggestions or mine_code is not None  # blind until coded
    prev_id = mine[i - 1].id if i > 0 else None
    next_id = mine[i + 1].id if i + 1 < len(mine) else None
    return page(
        request,
        "code.html",
        coder,
        item=st,
        **_issue(st.record),
        pos=i + 1,
        n=len(mine),
        my_code=mine_code,
        first_code=first,
        suggestion=st.suggestion if show_sug else None,
        state_json={
            "item": st.id,
            "coder": coder,
            "dims": [{"id": d, "categories": wb.project.taxonomy.dimensions[d].ids} for d in wb.project.dims],
            "code": mine_code.labels if mine_code else None,
            "note": mine_code.note if mine_code else "",
            "unsure": mine_code.unsure if mine_code else False,
            "prev": prev_id,
            "next": next_id,
        },
    )


def _summary_page(request: Request, template: str) -> Response:
    """A page over the coder's agreement summary (computed once per coder and database state)."""
    wb = wb_of(request)
    coder = session_coder(request)
    if not coder:
        return _to_login()
    s = wb.cached(("summary", coder), lambda: figures.summary(wb.project, coder, n_boot=wb.n_boot))
    return page(request, template, coder, s=s)


def agreement_page(request: Request) -> Response:
    return _summary_page(request, "agreement.html")


def adjudicate_list(request: Request) -> Response:
    return _summary_page(request, "adjudicate_list.html")


def adjudicate_page(request: Request) -> Response:
    coder = session_coder(request)
    if not coder:
        return _to_login()
    return _adjudicate_view(request, coder, request.path_params["item_id"])


def _adjudicate_view(request: Request, coder: str, item_id: str, error: str | None = None) -> Response:
    wb = wb_of(request)
    st = wb.project.state(item_id)
    if not wb.project.can_see_codes(st, coder):
        raise Forbidden(f"code {st.id} yourself before you see the other codes")
    tax = wb.project.taxonomy
    return page(
        request,
        "adjudicate.html",
        coder,
        item=st,
        **_issue(st.record),
        disagree=st.disagreeing(wb.project.dims),
        reasons=st.reasons(wb.project.dims),
        revised=st.revised(wb.project.dims),
        cats={d: {c.id: c for c in tax.dimensions[d].categories} for d in wb.project.dims},
        history=wb.project.history(st.id),
        error=error,
    )


def _proposals(form: dict[str, str]) -> list[dict]:
    if not form.get("proposal_text", "").strip():
        return []
    kind = form.get("proposal_kind", "add_cue_include")
    dim, _, cat = form.get("proposal_category", "").partition(".")
    text = form["proposal_text"].strip()
    if kind == "edit_definition":
        return [{"kind": "edit_definition", "dimension": dim, "category": cat, "definition": text}]
    cue = "exclude" if kind == "add_cue_exclude" else "include"
    return [{"kind": "add_cue", "dimension": dim, "category": cat, "cue": cue, "text": text}]


async def adjudicate_post(request: Request) -> Response:
    coder = session_coder(request)
    if not coder:
        return _to_login()
    form = await form_fields(request)
    item_id = request.path_params["item_id"]

    def work() -> Response:
        wb = wb_of(request)
        labels = {d: (form.get(f"label_{d}") or None) for d in wb.project.dims}
        try:
            wb.project.decide(item_id, coder, labels, form.get("note", ""), _proposals(form))
        except (LabelError, Forbidden) as e:  # shown on the page (which refuses, itself, a coder still blind)
            return _adjudicate_view(request, coder, item_id, error=str(e))
        return RedirectResponse(_path("/adjudicate/", item_id), status_code=303)

    return await run_in_threadpool(work)


def _review_task(request: Request) -> ReviewTask:
    task = wb_of(request).review
    if task is None:
        raise NotFound("no review queue in this project (serve with --queue review/queue.json)")
    return task


def review_list(request: Request) -> Response:
    coder = session_coder(request)
    if not coder:
        return _to_login()
    task = _review_task(request)
    return page(request, "review_list.html", coder, rt=task, decided=task.decided())


def review_page(request: Request) -> Response:
    coder = session_coder(request)
    if not coder:
        return _to_login()
    return _review_view(request, coder, int(request.path_params["n"]))


def _review_view(request: Request, coder: str, n: int, error: str | None = None) -> Response:
    task = _review_task(request)
    it = task.item(n)
    return page(
        request,
        "review.html",
        coder,
        n=n,
        it=it,
        total=len(task.queue.items),
        **_issue(it.record),
        cats=task.taxonomy.dimensions[it.dimension].categories,
        decided=task.decided().get(it.key),
        error=error,
    )


async def review_post(request: Request) -> Response:
    coder = session_coder(request)
    if not coder:
        return _to_login()
    review = _review_task(request)
    form = await form_fields(request)
    n = int(request.path_params["n"])

    def work() -> Response:
        try:
            review.decide(n, coder, form.get("action", ""), form.get("label") or None, form.get("note", ""))
        except ClassifyError as e:
            return _review_view(request, coder, n, error=str(e))
        nxt = n + 1 if n + 1 <= len(review.queue.items) else n
        return RedirectResponse(f"/review/{nxt}", status_code=303)

    return await run_in_threadpool(work)
