"""The endpoint's run kind, "api": one `POST /v1/responses` call, recorded as a run of an API
session. It is not executed by the queue: the web process that answers the call runs it
(endpoint/call.py creates it `running` and records its end), so it has no `execute` and
sends no heartbeat (only a server start-up marks one left running as interrupted).
Registered from endpoint.apps.EndpointConfig.ready() (docs/simulator.md, "Jobs")."""

from __future__ import annotations

from pydantic import ConfigDict

from decks_app.runs.registry import JSONObject, Payload, RunKind, register


class ApiParams(Payload):
    """The call's last user message (the text the Test tab shows for the run)."""

    message: str | None = None


class ApiCallRecord(Payload):
    """What the endpoint stores of a call (endpoint/store.py), with the Open Responses
    spelling of its keys: `{"id", "store", "response", "input_items"}`; only
    `{"id", "store": false}` for a call made with `store: false`; `{"id", "store",
    "deleted": true}` once deleted."""

    model_config = ConfigDict(alias_generator=None)

    id: str
    store: bool = True
    response: JSONObject | None = None
    input_items: list[JSONObject] | None = None
    deleted: bool = False


register(
    RunKind(
        name="api",
        params=ApiParams,
        result=ApiCallRecord,
        execute=None,
        description="one /v1/responses call, answered by the web process",
        heartbeats=False,
        origins=("api",),
    )
)
