"""The Grade tab: pick a session and a grader, run it, read and flag the results.

- `GET /grade/` (`/grade.json`): sessions to grade, the selected session's graders and its
  grade history (simulator runs and gradings imported from the CLI).
- `POST /grade/run`: queue a grade run; redirects to its page.
- `GET /grade/runs/<run>/` (`.json`): one grade run: status, per-turn or conversation
  results with score, reason, evidence, the input the grader saw, and flags.
- `POST /grade/runs/<run>/flag/<n>` toggles the flag of result n (an optional reason);
  `POST .../flag/<n>/reason` changes the reason of a flagged result;
  `POST /grade/runs/<run>/stop` cancels a queued or running grade.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from decks_app.grading import grades as grading
from decks_app.models import Run, Session
from decks_app.sessions import keyset, listing
from decks_app.sessions.actions import get_session, stop_session
from decks_app.sessions.search import Snippet
from decks_app.web.live import live_view
from decks_app.web.pages import (
    HtmxHttpRequest,
    PageData,
    error_response,
    json_response,
    live_part,
    render_page,
    wants_json,
)
from decks_app.web.routes import query_url
from decks_app.workspaces.served import current_workspace


@dataclass
class SessionChoices(keyset.PageLinks):
    """The Grade tab's session picker: a page of the gradable sessions matching `q` (newest
    first, keyset pages) and where `q` matched their conversation."""

    q: str
    page: keyset.Page
    matches: dict[str, Snippet]

    @classmethod
    def of(cls, request: HtmxHttpRequest, workspace: Any) -> SessionChoices:
        q = request.GET.get("q", "")[:200].strip()
        page, matches = listing.pick_sessions(
            listing.gradable_sessions(workspace, q),
            q=q,
            before=request.GET.get("before", ""),
            after=request.GET.get("after", ""),
        )
        return cls(q=q, page=page, matches=matches)

    @property
    def sessions(self) -> list[Session]:
        return self.page.rows

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [{"session": s, "match": self.matches.get(s.id)} for s in self.sessions]

    @property
    def keyset_page(self) -> keyset.Page:
        return self.page

    def page_url(self, fmt: str | None = None, **cursor: str | None) -> str:
        return query_url("grading:grade_sessions", ["json"] if fmt else [], q=self.q, **cursor)

    def to_json(self) -> dict[str, Any]:
        return {
            "q": self.q,
            "sessions": [
                {
                    "id": s.id,
                    "deck": s.deck_path,
                    "label": s.deck_label,
                    "origin": s.origin,
                    "createdAt": s.created_at.isoformat(),
                    "match": m.to_json() if (m := self.matches.get(s.id)) else None,
                }
                for s in self.sessions
            ],
            "page": self.page_json(),
        }


@require_GET
def grade_tab(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    try:
        choices = SessionChoices.of(request, workspace)
    except keyset.BadCursor as exc:
        return error_response(request, str(exc), 400, fmt, back=reverse("grading:grade"))
    sessions = choices.sessions
    wanted = request.GET.get("session") or ""
    selected = get_session(wanted) if wanted else (sessions[0] if sessions else None)
    if wanted and (selected is None or selected.workspace_id != workspace.id):
        raise Http404("no such session")
    data = GradeTabPage(
        workspace=workspace,
        choices=choices,
        selected=selected,
        graders=grading.graders_for(workspace, selected.deck_path) if selected else [],
        runs=[grading.grade_run_dict(r) for r in grading.grade_runs(selected)] if selected else [],
        imported=grading.imported_gradings(selected) if selected else [],
    )
    return render_page(request, "grading/grade.html", data, fmt, fragment="history")


@dataclass
class GradeTabPage(PageData):
    """Sessions to grade, the selected one's graders, its grade runs and the gradings
    recorded elsewhere (each with its rows)."""

    workspace: Any
    choices: SessionChoices
    selected: Session | None
    graders: list[Any]
    runs: list[dict[str, Any]]
    imported: list[dict[str, Any]]
    tab = "grade"

    @property
    def sessions(self) -> list[Session]:
        return self.choices.sessions

    @property
    def any_session(self) -> bool:
        """Whether there is anything to grade at all (a search may just match nothing)."""
        return bool(self.sessions or self.choices.q or self.choices.page.newer)

    @property
    def imported_rows(self) -> list[dict[str, Any]]:
        if self.selected is None:
            return []
        return [
            {**g, "rows": grading.result_rows(self.selected, {**g, "runId": g.get("id")})}
            for g in self.imported
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "tab": self.tab,
            "session": self.selected.id if self.selected else None,
            # the picker's page of sessions (`page` has the cursors of the pages beside it)
            **self.choices.to_json(),
            "graders": [g.to_dict() for g in self.graders],
            "runs": self.runs,
            "imported": self.imported,
        }


@require_GET
def grade_sessions(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    """The session picker alone (+JSON): the Grade tab's search-as-you-type and its pages."""
    workspace = current_workspace()
    if not wants_json(request, fmt) and not request.htmx:  # a link followed without htmx
        query = request.META.get("QUERY_STRING", "")
        return redirect(reverse("grading:grade") + (f"?{query}" if query else ""))
    try:
        choices = SessionChoices.of(request, workspace)
    except keyset.BadCursor as exc:
        return error_response(request, str(exc), 400, fmt, back=reverse("grading:grade"))
    if wants_json(request, fmt):
        return json_response(choices.to_json())
    wanted = get_session(request.GET.get("session", ""))
    selected = wanted if wanted is not None and wanted.workspace_id == workspace.id else None
    data = GradeTabPage(
        workspace=workspace, choices=choices, selected=selected, graders=[], runs=[], imported=[]
    )
    return render(request, "grading/grade.html#choices", data.context())


