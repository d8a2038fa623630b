"""The Test tab's sessions list (+JSON), new-session, scenario-run and import forms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from decks_app.models import Workspace
from decks_app.runs import providers
from decks_app.sessions import forms, keyset, scenarios, transfer
from decks_app.sessions.actions import InvalidInput, create_session, parse_context
from decks_app.sessions.listing import SessionFilter, SessionPage, list_sessions, session_row_json
from decks_app.web.pages import (
    HtmxHttpRequest,
    PageData,
    error_response,
    json_response,
    render_page,
    wants_json,
)
from decks_app.web.routes import query_url
from decks_app.workspaces.served import current_workspace, is_listed_deck, list_decks

STATUSES = ["idle", "queued", "running", "completed", "failed", "canceled", "interrupted"]


@require_GET
def sessions_list(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    flt = SessionFilter(
        status=request.GET.get("status", "")[:20] if request.GET.get("status") in STATUSES else "",
        deck=request.GET.get("deck", "")[:1024],
        q=request.GET.get("q", "")[:200],
        before=request.GET.get("before", ""),
        after=request.GET.get("after", ""),
    )
    try:
        listed = list_sessions(workspace, flt)
    except keyset.BadCursor as exc:
        back = query_url("sessions:sessions", status=flt.status, deck=flt.deck, q=flt.q)
        return error_response(request, str(exc), 400, fmt, back=back)
    decks = list_decks(workspace)
    scenario_choices = scenarios.workspace_scenarios(workspace)
    first_deck = next((d.path for d in decks if not d.error), "")
    first_scenario = scenario_choices[0] if scenario_choices else None
    data = SessionsPage(
        workspace=workspace,
        filter=flt,
        listed=listed,
        decks=decks,
        scenarios=scenario_choices,
        providers=providers.configured_providers(workspace_root=workspace.root),
        session_context=_context_ctx(workspace, first_deck, "ctx", "session-context"),
        scenario_context=_context_ctx(
            workspace,
            first_scenario["deck"] if first_scenario else "",
            "scenario_ctx",
            "scenario-context",
        ),
        persona_context=_persona_ctx(workspace, first_scenario),
    )
    return render_page(request, "sessions/sessions.html", data, fmt, fragment="table")


@dataclass
class SessionsPage(keyset.PageLinks, PageData):
    """The Test tab: the sessions (filtered), the decks and scenarios to start one with, the
    providers, and the context forms of the first deck and scenario."""

    workspace: Workspace
    filter: SessionFilter
    listed: SessionPage
    decks: list[Any]
    scenarios: list[dict[str, Any]]
    providers: list[dict[str, Any]]
    session_context: dict[str, Any]
    scenario_context: dict[str, Any]
    persona_context: dict[str, Any]
    tab = "test"
    statuses = STATUSES

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.listed.rows

    @property
    def broken_deck(self) -> Any:
        """The deck the list is filtered to, when it does not load (it cannot be started)."""
        return next((d for d in self.decks if d.path == self.filter.deck and d.error), None)

    @property
    def model_suggestions(self) -> list[str]:
        """offline/echo and the models the decks name, each once."""
        return list(dict.fromkeys(["offline/echo", *(m for d in self.decks for m in d.models)]))

    def page_url(self, fmt: str | None = None, **cursor: str | None) -> str:
        """This list (its filters kept) at a cursor: `before=` for older, `after=` newer."""
        f = self.filter
        args = ["json"] if fmt else []
        return query_url("sessions:sessions", args, status=f.status, deck=f.deck, q=f.q, **cursor)

    @property
    def keyset_page(self) -> keyset.Page:
        return self.listed.page

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": {"id": self.workspace.id, "root": self.workspace.root},
            "filter": {"status": self.filter.status, "deck": self.filter.deck, "q": self.filter.q},
            "sessions": [session_row_json(r) for r in self.rows],
            "page": self.page_json(),
            "decks": [d.to_dict() for d in self.decks],
            "scenarios": self.scenarios,
            "providers": self.providers,
        }


@require_GET
def context_form(request: HtmxHttpRequest) -> HttpResponse:
    """The context fields of a deck's contextSchema (htmx swaps them in when the deck changes)."""
    workspace = current_workspace()
    deck_path = request.GET.get("deck") or request.GET.get("scenario", "").partition("|")[0]
    prefix = request.GET.get("prefix", "ctx")
    if prefix not in ("ctx", "scenario_ctx"):
        prefix = "ctx"
    target = "scenario-context" if prefix == "scenario_ctx" else "session-context"
    response = render(
        request, "sessions/context_form.html", _context_ctx(workspace, deck_path, prefix, target)
    )
    if prefix == "scenario_ctx":
        # The chosen scenario's own input form comes along, swapped out of band.
        choice = _declared_scenario(workspace, request.GET.get("scenario", ""))
        ctx = {**_persona_ctx(workspace, choice), "oob": True}
        response.content += render(request, "sessions/context_form.html", ctx).content
    return response


def _declared_scenario(workspace, value: str) -> dict | None:
    """The `deck|scenario` choice of the scenario form, when the deck declares it."""
    deck, _, path = value.partition("|")
    return scenarios.declared_scenario(workspace, deck, path)


def _persona_ctx(workspace, choice: dict | None) -> dict:
    """The form for a scenario deck's own contextSchema (its `scenarioInput`)."""
    path = choice["path"] if choice else ""
    schema = forms.deck_context_schema(workspace, path, "scenario") if path else None
    fields = forms.fields(schema.to_json_schema() if schema is not None else None, "persona")
    return {
        "fields": fields,
        "no_required": False,
        "prefix": "persona",
        "target": "persona-context",
        "scenario": choice,
        "deck": None,
        "any_required": any(f["required"] for f in fields),
    }


