"""The Test tab: sessions, their conversation, trace, replay, compare and exports.

Pages are `page_route`s: `/test/<id>` and its twin `/test/<id>.json` under one name."""

from django.urls import path

from decks_app.sessions.views import compare, exports, feedback, replay, session, sessions, trace
from decks_app.web.routes import EVENT_ID, ID, json_route, page_route

app_name = "sessions"

SESSION = rf"test/(?P<session_id>{ID})"
NODE = rf"{EVENT_ID}(?:-run)?"  # a trace node's key: the event that opened it

urlpatterns = [
    page_route("test", sessions.sessions_list, "sessions"),
    path("test/new", sessions.session_create, name="session_create"),
    path("test/import", sessions.session_import, name="session_import"),
    path("test/scenario", sessions.scenario_start, name="scenario_start"),
    path("test/context-form", sessions.context_form, name="context_form"),
    page_route(SESSION, session.session_page, "session"),
    path("test/<str:session_id>/conversation", session.session_earlier, name="session_earlier"),
    path(
        "test/<str:session_id>/events/recent", session.session_recent_events, name="recent_events"
    ),
    path("test/<str:session_id>/send", session.session_send, name="session_send"),
    path("test/<str:session_id>/stop", session.session_stop, name="session_stop"),
    path("test/<str:session_id>/retry", session.session_retry, name="session_retry"),
    path("test/<str:session_id>/notes", session.session_notes, name="session_notes"),
    path("test/<str:session_id>/delete", session.session_delete, name="session_delete"),
    path(
        "test/<str:session_id>/feedback/<str:ref_id>",
        feedback.message_feedback,
        name="message_feedback",
    ),
    page_route(f"{SESSION}/trace", trace.trace_page, "trace"),
    page_route(rf"{SESSION}/trace/calls/(?P<event_id>{EVENT_ID})", trace.trace_call, "trace_call"),
    page_route(rf"{SESSION}/trace/runs/(?P<event_id>{EVENT_ID})", trace.trace_run, "trace_run"),
    page_route(rf"{SESSION}/trace/nodes/(?P<node>{NODE})", trace.trace_node, "trace_node"),
    json_route(
        rf"{SESSION}/trace/events/(?P<event_id>{EVENT_ID})", trace.trace_event, "trace_event"
    ),
    page_route(f"{SESSION}/replay", replay.replay_page, "replay"),
    page_route(f"{SESSION}/rerun", replay.replay_rerun, "replay_rerun"),
    page_route(f"{SESSION}/compare", compare.compare_page, "compare"),
    path("test/<str:session_id>/export/state.json", exports.export_state, name="export_state"),
    path("test/<str:session_id>/export/trace.jsonl", exports.export_trace, name="export_trace"),
]