@require_POST
def grade_start(request: HtmxHttpRequest) -> HttpResponse:
    session = get_session(request.POST.get("session", ""))
    if session is None or session.workspace_id != current_workspace().id:
        return error_response(request, "pick a session to grade", 400)
    try:
        run = grading.start_grading(session, request.POST.get("grader", ""))
    except grading.GradingError as exc:
        return error_response(request, str(exc), 400)
    if wants_json(request):
        return json_response(grading.grade_run_dict(run), status=202)
    if request.htmx:
        return HttpResponseClientRedirect(reverse("grading:grade_run", args=[run.id]))
    return redirect("grading:grade_run", run_id=run.id)


def _run_or_404(run_id: str) -> Run:
    run = grading.grade_run_or_none(run_id)
    if run is None or run.session.source is None:
        raise Http404("no such grade run")
    return run


def _graded(run: Run) -> Session:
    """The session a grade run graded (`_run_or_404` made sure there is one)."""
    source = run.session.source
    if source is None:
        raise Http404("no such grade run")
    return source


RUN_TEMPLATE = "grading/grade_run.html"


@dataclass
class GradeRunPage(PageData):
    """One grade run: the run, what it found (`grade`, the twin) and the session it graded."""

    live_partial = "result"  # the part its live view sends

    run: Run
    graded: Session
    grade: dict[str, Any]
    tab = "grade"

    @classmethod
    def of(cls, run: Run) -> GradeRunPage:
        return cls(run=run, graded=_graded(run), grade=grading.grade_run_dict(run))

    @property
    def workspace(self) -> Any:
        return self.run.session.workspace

    @property
    def active(self) -> bool:
        return self.grade["status"] in ("queued", "running")

    def to_json(self) -> dict[str, Any]:
        return self.grade


@require_GET
def grade_run_page(request: HtmxHttpRequest, run_id: str, fmt: str | None = None) -> HttpResponse:
    data = GradeRunPage.of(_run_or_404(run_id))
    return render_page(request, RUN_TEMPLATE, data, fmt, fragment="result")


@live_view("grade_run")
def live_result(session_id: str, run_id: str) -> str:
    """The run's result, for its grading session's socket (decks_app.web.live)."""
    run = grading.grade_run_or_none(run_id)
    if run is None or run.session_id != session_id or run.session.source is None:
        return ""
    return live_part(RUN_TEMPLATE + "#result", GradeRunPage.of(run))


def _position(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise Http404("no such result") from None


@require_POST
def grade_flag(request: HtmxHttpRequest, run_id: str, position: str) -> HttpResponse:
    run = _run_or_404(run_id)
    try:
        flag = grading.toggle_flag(
            _graded(run), run, _position(position), request.POST.get("reason", "")
        )
    except grading.GradingError as exc:
        return error_response(request, str(exc), 400)
    return _after_flag(request, run, {"flag": flag})


@require_POST
def grade_flag_reason(request: HtmxHttpRequest, run_id: str, position: str) -> HttpResponse:
    run = _run_or_404(run_id)
    try:
        grading.set_flag_reason(
            _graded(run), run, _position(position), request.POST.get("reason", "")
        )
    except grading.GradingError as exc:
        return error_response(request, str(exc), 400 if "longer" in str(exc) else 404)
    return _after_flag(request, run, {"ok": True})


def _after_flag(request: HtmxHttpRequest, run: Run, data: dict) -> HttpResponse:
    if wants_json(request):
        return json_response(data)
    if request.htmx:
        _graded(run).refresh_from_db()  # the flags are kept on the graded session
        return render(request, RUN_TEMPLATE + "#result", GradeRunPage.of(run).context())
    return redirect("grading:grade_run", run_id=run.id)


@require_POST
def grade_stop(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    run = _run_or_404(run_id)
    stopped = stop_session(run.session)  # the grading session holds only this run
    if wants_json(request):
        return json_response({"stopped": stopped})
    return redirect("grading:grade_run", run_id=run.id)
