"""The Grade tab: grading sessions, Verify batches, calibration and exports."""

from django.urls import path, re_path

from decks_app.grading.views import calibration, grade, verify
from decks_app.grading.views import exports as grade_exports

app_name = "grading"

urlpatterns = [
    path("grade/", grade.grade_tab, name="grade"),
    re_path(r"^grade\.(?P<fmt>json)$", grade.grade_tab),
    path("grade/run", grade.grade_start, name="grade_start"),
    path("grade/calibration/", calibration.calibration_page, name="calibration"),
    path("grade/export/grades.csv", grade_exports.grades_csv, name="grades_csv"),
    path("grade/export/grades.jsonl", grade_exports.grades_jsonl, name="grades_jsonl"),
    path("grade/verify/", verify.verify_tab, name="verify"),
    re_path(r"^grade/verify\.(?P<fmt>json)$", verify.verify_tab),
    path("grade/verify/run", verify.verify_start, name="verify_start"),
    path("grade/verify/compare", verify.verify_compare, name="verify_compare"),
    re_path(r"^grade/verify/compare\.(?P<fmt>json)$", verify.verify_compare),
    path("grade/verify/<str:run_id>/", verify.verify_batch, name="verify_batch"),
    re_path(r"^grade/verify/(?P<run_id>[^/]+)\.(?P<fmt>json)$", verify.verify_batch),
    path("grade/verify/<str:run_id>/stop", verify.verify_stop, name="verify_stop"),
    re_path(r"^grade/calibration\.(?P<fmt>json)$", calibration.calibration_page),
    path("grade/runs/<str:run_id>/", grade.grade_run_page, name="grade_run"),
    re_path(r"^grade/runs/(?P<run_id>[^/]+)\.(?P<fmt>json)$", grade.grade_run_page),
    path("grade/runs/<str:run_id>/flag/<str:position>", grade.grade_flag, name="grade_flag"),
    path(
        "grade/runs/<str:run_id>/flag/<str:position>/reason",
        grade.grade_flag_reason,
        name="grade_flag_reason",
    ),
    path("grade/runs/<str:run_id>/stop", grade.grade_stop, name="grade_stop"),
]
