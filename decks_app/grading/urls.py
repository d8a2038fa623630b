"""The Grade tab: grading sessions, Verify batches, calibration and exports.

Pages are `page_route`s: `/grade/runs/<id>` and its twin `/grade/runs/<id>.json` under one
name."""

from django.urls import path

from decks_app.grading.views import calibration, grade, rate, verify
from decks_app.grading.views import exports as grade_exports
from decks_app.web.routes import ID, page_route

app_name = "grading"

BATCH = rf"grade/verify/(?P<run_id>{ID})"
GRADE_RUN = rf"grade/runs/(?P<run_id>{ID})"
RATE_ITEM = rf"grade/rate/(?P<session_id>{ID})/(?P<ref>{ID})"

urlpatterns = [
    page_route("grade", grade.grade_tab, "grade"),
    page_route("grade/sessions", grade.grade_sessions, "grade_sessions"),
    path("grade/run", grade.grade_start, name="grade_start"),
    page_route("grade/calibration", calibration.calibration_page, "calibration"),
    page_route("grade/rate", rate.rate_page, "rate"),
    page_route(RATE_ITEM, rate.rate_item_view, "rate_item"),
    path("grade/rate/<str:session_id>/<str:ref>/rating", rate.rate_submit, name="rate_submit"),
    path("grade/export/grades.csv", grade_exports.grades_csv, name="grades_csv"),
    path("grade/export/grades.jsonl", grade_exports.grades_jsonl, name="grades_jsonl"),
    page_route("grade/verify", verify.verify_tab, "verify"),
    path("grade/verify/run", verify.verify_start, name="verify_start"),
    page_route("grade/verify/compare", verify.verify_compare, "verify_compare"),
    page_route(BATCH, verify.verify_batch, "verify_batch"),
    path("grade/verify/<str:run_id>/stop", verify.verify_stop, name="verify_stop"),
    page_route(GRADE_RUN, grade.grade_run_page, "grade_run"),
    path("grade/runs/<str:run_id>/flag/<str:position>", grade.grade_flag, name="grade_flag"),
    path(
        "grade/runs/<str:run_id>/flag/<str:position>/reason",
        grade.grade_flag_reason,
        name="grade_flag_reason",
    ),
    path("grade/runs/<str:run_id>/stop", grade.grade_stop, name="grade_stop"),
]
