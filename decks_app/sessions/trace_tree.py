"""The trace as a tree: run -> deck -> model calls and tool calls -> nested decks.

Built from stored trace-event payloads alone (no state), so the same function serves the
live session page, the trace page and each step of a replay.

Every node has a stable element id made from the event that opened it (`tn-<event id>`),
and remembers the last event that changed it, so the session page can be updated in place:
a new node is appended to its parent's children, a changed one has its head and body
replaced (`updates`). A model node keeps what was sent (instructions, input items, tools,
parameters) and what came back, with its tokens, latency and cost; a run node has the
timeline (waterfall) of its calls and actions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from decks_app.runs.events import call_payloads
from decks_app.sessions.trace_items import (
    cost_text,
    duration_text,
    parse_json,
    request_detail,
    request_settings,
    result_items,
    sent_summary,
    split_envelope,
    tokens_text,
)
from decks_app.sessions.trace_items import text as _text
from gambit.core import (
    ActionStartEvent,
    DeckEndEvent,
    DeckStartEvent,
    LogEvent,
    MessageUserEvent,
    ModelCallEvent,
    ModelResultEvent,
    MonologEvent,
    RunEndEvent,
    RunStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    json_dict,
    trace_event_view,
)

__all__ = ["Bar", "Node", "TreeUpdate", "build_tree", "request_detail", "tree_rows", "updates"]

OPEN = ("running", "calling")


@dataclass
class Bar:
    """One row of a run's timeline: where a call starts and how long it took."""

    kind: str
    label: str
    status: str
    depth: int
    offset_ms: int
    duration_ms: int
    left: float = 0.0  # percent of the run's span
    width: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "status": self.status or None,
            "depth": self.depth,
            "offsetMs": self.offset_ms,
            "durationMs": self.duration_ms,
        }


@dataclass
class Node:
    kind: str  # run | deck | model | tool | user | log | monolog
    label: str
    status: str = ""
    detail: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    cost: float | None = None
    duration_ms: int | None = None
    children: list[Node] = field(default_factory=list)
    ts: int = 0
    id: str = ""  # the element id: tn-<id of the event that opened the node>
    parent_id: str = ""  # "" for a run (a root of the tree)
    opened: int = 0  # the event that opened it, and the last one that changed it
    changed: int = 0
    request: dict[str, Any] | None = None  # model calls: what was sent
    end_ts: int = 0
    bars: list[Bar] = field(default_factory=list)  # runs: the timeline
    span_ms: int = 0
    bar: Bar | None = None  # its own row of its run's timeline (decks, model and tool calls)
    run_id: str = ""  # runs: the runtime's id of the run (shown small: a name comes first)
    preview: str = ""  # runs: the first user message
    args: Any = None  # tool calls: the arguments, as JSON data
    result: Any = None  # tool calls: what came back (an action's payload, out of its envelope)
    envelope: dict[str, Any] | None = None  # the whole result with runId, actionCallId...
    total_tokens: int | None = None  # this node and everything under it
    total_cost: float | None = None  # None unless every model call under it has a cost

    @property
    def tokens(self) -> dict[str, int | None] | None:
        """Input / output / cached / reasoning / total tokens of a model call or run."""
        usage = self.usage or {}
        if not usage:
            return None

        def pick(*names: str) -> int | None:
            for name in names:
                value = usage.get(name)
                if isinstance(value, int) and not isinstance(value, bool):
                    return value
            return None

        return {
            "input": pick("promptTokens", "inputTokens", "input_tokens", "prompt_tokens"),
            "output": pick(
                "completionTokens", "outputTokens", "output_tokens", "completion_tokens"
            ),
            "cached": pick("cachedTokens", "cached_tokens"),
            "reasoning": pick("reasoningTokens", "reasoning_tokens"),
            "total": pick("totalTokens", "total_tokens"),
        }

    @property
    def event_id(self) -> int:
        """The event that opened the node (its detail is `/trace/nodes/<event_id>`)."""
        return self.opened

    @property
    def key(self) -> str:
        """The node in URLs (`?node=<key>`, `/trace/nodes/<key>`): its id without `tn-`."""
        return self.id.removeprefix("tn-")

    @property
    def short_preview(self) -> str:
        """The first user message as a tree row shows it (48 characters at most)."""
        text = " ".join(self.preview.split())
        return text if len(text) <= 48 else text[:47] + "…"

    @property
    def sent_summary(self) -> str:
        return sent_summary(self.request)

    @property
    def figures(self) -> dict[str, str]:
        """Latency, tokens and cost as the tree's columns show them ("" when a node has no
        such figure; cost "—" where calls under the node have no known price)."""
        has_calls = self.kind in ("model", "run") or self.total_tokens is not None
        return {
            "latency": duration_text(self.duration_ms),
            "tokens": tokens_text(self.total_tokens),
            "cost": cost_text(self.total_cost) if has_calls else "",
        }

    @property
    def tokens_line(self) -> str:
        """Known token counts: "input 120 · cached 100 · output 30 · reasoning 12 · total 150"."""
        tokens = self.tokens or {}
        names = ("input", "cached", "output", "reasoning", "total")
        return " · ".join(f"{n} {tokens[n]}" for n in names if tokens.get(n) is not None)

    @property
    def envelope_keys(self) -> str:
        return ", ".join(self.envelope or {})

    @property
    def offset_ms(self) -> int | None:
        return self.bar.offset_ms if self.bar else None

    def to_dict(self, children: bool = True) -> dict[str, Any]:
        out = {
            "id": self.id,
            "eventId": self.opened,
            "kind": self.kind,
            "label": self.label,
            "status": self.status or None,
            "detail": self.detail or None,
            "items": self.items,
            "usage": self.usage,
            "tokens": self.tokens,
            "cost": self.cost,
            "durationMs": self.duration_ms,
            "ts": self.ts or None,
            "offsetMs": self.offset_ms,
            "totals": {"tokens": self.total_tokens, "costUsd": self.total_cost},
        }
        if children:
            out["children"] = [c.to_dict() for c in self.children]
        if self.kind == "model":
            out["request"] = self.request
        if self.kind == "tool":
            out.update(args=self.args, result=self.result, envelope=self.envelope)
        if self.kind == "run":
            out.update(runId=self.run_id or None, preview=self.preview or None)
            out["timeline"] = [b.to_dict() for b in self.bars]
        return out


