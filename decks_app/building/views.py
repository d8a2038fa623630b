"""The Build tab: decks, their files and an editor, with the loader checking as you work.

- `GET /build/` (`.json`): the workspace's decks and the new-deck form;
- `GET /build/deck?path=<deck>` (`.json`): the deck as the loader sees it (roles, problems)
  beside its file tree;
- `GET /build/file?path=<file>&deck=<deck>` (`.json`): one file in the editor;
- `POST /build/save`: save a file (`path`, `text`, `version`); 409 with the disk version
  when it changed on disk since it was opened; answers with the deck's problems;
- `POST /build/validate`: the problems of the deck with an unsaved draft of one file;
- `POST /build/new` (`name`), `POST /build/delete` (`path`, `confirm`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from decks_app.building import drafts
from decks_app.building import files as build
from decks_app.web.live import live_view
from decks_app.web.pages import (
    HtmxHttpRequest,
    PageData,
    error_response,
    json_response,
    render_page,
    wants_json,
)
from decks_app.web.routes import query_url
from decks_app.workspaces.served import current_workspace, list_decks


@require_GET
def build_tab(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    data = BuildPage(workspace=workspace, decks=list_decks(workspace))
    return render_page(request, "building/build.html", data, fmt)


@dataclass
class BuildPage(PageData):
    """The workspace's decks and the new-deck form (with what was typed and why it was
    refused, when a name was refused)."""

    workspace: Any
    decks: list[Any]
    name: str = ""
    name_error: str = ""
    tab = "build"

    def to_json(self) -> dict[str, Any]:
        return {
            "tab": self.tab,
            "workspace": self.workspace.root,
            "decks": [d.to_dict() for d in self.decks],
        }


def _deck_or_404(workspace, deck: str) -> str:
    known = {d.path for d in list_decks(workspace)}
    if deck not in known:
        raise Http404("no such deck in this workspace")
    return deck


@require_GET
def build_deck(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    deck = _deck_or_404(workspace, request.GET.get("path", ""))
    folder = deck.rsplit("/", 1)[0] if "/" in deck else ""
    data = DeckPage(
        workspace=workspace,
        view=build.deck_view(workspace, deck),
        files=build.file_tree(workspace, folder),
    )
    return render_page(request, "building/build_deck.html", data, fmt)


@dataclass
class DeckPage(PageData):
    """A deck as the loader sees it (`view`: its roles and problems) beside its files."""

    workspace: Any
    view: dict[str, Any]
    files: list[dict[str, Any]]
    tab = "build"

    def to_json(self) -> dict[str, Any]:
        return {**self.view, "files": self.files}


FILE_TEMPLATE = "building/build_file.html"
PROBLEMS_TEMPLATE = "building/build_problems.html"


def disk_changes(path: str, deck: str, changed: list[str]) -> str:
    """What the Build page's socket sends when files changed on disk (decks_app.building.
    consumers): the deck's problems as they are now and, when the open file is among the
    changed ones, its new text and version (the editor loads it unless it holds unsaved
    edits), as htmx out-of-band swaps rendered from the page's own partials."""
    from decks_app.workspaces.served import current_workspace

    workspace = current_workspace()
    listed = {d.path for d in list_decks(workspace)}
    problems = build.deck_view(workspace, deck)["problems"] if deck in listed else []
    disk = None
    if path in changed:
        try:
            disk = build.read_file(workspace, path)
        except (build.BuildError, OSError):
            disk = None
    ctx = {"problems": problems, "disk": disk, "oob": True}
    return render_to_string(FILE_TEMPLATE + "#disk", ctx)


