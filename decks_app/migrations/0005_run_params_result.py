"""Runs get `params` (what the run was asked to do) and `result` (what it produced), each of
its kind's model (decks_app.runs.registry), instead of `message` (the user's text, a grader's
path or a persona's) and `output` (results, and inputs too: the assistant's grant, Verify's
settings, an `undone` flag). A Verify session's `context` keeps only the deck's context input
(its settings are the verify run's params). `Run.kind` and `Session.origin` lose their
`choices`: the registry validates them.

Each kind's rows are moved by `forward` (and back by `backward`), written against the shapes
the columns held at 0004, so the migration does not depend on today's models.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _api_record(output: Any) -> dict[str, Any] | None:
    out = _dict(output)
    if isinstance(out.get("id"), str) and "store" in out:
        return {
            k: out[k] for k in ("id", "store", "response", "input_items", "deleted") if k in out
        }
    if out.get("object") == "response" and isinstance(out.get("id"), str):
        return {"id": out["id"], "store": True, "response": out}  # recorded before records
    return None


def run_payloads(kind: str, message: str | None, output: Any, session: Any) -> tuple[dict, Any]:
    """(params, result) of a run as 0004 stored it."""
    out = _dict(output)
    turn = {"message": message} if message is not None else {}
    if kind == "manual":
        return turn, ({"output": output} if output is not None else None)
    if kind == "replay":
        return {}, ({"output": output} if output is not None else None)
    if kind == "scenario":
        meta = _dict(session.meta)
        path = meta.get("scenarioPath") or message or ""
        params: dict[str, Any] = {"scenario": path}
        if message and message != path:
            params["label"] = message  # a Verify batch's scenario run: "<label> #<n>"
        if out.get("maxTurns") is not None:
            params["maxTurns"] = int(out["maxTurns"])
        if "scenarioInput" in out:
            params["scenarioInput"] = out["scenarioInput"]
        result = (
            {"turns": int(out.get("turns") or 0), "stopped": out.get("stopped")}
            if "turns" in out or "stopped" in out
            else None
        )
        return params, result
    if kind == "grader":
        grader = message or out.get("graderPath") or ""
        return {"grader": grader}, (out or None)
    if kind == "verify":
        settings = _dict(out.get("settings")) or _dict(session.context)
        result = {k: out[k] for k in ("progress", "report") if out.get(k) is not None}
        return settings, (result or None)
    if kind == "assistant":
        params = {**turn, "grant": out.get("grant") or "read", "before": _dict(out.get("before"))}
        if "after" in out or out.get("undone"):
            result = {"after": _dict(out.get("after"))}
            if out.get("undone"):
                result["undone"] = True
            return params, result
        return params, None
    if kind == "api":
        return turn, _api_record(output)
    return turn, ({"output": output} if output is not None else None)


def forward(apps: Any, schema_editor: Any) -> None:
    Run = apps.get_model("decks_app", "Run")
    Session = apps.get_model("decks_app", "Session")
    for run in Run.objects.select_related("session").iterator(chunk_size=500):
        params, result = run_payloads(run.kind, run.message, run.output, run.session)
        Run.objects.filter(pk=run.pk).update(params=params, result=result)
    for session in Session.objects.filter(origin="verify").iterator(chunk_size=500):
        # its settings are its run's params now; its context is the deck's context input
        context = _dict(session.context).get("context")
        Session.objects.filter(pk=session.pk).update(context=context)


def backward(apps: Any, schema_editor: Any) -> None:
    Run = apps.get_model("decks_app", "Run")
    Session = apps.get_model("decks_app", "Session")
    for run in Run.objects.iterator(chunk_size=500):
        params, result = _dict(run.params), run.result
        res = _dict(result)
        message: str | None = params.get("message")
        output: Any = result
        if run.kind in ("manual", "replay"):
            output = res.get("output")
        elif run.kind == "scenario":
            message = params.get("label") or params.get("scenario")
            output = {
                **({"maxTurns": params["maxTurns"]} if "maxTurns" in params else {}),
                **({"scenarioInput": params["scenarioInput"]} if "scenarioInput" in params else {}),
                **res,
            } or None
        elif run.kind == "grader":
            message = params.get("grader")
        elif run.kind == "verify":
            message = None
            output = {"settings": params, "progress": res.get("progress")}
            if res.get("report") is not None:
                output["report"] = res["report"]
            Session.objects.filter(pk=run.session_id).update(context=params)
        elif run.kind == "assistant":
            output = {"grant": params.get("grant", "read"), "before": params.get("before", {})}
            output.update(res)
            if not res.get("undone"):
                output.pop("undone", None)
        elif run.kind not in ("api",):
            output = res.get("output") if isinstance(result, dict) else result
        Run.objects.filter(pk=run.pk).update(message=message, output=output)


class Migration(migrations.Migration):
    dependencies = [
        ("decks_app", "0004_apikey_moves_to_endpoint"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="params",
            field=models.JSONField(
                blank=True, default=dict, help_text="what the run was asked to do"
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="result",
            field=models.JSONField(blank=True, help_text="what the run produced", null=True),
        ),
        migrations.RunPython(forward, backward),
        migrations.RemoveField(model_name="run", name="message"),
        migrations.RemoveField(model_name="run", name="output"),
        migrations.AlterField(
            model_name="run",
            name="kind",
            field=models.CharField(default="manual", max_length=16),
        ),
        migrations.AlterField(
            model_name="session",
            name="origin",
            field=models.CharField(default="manual", max_length=16),
        ),
    ]