def _short_path(path: str | None) -> str:
    if not path:
        return "deck"
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def _cost(usage: dict[str, Any] | None) -> float | None:
    usage = usage or {}
    cost = usage.get("costUsd", usage.get("cost"))
    return cost if isinstance(cost, int | float) and not isinstance(cost, bool) else None


def _rows(
    payloads: Iterable[dict[str, Any] | tuple[int, dict[str, Any]]],
) -> Iterable[tuple[int, dict[str, Any]]]:
    for index, row in enumerate(payloads, start=1):
        if isinstance(row, tuple):
            yield row
        else:
            yield index, row


def build_tree(
    payloads: Sequence[dict[str, Any]] | Iterable[tuple[int, dict[str, Any]]],
    *,
    deck_label: Callable[[str | None], str] | None = None,
) -> list[Node]:
    """The tree of the given events: payloads in order, or `(event id, payload)` pairs (then
    node ids are stable across builds, which the live page's in-place updates rely on).
    `deck_label` names a deck from its path as the workspace does (the trace page passes
    `trace_items.deck_labeler`); without it a deck is named by the last two parts of its
    path (the session page's panel). A run is named by its deck either way: a scenario run
    holds the persona's runs and the deck's under one run id, which named them all alike.
    An absolute path is never shown."""
    label = deck_label or _short_path
    roots: list[Node] = []
    run: Node | None = None
    decks: dict[str, Node] = {}
    tools: dict[str, Node] = {}
    models: dict[str, Node] = {}
    # Tool nodes whose deck had not started yet: a deck's `gambit_context` call is traced
    # just before its deck.start, under the deck's own call id (they move in when it starts).
    early: dict[str, list[tuple[Node, Node]]] = {}
    last_ts = 0
    node: Node | None

    def container(parent_id: str | None) -> Node | None:
        if parent_id and parent_id in tools:
            return tools[parent_id]
        if parent_id and parent_id in decks:
            return decks[parent_id]
        return run

    def add(parent: Node, node: Node, pk: int) -> Node:
        node.id, node.parent_id, node.opened, node.changed = f"tn-{pk}", parent.id, pk, pk
        parent.children.append(node)
        return node

    for pk, p in _rows(payloads):
        event = trace_event_view(p)
        ts = event.ts if isinstance(event.ts, int) else 0
        last_ts = max(last_ts, ts)
        if isinstance(event, RunStartEvent) or run is None:
            run_id = getattr(event, "run_id", None) or ""
            run = Node("run", run_id or "run", status="running", ts=ts, run_id=run_id)
            run.opened, run.changed = pk, pk
            roots.append(run)
            decks, tools, models = {}, {}, {}  # call ids belong to their run
            if isinstance(event, RunStartEvent):
                run.id = f"tn-{pk}"
                run.label = label(event.deck_path) if event.deck_path else run_id or "run"
                continue
            run.id = f"tn-{pk}-run"  # events without their run.start: this one goes inside
        run.end_ts = max(run.end_ts, ts)
        match event:
            case RunEndEvent():
                run.changed = pk
                run.status = event.status or "completed"
                # Whatever was still open when the run ended ended with it: an interrupted,
                # failed or canceled run shows no deck "running" or model "calling" for ever.
                ended = (
                    "done"
                    if run.status in ("completed", "ended", "paused", "incomplete")
                    else run.status
                )
                _close_open(run, ended, pk)
                run.usage = json_dict(event.usage) or None
                run.cost = _cost(run.usage)
                run.duration_ms = event.duration_ms
                if event.error:
                    run.detail = str(event.error)
            case DeckStartEvent():
                node = Node("deck", label(event.deck_path), status="running", ts=ts)
                parent = container(event.parent_action_call_id) or run
                decks[event.action_call_id or ""] = add(parent, node, pk)
                for moved, held_by in early.pop(event.action_call_id or "", []):
                    held_by.children.remove(moved)
                    node.children.append(moved)
                    moved.parent_id, moved.changed = node.id, pk
            case DeckEndEvent():
                node = decks.get(event.action_call_id or "")
                if node:
                    node.status, node.changed = "done", pk
                    node.duration_ms = ts - node.ts if ts and node.ts else None
            case MessageUserEvent():
                text = _text(json_dict(event.message).get("content"))
                node = Node("user", "user message", detail=text, ts=ts)
                run.preview = run.preview or text[:200]
                add(container(event.action_call_id) or run, node, pk)
            case ModelCallEvent():
                node = Node("model", event.model or "model", status="calling", ts=ts)
                count = event.message_count if event.message_count is not None else "?"
                node.detail = f"{count} items, {event.tool_count or 0} tools"
                node.request = request_settings(event)
                models[event.action_call_id or ""] = add(
                    container(event.action_call_id) or run, node, pk
                )
            case ModelResultEvent():
                node = models.pop(event.action_call_id or "", None)
                if node is None:
                    node = Node("model", event.model or "model", ts=ts)
                    node = add(container(event.action_call_id) or run, node, pk)
                node.changed = pk
                node.label = event.model or node.label  # the model that answered
                node.status = event.finish_reason or "done"
                node.usage = json_dict(event.usage) or None
                node.cost = _cost(node.usage)
                duration = event.duration_ms
                node.duration_ms = (
                    duration
                    if isinstance(duration, int)
                    else (ts - node.ts if ts and node.ts else None)
                )
                node.items = result_items(event)
            case ActionStartEvent() | ToolCallEvent():
                call_id = event.action_call_id or ""
                node = tools.get(call_id)
                if node is None:
                    kind = event.tool_kind if isinstance(event, ToolCallEvent) else None
                    node = Node("tool", event.name or "tool", status="running", ts=ts)
                    node.detail = kind or ""
                    parent = container(event.parent_action_call_id) or run
                    tools[call_id] = add(parent, node, pk)
                    waiting_for = event.parent_action_call_id
                    if waiting_for and waiting_for not in tools and waiting_for not in decks:
                        early.setdefault(waiting_for, []).append((node, parent))
                node.changed = pk
                if isinstance(event, ToolCallEvent):
                    node.items.append({"type": "arguments", "text": _text(event.args)})
                    node.args = parse_json(event.args)
                    node.detail = event.tool_kind or node.detail
            case ToolResultEvent():
                node = tools.get(event.action_call_id or "")
                if node is not None:
                    node.status, node.changed = "done", pk
                    node.duration_ms = ts - node.ts if ts and node.ts else None
                    result = _text(event.result)[:4000]
                    node.items.append({"type": "result", "text": result})
                    node.result, node.envelope = split_envelope(event.result)
            case LogEvent():
                text = event.message or event.title or event.body
                node = Node("log", event.level or "log", detail=_text(text), ts=ts)
                add(container(event.action_call_id) or run, node, pk)
            case MonologEvent():
                node = Node("monolog", "monolog", detail=_text(event.content), ts=ts)
                add(container(event.action_call_id) or run, node, pk)
    for root in roots:
        _timeline(root, last_ts)
        _totals(root)
    return roots