def _context_ctx(workspace, deck_path: str, prefix: str, target: str) -> dict:
    from decks_app.workspaces.served import find_deck

    if deck_path and not is_listed_deck(workspace, deck_path):
        deck_path = ""
    schema = forms.deck_context_schema(workspace, deck_path) if deck_path else None
    fields = forms.fields(schema.to_json_schema() if schema is not None else None, prefix)
    return {
        "fields": fields,
        "no_required": prefix == "scenario_ctx",  # the persona fills in what is missing
        "prefix": prefix,
        "target": target,
        "deck": find_deck(workspace, deck_path) if deck_path else None,
        "any_required": any(f["required"] for f in fields),
    }


@require_POST
def session_create(request: HtmxHttpRequest) -> HttpResponse:
    workspace = current_workspace()
    deck_path = request.POST.get("deck", "")
    try:
        if not is_listed_deck(workspace, deck_path):  # never load a file outside the listing
            raise InvalidInput(f"no deck at {deck_path[:200]!r} in this workspace")
        if "context" in request.POST:  # the plain box (JSON or text), as before
            context = parse_context(request.POST.get("context"))
            context = forms.validate_context(workspace, deck_path, context, optional=False)
        else:
            schema = forms.deck_context_schema(workspace, deck_path)
            context = forms.read(
                schema.to_json_schema() if schema is not None else None, request.POST, "ctx"
            )
            context = forms.validate_context(workspace, deck_path, context, optional=False)
        session = create_session(
            workspace,
            deck_path,
            model=request.POST.get("model", ""),
            context=context,
        )
    except (InvalidInput, forms.FormError) as exc:
        return error_response(request, str(exc))
    if wants_json(request):
        return _created(session)
    return _go(request, reverse("sessions:session", args=[session.id]))


def _created(session) -> HttpResponse:
    url = reverse("sessions:session", args=[session.id])
    return json_response({"id": session.id, "url": url}, status=201)


def _go(request: HtmxHttpRequest, url: str) -> HttpResponse:
    """To `url`: a redirect, or for htmx (a form that stays put when refused, its refusal a
    toast, so nothing chosen or typed is lost) a client-side one."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
def session_import(request: HtmxHttpRequest) -> HttpResponse:
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
        return _created(session)
    return _go(request, reverse("sessions:session", args=[session.id]))


@require_POST
def scenario_start(request: HtmxHttpRequest) -> HttpResponse:
    """Run a root deck's scenario once (a live session) or N times (a batch)."""
    workspace = current_workspace()
    deck, _, scenario = request.POST.get("scenario", "").partition("|")
    if _declared_scenario(workspace, f"{deck}|{scenario}") is None:
        # Checked before the deck's context form is read: reading it loads the deck, and a
        # file outside the listing is never loaded (nor its Python imported).
        return error_response(
            request,
            f"{scenario!r} is not a scenario of {deck or 'a deck'}; add it to [[scenarios]]",
        )
    try:
        if "context" in request.POST:
            context = parse_context(request.POST.get("context"))
        else:
            schema = forms.deck_context_schema(workspace, deck)
            context = forms.read(
                schema.to_json_schema() if schema is not None else None,
                request.POST,
                "scenario_ctx",
                allow_missing=True,
            )
        # missing fields are fine here: the persona fills them in (init-fill)
        context = (
            forms.validate_context(workspace, deck, context, optional=True, partial=True)
            if context
            else None
        )
        scenario_input = _scenario_input(workspace, deck, scenario, request.POST)
        runs = request.POST.get("runs") or "1"
        if runs.strip() != "1":
            batch = scenarios.start_batch(
                workspace,
                deck,
                scenario,
                runs=runs,
                concurrency=request.POST.get("concurrency"),
                max_turns=request.POST.get("maxTurns"),
                context=context,
                scenario_input=scenario_input,
            )
            url = reverse("grading:verify_batch", args=[batch.id])
            if wants_json(request):
                return json_response({"batch": batch.id, "url": url}, 201)
            return _go(request, url)
        session = scenarios.start_scenario(
            workspace,
            deck,
            scenario,
            max_turns=request.POST.get("maxTurns"),
            context=context,
            scenario_input=scenario_input,
            model=request.POST.get("model", ""),
        )
    except (scenarios.ScenarioError, forms.FormError) as exc:
        return error_response(request, str(exc))
    if wants_json(request):
        return _created(session)
    return _go(request, reverse("sessions:session", args=[session.id]))


def _scenario_input(workspace, deck: str, scenario: str, form) -> object:
    """The scenario deck's own input from its form (or JSON), checked against its
    contextSchema before anything runs; `scenarios.NO_INPUT` when nothing was given."""
    if _declared_scenario(workspace, f"{deck}|{scenario}") is None:
        return scenarios.NO_INPUT  # start_* says it is not declared
    schema = forms.deck_context_schema(workspace, scenario, "scenario")
    value = forms.read(schema.to_json_schema() if schema is not None else None, form, "persona")
    if value is None and (schema is None or schema.is_optional or not schema.required_fields()):
        return scenarios.NO_INPUT
    try:
        return forms.validate_context(workspace, scenario, value, optional=False, role="scenario")
    except forms.FormError as exc:
        raise forms.FormError(
            str(exc).replace("contextSchema", "contextSchema (scenario input)")
        ) from None
