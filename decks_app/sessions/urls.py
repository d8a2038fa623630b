"""The Test tab: sessions, their conversation, trace, replay, compare and exports."""

from django.urls import path, re_path

from decks_app.sessions.views import compare, exports, feedback, replay, session, sessions, trace

app_name = "sessions"

urlpatterns = [
    path("test/", sessions.sessions_list, name="sessions"),
    re_path(r"^test\.(?P<fmt>json)$", sessions.sessions_list),
    path("test/new", sessions.session_create, name="session_create"),
    path("test/import", sessions.session_import, name="session_import"),
    path("test/scenario", sessions.scenario_start, name="scenario_start"),
    path("test/context-form", sessions.context_form, name="context_form"),
    path("test/<str:session_id>/", session.session_page, name="session"),
    re_path(r"^test/(?P<session_id>[^/]+)\.(?P<fmt>json)$", session.session_page),
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
    path("test/<str:session_id>/trace/", trace.trace_page, name="trace"),
    re_path(r"^test/(?P<session_id>[^/]+)/trace\.(?P<fmt>json)$", trace.trace_page),
    path("test/<str:session_id>/trace/calls/<int:event_id>/", trace.trace_call, name="trace_call"),
    path("test/<str:session_id>/trace/runs/<int:event_id>/", trace.trace_run, name="trace_run"),
    re_path(
        r"^test/(?P<session_id>[^/]+)/trace/runs/(?P<event_id>[0-9]{1,18})\.(?P<fmt>json)$",
        trace.trace_run,
    ),
    re_path(
        r"^test/(?P<session_id>[^/]+)/trace/events/(?P<event_id>[0-9]{1,18})\.json$",
        trace.trace_event,
    ),
    re_path(
        r"^test/(?P<session_id>[^/]+)/trace/calls/(?P<event_id>[0-9]{1,18})\.(?P<fmt>json)$",
        trace.trace_call,
    ),
    path("test/<str:session_id>/replay/", replay.replay_page, name="replay"),
    re_path(r"^test/(?P<session_id>[^/]+)/replay\.(?P<fmt>json)$", replay.replay_page),
    path("test/<str:session_id>/rerun", replay.replay_rerun, name="replay_rerun"),
    re_path(r"^test/(?P<session_id>[^/]+)/rerun\.(?P<fmt>json)$", replay.replay_rerun),
    path("test/<str:session_id>/compare/", compare.compare_page, name="compare"),
    re_path(r"^test/(?P<session_id>[^/]+)/compare\.(?P<fmt>json)$", compare.compare_page),
    path("test/<str:session_id>/export/state.json", exports.export_state, name="export_state"),
    path("test/<str:session_id>/export/trace.jsonl", exports.export_trace, name="export_trace"),
]