def _totals(node: Node) -> list[Node]:
    """Set `total_tokens` and `total_cost` of the node and everything under it, and return
    the model calls at and under it. A model call counts its own; a run its `run.end` usage
    when it has one. Cost is known only when every model call under the node reported one
    (`usage.costUsd`: the provider's own figure or the pricing table's, docs/simulator.md)."""
    calls = [node] if node.kind == "model" else []
    for child in node.children:
        calls.extend(_totals(child))
    tokens = [t for t in (_call_tokens(c) for c in calls) if t is not None]
    node.total_tokens = sum(tokens) if tokens else None
    costs = [c.cost for c in calls]
    node.total_cost = round(sum(c for c in costs if c is not None), 10) if calls else None
    if None in costs:
        node.total_cost = None
    if node.kind == "run":
        run_tokens = (node.tokens or {}).get("total")
        node.total_tokens = run_tokens if run_tokens is not None else node.total_tokens
        node.total_cost = node.cost if node.cost is not None else node.total_cost
    return calls


def _call_tokens(call: Node) -> int | None:
    tokens = call.tokens or {}
    if tokens.get("total") is not None:
        return tokens["total"]
    if tokens.get("input") is None and tokens.get("output") is None:
        return None
    return (tokens.get("input") or 0) + (tokens.get("output") or 0)


