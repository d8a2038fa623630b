from django.contrib import admin
from django.urls import path, re_path

from decks_app.views import compare, exports, feedback, replay, session, sessions, shell, trace

urlpatterns = [
    path("", shell.index, name="index"),
    re_path(r"^(?P<tab>build|grade)/$", shell.tab, name="tab"),
    re_path(r"^(?P<tab>build|grade)\.(?P<fmt>json)$", shell.tab),
    path("test/", sessions.sessions_list, name="sessions"),
    re_path(r"^test\.(?P<fmt>json)$", sessions.sessions_list),
    path("test/new", sessions.session_create, name="session_create"),
    path("test/import", sessions.session_import, name="session_import"),
    path("test/<str:session_id>/", session.session_page, name="session"),
    re_path(r"^test/(?P<session_id>[^/]+)\.(?P<fmt>json)$", session.session_page),
    path("test/<str:session_id>/send", session.session_send, name="session_send"),
    path("test/<str:session_id>/stop", session.session_stop, name="session_stop"),
    path("test/<str:session_id>/notes", session.session_notes, name="session_notes"),
    path(
        "test/<str:session_id>/feedback/<str:ref_id>",
        feedback.message_feedback,
        name="message_feedback",
    ),
    path("test/<str:session_id>/trace/", trace.trace_page, name="trace"),
    re_path(r"^test/(?P<session_id>[^/]+)/trace\.(?P<fmt>json)$", trace.trace_page),
    path("test/<str:session_id>/replay/", replay.replay_page, name="replay"),
    re_path(r"^test/(?P<session_id>[^/]+)/replay\.(?P<fmt>json)$", replay.replay_page),
    path("test/<str:session_id>/rerun", replay.replay_rerun, name="replay_rerun"),
    path("test/<str:session_id>/compare/", compare.compare_page, name="compare"),
    re_path(r"^test/(?P<session_id>[^/]+)/compare\.(?P<fmt>json)$", compare.compare_page),
    path("test/<str:session_id>/export/state.json", exports.export_state, name="export_state"),
    path("test/<str:session_id>/export/trace.jsonl", exports.export_trace, name="export_trace"),
    path("admin/", admin.site.urls),
]