@require_GET
def build_file(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    rel = request.GET.get("path", "")
    deck = request.GET.get("deck", "")
    try:
        file = build.read_file(workspace, rel)
    except build.BuildError as exc:
        return error_response(request, str(exc), 400, fmt=fmt)
    except FileNotFoundError:
        raise Http404("no such file") from None
    known = {d.path for d in list_decks(workspace)}
    deck = (
        deck
        if deck in known
        else next((d for d in known if rel.startswith(d.rsplit("/", 1)[0] + "/")), "")
    )
    problems = build.deck_view(workspace, deck)["problems"] if deck else []
    ask = request.GET.get("ask", "")[:20_000]  # "Add to chat" puts context here
    data = FilePage(
        workspace=workspace,
        file=file,
        deck=deck,
        problems=problems,
        assistant=AssistantPanel.of(workspace, deck, ask=ask) if deck and not fmt else None,
    )
    return render_page(request, FILE_TEMPLATE, data, fmt)


@dataclass
class FilePage(PageData):
    """One file in the editor, the problems of its deck, and the deck's assistant."""

    workspace: Any
    file: dict[str, Any]
    deck: str
    problems: list[dict[str, Any]]
    assistant: AssistantPanel | None
    tab = "build"

    def to_json(self) -> dict[str, Any]:
        return {**self.file, "deck": self.deck or None, "problems": self.problems}


@require_POST
def build_save(request: HtmxHttpRequest) -> HttpResponse:
    workspace = current_workspace()
    rel = request.POST.get("path", "")
    text = request.POST.get("text")
    if text is None:
        return error_response(request, "text is required", 400, fmt="json")
    if "\x00" in text:
        return error_response(request, "the text holds a NUL byte", 400, fmt="json")
    try:
        saved = build.save_file(workspace, rel, text, request.POST.get("version") or None)
    except build.StaleWrite as stale:
        if request.htmx:  # the page shows the disk version beside the editor
            ctx = {
                "status_text": "Not saved: the file changed on disk.",
                "version": stale.disk_version,
                "conflict": {"diskText": stale.disk_text},
                "oob": True,
            }
            return render(request, FILE_TEMPLATE + "#saved", ctx, status=409)
        return json_response(
            {
                "error": "the file changed on disk since you opened it; both versions are shown",
                "conflict": {
                    "path": stale.path,
                    "diskText": stale.disk_text,
                    "diskVersion": stale.disk_version,
                },
            },
            status=409,
        )
    except build.BuildError as exc:
        return error_response(request, str(exc), 400, fmt="json")
    deck = request.POST.get("deck", "")
    known = {d.path for d in list_decks(workspace)}
    problems = build.deck_view(workspace, deck)["problems"] if deck in known else []
    if request.htmx:
        errors = sum(1 for p in problems if p.get("severity") == "error")
        status_text = (
            f"Saved, with {errors} error{'s' if errors != 1 else ''} in the deck."
            if errors
            else "Saved."
        )
        (messages.warning if errors else messages.success)(request, status_text)
        ctx = {
            "status_text": status_text,
            "version": saved["version"],
            "problems": problems,
            "oob": True,
        }
        return render(request, FILE_TEMPLATE + "#saved", ctx)
    return json_response({**saved, "saved": True, "problems": problems})


@require_POST
def build_validate(request: HtmxHttpRequest) -> HttpResponse:
    workspace = current_workspace()
    deck = request.POST.get("deck", "")
    if deck not in {d.path for d in list_decks(workspace)}:
        return error_response(request, "pick a deck of this workspace", 400, fmt="json")
    try:
        problems = drafts.validate_draft(
            workspace, deck, request.POST.get("path", ""), request.POST.get("text", "")
        )
    except build.BuildError as exc:
        return error_response(request, str(exc), 400, fmt="json")
    if request.htmx:  # the problems panel, rendered as on the page
        return render(request, PROBLEMS_TEMPLATE, {"problems": problems, "oob": True})
    return json_response({"problems": problems})


@require_POST
def build_new(request: HtmxHttpRequest) -> HttpResponse:
    workspace = current_workspace()
    name = request.POST.get("name", "")
    try:
        deck = build.create_deck(workspace, name)
    except build.BuildError as exc:
        if wants_json(request):
            return error_response(request, str(exc), 400, fmt="json")
        # The form again, with the name typed and the reason: the fragment for htmx (a 200,
        # which htmx swaps), else the whole page as a 400.
        data = BuildPage(
            workspace=workspace, decks=list_decks(workspace), name=name[:60], name_error=str(exc)
        )
        if request.htmx:
            return render(request, "building/build.html#new_deck", data.context())
        return render(request, "building/build.html", data.context(), status=400)
    if wants_json(request):
        return json_response(
            {"deck": deck, "url": query_url("building:build_deck", path=deck)}, status=201
        )
    url = query_url("building:build_file", path=deck, deck=deck)
    messages.success(request, f"Created the deck {deck.rsplit('/', 1)[0]}.", extra_tags=deck)
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


@require_POST
def build_delete(request: HtmxHttpRequest) -> HttpResponse:
    workspace = current_workspace()
    deck = _deck_or_404(workspace, request.POST.get("path", ""))
    try:
        build.delete_deck(workspace, deck, request.POST.get("confirm", ""))
    except build.BuildError as exc:
        return error_response(request, str(exc), 400)
    if wants_json(request):
        return json_response({"deleted": deck})
    messages.success(request, f"Deleted deck {deck}.")
    return redirect("building:build")


@require_POST
def build_scaffold(request: HtmxHttpRequest) -> HttpResponse:
    workspace = current_workspace()
    deck = _deck_or_404(workspace, request.POST.get("deck", ""))
    try:
        created = build.scaffold(
            workspace, deck, request.POST.get("kind", ""), request.POST.get("name", "")
        )
    except build.BuildError as exc:
        return error_response(request, str(exc), 400)
    if wants_json(request):
        return json_response(
            {"created": created, "problems": build.deck_view(workspace, deck)["problems"]},
            status=201,
        )
    for rel in created:  # said on the deck's page, each file a link to the editor
        messages.success(request, "Added", extra_tags=rel)
    return redirect(query_url("building:build_deck", path=deck))


# ---------------------------------------------------------------- the Build assistant


ASSISTANT_TEMPLATE = "building/build_assistant.html"
ACTIVE = ("queued", "running")


@dataclass
class AssistantPanel(PageData):
    """The Build assistant's chat about one deck: its conversation and each run's changes
    (the twin, `/build/assistant.json?deck=`), rendered whole into the editor's side panel
    and, while a run works, over the assistant session's socket."""

    deck: str
    session: str | None = None
    conversation: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    ask: str = ""  # "Add to chat" puts text in the message box
    grant: str = "read"
    notice: str = ""  # what the last command did ("Undone.") or why it was refused
    tab = "build"

    @classmethod
    def of(cls, workspace: Any, deck: str, **extra: Any) -> AssistantPanel:
        from decks_app.building import assistant
        from decks_app.models import Run
        from decks_app.sessions.conversation import conversation

        session = assistant.assistant_session(workspace, deck)
        if session is None:
            return cls(deck=deck, **extra)
        runs = list(Run.objects.filter(session=session).order_by("created_at"))
        return cls(
            deck=deck,
            session=session.id,
            conversation=[
                b.to_dict() for b in conversation(session) if b.kind in ("user", "assistant")
            ],
            runs=[
                {
                    "id": r.id,
                    "status": r.status,
                    "message": r.read_params(assistant.AssistantParams).message,
                    "error": r.error or None,
                    # which model answered (an offline one when no provider is configured)
                    "model": r.model or None,
                    "offline": r.offline,
                    "undone": bool(
                        (result := r.read_result(assistant.AssistantResult)) and result.undone
                    ),
                    "changes": assistant.changes(workspace, r) if r.status == "completed" else [],
                }
                for r in runs
            ],
            **extra,
        )

    @property
    def status_text(self) -> str:
        last = self.runs[-1] if self.runs else None
        if last is not None and last["status"] in ACTIVE:
            return "The assistant is working…"
        if last is not None and last["error"]:
            return f"Failed: {last['error']}"
        return ""

    @property
    def answered_by(self) -> dict[str, Any] | None:
        """The model of the last run that got an answer (shown under the conversation)."""
        return next((r for r in reversed(self.runs) if r["model"]), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "deck": self.deck,
            "session": self.session,
            "conversation": self.conversation,
            "runs": self.runs,
        }


@live_view("assistant")
def live_assistant(session_id: str, deck: str) -> str:
    """The assistant's chat, for its session's socket (decks_app.web.live)."""
    from decks_app.building import assistant
    from decks_app.workspaces.served import current_workspace

    workspace = current_workspace()
    session = assistant.assistant_session(workspace, deck)
    if session is None or session.id != session_id:
        return ""
    panel = AssistantPanel.of(workspace, deck)
    return render_to_string(ASSISTANT_TEMPLATE + "#live", panel.context(oob=True))


def _panel(request: HtmxHttpRequest, panel: AssistantPanel, status: int = 200) -> HttpResponse:
    return render(request, ASSISTANT_TEMPLATE, panel.context(), status=status)


@require_GET
def assistant_state(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    deck = _deck_or_404(workspace, request.GET.get("deck", ""))
    return render_page(request, ASSISTANT_TEMPLATE, AssistantPanel.of(workspace, deck), fmt)


@require_POST
def assistant_send(request: HtmxHttpRequest) -> HttpResponse:
    from decks_app.building import assistant

    workspace = current_workspace()
    deck = _deck_or_404(workspace, request.POST.get("deck", ""))
    try:
        run = assistant.send(
            workspace,
            deck,
            request.POST.get("message", ""),
            request.POST.get("grant", "read"),
            request.POST.get("model", ""),
        )
    except assistant.AssistantError as exc:
        if request.htmx:  # said in the panel, the message kept in its box
            ask = request.POST.get("message", "")[:20_000]
            return _panel(request, AssistantPanel.of(workspace, deck, notice=str(exc), ask=ask))
        return error_response(request, str(exc), 400, fmt="json")
    panel = AssistantPanel.of(workspace, deck, grant=request.POST.get("grant", "read"))
    if request.htmx:
        return _panel(request, panel, status=202)
    return json_response({"run": run.id, **panel.to_json()}, status=202)


@require_POST
def assistant_undo(request: HtmxHttpRequest) -> HttpResponse:
    from decks_app.building import assistant
    from decks_app.models import Run

    workspace = current_workspace()
    run = (
        Run.objects.select_related("session")
        .filter(pk=request.POST.get("run", ""), kind="assistant", session__workspace=workspace)
        .first()
    )
    if run is None:
        raise Http404("no such assistant run")
    try:
        restored = assistant.undo(workspace, run)
    except assistant.AssistantError as exc:
        if request.htmx:
            # Swapped in (htmx leaves a 409 unswapped), the refusal in the panel's notice.
            panel = AssistantPanel.of(workspace, run.session.deck_path, notice=str(exc))
            return _panel(request, panel)
        return error_response(request, str(exc), 409, fmt="json")
    if request.htmx:
        return _panel(
            request, AssistantPanel.of(workspace, run.session.deck_path, notice="Undone.")
        )
    return json_response({"restored": restored})
