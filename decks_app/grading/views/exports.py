"""Grade exports: `GET /grade/export/grades.csv` and `/grade/export/grades.jsonl`, one row per
graded turn across the workspace (or `?batch=<verify run>` for one Verify batch)."""

from __future__ import annotations

import csv
import io
import json

from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.grading import grades as grading
from decks_app.grading import verify
from decks_app.web.pages import HtmxHttpRequest
from decks_app.workspaces.served import current_workspace
from gambit.core.verify import csv_row


def _rows(request: HtmxHttpRequest) -> list[dict]:
    batch = request.GET.get("batch") or None
    if batch is not None and verify.verify_run_or_none(batch) is None:
        raise Http404("no such Verify batch")
    return grading.export_rows(current_workspace(), batch_run_id=batch)


@require_GET
def grades_csv(request: HtmxHttpRequest) -> HttpResponse:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(grading.EXPORT_FIELDS))
    writer.writeheader()
    writer.writerows(csv_row(row) for row in _rows(request))  # no cell runs as a formula
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="grades.csv"'
    return response


@require_GET
def grades_jsonl(request: HtmxHttpRequest) -> HttpResponse:
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(request))
    response = HttpResponse(body, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="grades.jsonl"'
    return response