def _close_open(node: Node, status: str, pk: int) -> None:
    for child in node.children:
        if child.status in OPEN:
            child.status, child.changed = status, pk
        _close_open(child, status, pk)


def _timeline(run: Node, now_ts: int) -> None:
    """The run's waterfall: each deck, model call and tool call as a bar from its start for
    its duration (one still open runs to the newest event). Sets `bars` and `span_ms`."""
    start = run.ts or 0
    end = max(run.end_ts, now_ts if run.status in OPEN else 0, start)
    if isinstance(run.duration_ms, int):
        end = max(end, start + run.duration_ms)
    bars: list[Bar] = []

    def walk(node: Node, depth: int) -> None:
        for child in node.children:
            if child.kind in ("deck", "model", "tool") and child.ts:
                if isinstance(child.duration_ms, int):
                    duration = child.duration_ms
                elif child.status in OPEN:
                    duration = max(0, end - child.ts)
                else:
                    duration = 0
                child.bar = Bar(
                    child.kind, child.label, child.status, depth, child.ts - start, duration
                )
                bars.append(child.bar)
            walk(child, depth + 1)

    walk(run, 0)
    span = max(1, end - start, *(b.offset_ms + b.duration_ms for b in bars)) if bars else 1
    for bar in bars:
        bar.left = round(100 * max(0, bar.offset_ms) / span, 2)
        bar.width = max(0.4, round(100 * bar.duration_ms / span, 2))
    run.bars, run.span_ms = bars, span
    # A run's timeline changes with any call in it: its body is re-sent with them.
    run.changed = max([run.changed, *(_last_change(c) for c in run.children)])


def _last_change(node: Node) -> int:
    return max([node.changed, *(_last_change(c) for c in node.children)])


def walk(nodes: Iterable[Node]) -> Iterable[Node]:
    for node in nodes:
        yield node
        yield from walk(node.children)


@dataclass
class TreeUpdate:
    """What changed after event `since`: nodes to append (to their parent's children, or to
    the tree for a run) and nodes whose head and body to replace."""

    added: list[Node]
    changed: list[Node]


def updates(roots: list[Node], since: int) -> TreeUpdate:
    added: list[Node] = []
    changed: list[Node] = []

    def visit(node: Node) -> None:
        if node.opened > since:
            added.append(node)  # sent whole, with its children
            return
        if node.changed > since:
            changed.append(node)
        for child in node.children:
            visit(child)

    for root in roots:
        visit(root)
    return TreeUpdate(added, changed)


def tree_rows(
    session: Any, cursor: int | None = None, runs: Sequence[Any] | None = None
) -> list[tuple[int, Any]]:
    """`(event id, payload)` of the events the tree is built from (no provider stream events),
    up to `cursor`, of the session or of some of its runs. `model.call` events are read
    without the conversation each one carries (`call_payloads`): it grows with every turn,
    so a long session's calls would be quadratic in its length."""
    import heapq

    from decks_app.models import TraceEvent

    # By run when runs are given: the (run, seq) index finds their events directly.
    qs = (
        TraceEvent.objects.filter(run__in=list(runs))
        if runs is not None
        else TraceEvent.objects.filter(session=session)
    ).exclude(type__startswith="response.")
    if cursor is not None:
        qs = qs.filter(id__lte=cursor)
    others = qs.exclude(type="model.call").order_by("id").values_list("id", "payload")
    calls = call_payloads(qs.filter(type="model.call").order_by("id"))
    return list(heapq.merge(others, calls, key=lambda row: row[0]))
