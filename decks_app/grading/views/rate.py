"""The rating queue (the Grade tab's "Rate"), keyboard first.

- `GET /grade/rate` (`.json`): the queue for the browser's rater (the `gambit_rater`
  cookie), its first item (or `?item=<session>/<ref>`), and each current grader's progress
  toward the minimum evidence.
- `GET /grade/rate/<session>/<ref>` (`.json`): one item (`ref` is a message ref id, or
  `conversation`); for htmx, the item's fragment alone.
- `POST /grade/rate/<session>/<ref>/rating`: `score` (-3..3), `reason`, `rater`; saves the
  rating and answers with the item, graders' scores and reasons now shown, and the progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from decks_app.grading.calibration import progress_figures, warm
from decks_app.grading.calibration_inputs import CONVERSATION, Inputs, read_inputs
from decks_app.grading.rate_items import (
    MOVE_KEYS,
    RATER_COOKIE,
    SCORE_KEYS,
    RateItem,
    is_rateable,
    queue_entry,
    rate_item,
)
from decks_app.grading.rate_queue import LIMIT as QUEUE_SHOWN
from decks_app.grading.rate_queue import build_queue
from decks_app.models import Session, Workspace
from decks_app.sessions import feedback as feedback_service
from decks_app.web.pages import (
    HtmxHttpRequest,
    PageData,
    error_response,
    json_response,
    render_page,
    wants_json,
)
from decks_app.workspaces.served import current_workspace

RATER_COOKIE_AGE = 365 * 24 * 3600


def rater_of(request: HtmxHttpRequest) -> str:
    """The browser's rater name (its cookie), "" when none or not a valid name."""
    try:
        return feedback_service.clean_rater(unquote(request.COOKIES.get(RATER_COOKIE, "")))
    except feedback_service.FeedbackError:
        return ""


def _item_or_404(workspace: Workspace, session_id: str, ref: str) -> tuple[Session, str | None]:
    session = Session.objects.filter(pk=session_id, workspace=workspace).first()
    wanted = None if ref == CONVERSATION else ref
    if session is None or not is_rateable(session, wanted):
        raise Http404("no such message or conversation to rate")
    return session, wanted


@dataclass
class RatePage(PageData):
    """The queue, its current item and the progress toward the minimum evidence."""

    workspace: Workspace
    rater: str
    queue: list[dict[str, Any]]  # the first LIMIT items of the queue
    item: RateItem | None
    progress: list[dict[str, Any]]
    position: int = 0
    queue_total: int = 0  # every item still to rate
    score_keys: list[tuple[str, int]] = field(default_factory=lambda: SCORE_KEYS)
    move_keys: list[tuple[str, str]] = field(default_factory=lambda: MOVE_KEYS)
    tab = "grade"

    @property
    def queue_nav(self) -> list[dict[str, Any]]:
        """What the page's script needs to move through the queue (no scores in the page)."""
        keys = ("target", "session", "messageRefId", "url")
        return [{key: entry[key] for key in keys} for entry in self.queue]

    def to_json(self) -> dict[str, Any]:
        return {
            "rater": self.rater or None,
            "queue": self.queue,
            "queueTotal": self.queue_total,
            "position": self.position,
            "item": self.item.to_json() if self.item else None,
            "progress": self.progress,
            "keys": {
                "scores": {key: score for key, score in self.score_keys},
                "moves": dict(self.move_keys),
            },
        }


def _page(
    workspace: Workspace, inputs: Inputs, rater: str, item: RateItem | None, queue: list[Any]
) -> RatePage:
    entries = [queue_entry(q) for q in queue[:QUEUE_SHOWN]]
    position = next((i for i, q in enumerate(entries) if item and q["target"] == item.target), 0)
    return RatePage(
        workspace, rater, entries, item, progress_figures(inputs), position, queue_total=len(queue)
    )


def _set_rater(request: HtmxHttpRequest) -> HttpResponse:
    """`?rater=NAME` (the name form without JavaScript): remember it in the cookie."""
    try:
        name = feedback_service.clean_rater(request.GET.get("rater"))
    except feedback_service.FeedbackError as exc:
        return error_response(request, str(exc), 400)
    response = redirect("grading:rate")
    if name:
        response.set_cookie(RATER_COOKIE, quote(name), max_age=RATER_COOKIE_AGE, samesite="Lax")
    else:
        response.delete_cookie(RATER_COOKIE)
    return response


@require_GET
def rate_page(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    if "rater" in request.GET and not wants_json(request, fmt):
        return _set_rater(request)
    workspace = current_workspace()
    rater = rater_of(request)
    inputs = read_inputs(workspace)
    queue = build_queue(inputs, rater) if rater else []
    item = None
    wanted = request.GET.get("item") or ""
    if wanted:
        session_id, _, ref = wanted.partition("/")
        session, ref_or_none = _item_or_404(workspace, session_id, ref or CONVERSATION)
        why = next((q.why for q in queue if q.session == session_id and q.ref == ref_or_none), None)
        item = rate_item(inputs, session, ref_or_none, rater, why)
    elif queue and rater:
        first = queue[0]
        session = Session.objects.get(pk=first.session)
        item = rate_item(inputs, session, first.ref, rater, first.why)
    data = _page(workspace, inputs, rater, item, queue)
    return render_page(request, "grading/rate.html", data, fmt)


@require_GET
def rate_item_view(
    request: HtmxHttpRequest, session_id: str, ref: str, fmt: str | None = None
) -> HttpResponse:
    workspace = current_workspace()
    session, wanted = _item_or_404(workspace, session_id, ref)
    rater = rater_of(request)
    inputs = read_inputs(workspace)
    queue = build_queue(inputs, rater) if rater else []
    why = next((q.why for q in queue if q.session == session.id and q.ref == wanted), None)
    item = rate_item(inputs, session, wanted, rater, why)
    if wants_json(request, fmt):
        return json_response(item.to_json())
    data = _page(workspace, inputs, rater, item, queue)
    return render_page(request, "grading/rate.html", data, fmt, fragment="item")


@require_POST
def rate_submit(request: HtmxHttpRequest, session_id: str, ref: str) -> HttpResponse:
    workspace = current_workspace()
    session, wanted = _item_or_404(workspace, session_id, ref)
    try:
        rater = feedback_service.clean_rater(request.POST.get("rater") or rater_of(request))
        if not rater:
            raise feedback_service.FeedbackError(
                "give your rater name first: ratings without a name cannot be told apart"
            )
        score = feedback_service.parse_score(request.POST.get("score"))
        if score is None:
            raise feedback_service.FeedbackError("give a score from -3 to 3")
        reason = request.POST.get("reason")
        if wanted is None:
            feedback_service.set_conversation_score(session, score, rater=rater, reason=reason)
        else:
            feedback_service.set_feedback(session, wanted, score, reason, rater=rater)
    except feedback_service.FeedbackError as exc:
        return error_response(request, str(exc), 400)
    inputs = read_inputs(workspace)
    item = rate_item(inputs, session, wanted, rater)
    progress = progress_figures(inputs)
    warm(workspace, inputs)  # the calibration page's figures, computed now off this request
    if wants_json(request) or request.headers.get("Accept", "").startswith("application/json"):
        return json_response({"item": item.to_json(), "progress": progress})
    if request.htmx:
        # the queue's size goes with the progress: it said "20 items" however many were rated
        left = len(build_queue(inputs, rater))
        data = RatePage(workspace, rater, [], item, progress, queue_total=left)
        return render(request, "grading/rate.html#rated", data.context())
    return redirect(item.urls["url"])
