"""The Test tab's sessions list (+JSON), new-session, scenario-run and import forms."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from decks_app.services import providers, scenarios, transfer
from decks_app.services.sessions import (
    InvalidInput,
    SessionFilter,
    create_session,
    list_sessions,
    parse_context,
    session_row_json,
)
from decks_app.services.workspaces import current_workspace, list_decks
from decks_app.views.base import error_response, json_response, page, wants_json

STATUSES = ["idle", "queued", "running", "completed", "failed", "canceled", "interrupted"]


@require_GET
def sessions_list(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    flt = SessionFilter(
        status=request.GET.get("status", "")[:20] if request.GET.get("status") in STATUSES else "",
        deck=request.GET.get("deck", "")[:1024],
        q=request.GET.get("q", "")[:200],
    )
    rows = list_sessions(workspace, flt)
    decks = list_decks(workspace)
    scenario_choices = scenarios.workspace_scenarios(workspace)
    data = {
        "workspace": {"id": workspace.id, "root": workspace.root},
        "filter": {"status": flt.status, "deck": flt.deck, "q": flt.q},
        "sessions": [session_row_json(r) for r in rows],
        "decks": [d.to_dict() for d in decks],
        "scenarios": scenario_choices,
        "providers": providers.configured_providers(),
    }
    ctx = {
        "tab": "test",
        "rows": rows,
        "decks": decks,
        "filter": flt,
        "statuses": STATUSES,
        "scenarios": scenario_choices,
        "providers": data["providers"],
        "workspace": workspace,
    }
    return page(request, "decks_app/sessions.html", ctx, data=data, fmt=fmt, fragment="table")


@require_POST
def session_create(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace()
    try:
        session = create_session(
            workspace,
            request.POST.get("deck", ""),
            model=request.POST.get("model", ""),
            context=parse_context(request.POST.get("context")),
        )
    except InvalidInput as exc:
        return error_response(request, str(exc))
    if wants_json(request):
        return json_response({"id": session.id, "url": f"/test/{session.id}/"}, status=201)
    return redirect("session", session_id=session.id)


@require_POST
def session_import(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace()
    try:
        state_file = request.FILES.get("state")
        trace_file = request.FILES.get("trace")
        state = transfer.parse_state(state_file.read().decode("utf-8")) if state_file else None
        trace = transfer.parse_trace(trace_file.read().decode("utf-8")) if trace_file else None
        session = transfer.import_session(
            workspace, request.POST.get("deck", ""), state=state, trace=trace
        )
    except UnicodeDecodeError:
        return error_response(request, "the files must be UTF-8 text")
    except InvalidInput as exc:
        return error_response(request, str(exc))
    if wants_json(request):
        return json_response({"id": session.id, "url": f"/test/{session.id}/"}, status=201)
    return redirect("session", session_id=session.id)


@require_POST
def scenario_start(request: HttpRequest) -> HttpResponse:
    """Run a root deck's scenario once (a live session) or N times (a batch)."""
    workspace = current_workspace()
    deck, _, scenario = request.POST.get("scenario", "").partition("|")
    try:
        context = parse_context(request.POST.get("context"))
        runs = request.POST.get("runs") or "1"
        if runs.strip() != "1":
            batch = scenarios.start_batch(
                workspace,
                deck,
                scenario,
                runs=runs,
                concurrency=request.POST.get("concurrency"),
                max_turns=request.POST.get("maxTurns"),
            )
            if wants_json(request):
                return json_response({"batch": batch.id, "url": f"/grade/verify/{batch.id}/"}, 201)
            return redirect(f"/grade/verify/{batch.id}/")
        session = scenarios.start_scenario(
            workspace,
            deck,
            scenario,
            max_turns=request.POST.get("maxTurns"),
            context=context,
            model=request.POST.get("model", ""),
        )
    except scenarios.ScenarioError as exc:
        return error_response(request, str(exc))
    if wants_json(request):
        return json_response({"id": session.id, "url": f"/test/{session.id}/"}, status=201)
    return redirect("session", session_id=session.id)
