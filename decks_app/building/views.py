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

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from decks_app.building import files as build
from decks_app.web.pages import error_response, json_response, page, wants_json
from decks_app.workspaces.served import current_workspace, list_decks


@require_GET
def build_tab(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    decks = list_decks(workspace)
    data = {"tab": "build", "workspace": workspace.root, "decks": [d.to_dict() for d in decks]}
    ctx = {"tab": "build", "workspace": workspace, "decks": decks}
    return page(request, "building/build.html", ctx, data=data, fmt=fmt)


def _deck_or_404(workspace, deck: str) -> str:
    known = {d.path for d in list_decks(workspace)}
    if deck not in known:
        raise Http404("no such deck in this workspace")
    return deck


@require_GET
def build_deck(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    deck = _deck_or_404(workspace, request.GET.get("path", ""))
    folder = deck.rsplit("/", 1)[0] if "/" in deck else ""
    view = build.deck_view(workspace, deck)
    data = {**view, "files": build.file_tree(workspace, folder)}
    ctx = {"tab": "build", "workspace": workspace, **data}
    return page(request, "building/build_deck.html", ctx, data=data, fmt=fmt)


@require_GET
def build_file(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
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
    view = build.deck_view(workspace, deck) if deck else {"entries": [], "problems": []}
    data = {**file, "deck": deck or None, "problems": view["problems"]}
    ctx = {
        "tab": "build",
        "workspace": workspace,
        "file": file,
        "deck": deck,
        "view": view,
        "ask": request.GET.get("ask", "")[:20_000],  # "Add to chat" puts context here
    }
    return page(request, "building/build_file.html", ctx, data=data, fmt=fmt)


@require_POST
def build_save(request: HttpRequest) -> HttpResponse:
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
    return json_response({**saved, "saved": True, "problems": problems})


@require_POST
def build_validate(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace()
    deck = request.POST.get("deck", "")
    if deck not in {d.path for d in list_decks(workspace)}:
        return error_response(request, "pick a deck of this workspace", 400, fmt="json")
    try:
        problems = build.validate_draft(
            workspace, deck, request.POST.get("path", ""), request.POST.get("text", "")
        )
    except build.BuildError as exc:
        return error_response(request, str(exc), 400, fmt="json")
    return json_response({"problems": problems})


@require_POST
def build_new(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace()
    try:
        deck = build.create_deck(workspace, request.POST.get("name", ""))
    except build.BuildError as exc:
        return error_response(request, str(exc), 400)
    if wants_json(request):
        return json_response({"deck": deck, "url": f"/build/deck?path={deck}"}, status=201)
    return redirect(f"/build/file?path={deck}&deck={deck}")


@require_POST
def build_delete(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace()
    deck = _deck_or_404(workspace, request.POST.get("path", ""))
    try:
        build.delete_deck(workspace, deck, request.POST.get("confirm", ""))
    except build.BuildError as exc:
        return error_response(request, str(exc), 400)
    if wants_json(request):
        return json_response({"deleted": deck})
    return redirect("/build/")


@require_POST
def build_scaffold(request: HttpRequest) -> HttpResponse:
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
    return redirect(f"/build/deck?path={deck}")


# ---------------------------------------------------------------- the Build assistant


def _assistant_data(workspace, deck: str) -> dict:
    from decks_app.building import assistant
    from decks_app.models import Run
    from decks_app.sessions.conversation import conversation

    session = assistant.assistant_session(workspace, deck)
    if session is None:
        return {"deck": deck, "session": None, "conversation": [], "runs": []}
    runs = list(Run.objects.filter(session=session).order_by("created_at"))
    return {
        "deck": deck,
        "session": session.id,
        "conversation": [
            b.to_dict() for b in conversation(session) if b.kind in ("user", "assistant")
        ],
        "runs": [
            {
                "id": r.id,
                "status": r.status,
                "message": r.read_params(assistant.AssistantParams).message,
                "error": r.error or None,
                "undone": bool(
                    (result := r.read_result(assistant.AssistantResult)) and result.undone
                ),
                "changes": assistant.changes(workspace, r) if r.status == "completed" else [],
            }
            for r in runs
        ],
    }


@require_GET
def assistant_state(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    deck = _deck_or_404(workspace, request.GET.get("deck", ""))
    return json_response(_assistant_data(workspace, deck))


@require_POST
def assistant_send(request: HttpRequest) -> HttpResponse:
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
        return error_response(request, str(exc), 400, fmt="json")
    return json_response({"run": run.id, **_assistant_data(workspace, deck)}, status=202)


@require_POST
def assistant_undo(request: HttpRequest) -> HttpResponse:
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
        return error_response(request, str(exc), 409, fmt="json")
    return json_response({"restored": restored})
