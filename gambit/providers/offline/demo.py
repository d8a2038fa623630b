"""The built-in offline models: `offline/echo` and `offline/demo`. No key, no network.

`BUILTIN_MODELS` maps a name (without the `offline/` prefix) to a function from the request
to a scripted reply (`Stream` or `Call`, see `scripted.py`); a `ScriptedProvider` built with
`fallback_models=True` answers from it when its queue is empty. The registry's `offline/`
prefix is such a provider.

`offline/echo` (`echo_reply`) answers `You said: <last user message>`; a deck that must finish
through `gambit_respond` gets a `gambit_respond` call with the smallest payload its schema
accepts, so example trees run end to end.

`offline/demo` (`demo_reply`) reads the request the way a real model would need to, and
answers in the role the deck gives it, deterministically (the same request gets the same
answer):

- a deck with actions or tools calls the first one with arguments built from its JSON schema
  (values taken from the user's words where a field asks for an id, a name or a number)
  before it answers, so the trace shows nested calls;
- a deck that must finish through `gambit_respond` fills a schema-valid payload;
- a grader (its `gambit_respond` payload has a `score`) gives a score from -3 to +3 that
  varies with what it grades, with a reason and a quoted piece of evidence;
- a scenario persona (its instructions embed the scenario-participant snippet) plays a
  customer for three messages, then sends the empty message that ends the scenario;
- the init-fill request of a scenario gets a JSON object with the missing context fields;
- anything else gets a short answer that says what it saw.

Text is streamed word by word; `GAMBIT_DEMO_DELAY_MS` (read by the provider registry) sets
the pause between words (0 by default; `gambit serve` uses 35 ms so it reads like a model).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from gambit.core.provider import (
    CreateResponseRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    item_text,
)

from ._base import last_user_text
from .replies import Call, ReplyModel, Stream

__all__ = ["BUILTIN_MODELS", "demo_reply", "demo_value", "echo_reply"]


# --------------------------------------------------------------------------- offline/echo


def echo_reply(request: CreateResponseRequest) -> Stream | Call:
    """`offline/echo`: `You said: <last user message text>`, or a greeting without one.

    A deck that must finish through `gambit_respond` (action and grader decks with the respond
    snippet) gets a `gambit_respond` call instead, with the smallest payload its schema
    accepts, so example trees run end to end with no API key.
    """
    text = last_user_text(request.input)
    reply = (
        "Hello! I am the offline echo model. Send me a message and I will repeat it."
        if text is None
        else f"You said: {text}"
    )
    respond = next((t for t in request.tools or [] if t.function.name == "gambit_respond"), None)
    if respond is not None and not _already_responded(request.input):
        schema = respond.function.parameters.get("properties", {}).get("payload", {})
        return Call("gambit_respond", {"payload": _placeholder(schema, reply)})
    return Stream(reply)


def _already_responded(items: Sequence[Any]) -> bool:
    return any(isinstance(i, FunctionCallItem) and i.name == "gambit_respond" for i in items)


def _placeholder(schema: Any, text: str, depth: int = 0) -> Any:
    """The simplest value `schema` accepts (a demo stand-in, not a real answer)."""
    if not isinstance(schema, dict) or depth > 8:
        return text
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _placeholder(schema[key][0], text, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {
            name: _placeholder(props.get(name, {}), text, depth + 1)
            for name in schema.get("required", [])
        }
    if kind in ("integer", "number"):
        low: Any = schema.get("minimum", schema.get("exclusiveMinimum", 0))  # JSON values
        high: Any = schema.get("maximum", low if low > 0 else 0)
        return max(low, min(0, high))
    if kind == "boolean":
        return False
    if kind == "array":
        return [
            _placeholder(schema.get("items", {}), text, depth + 1)
            for _ in range(schema.get("minItems", 0))
        ]
    if kind == "null":
        return None
    return text


# --------------------------------------------------------------------------- offline/demo

PERSONA_MARKER = "synthetic scenario participant"
PERSONA_TURNS = 3
INTERNAL_TOOLS = {"gambit_respond", "gambit_end", "gambit_context", "gambit_complete"}
_ID = re.compile(r"\b[A-Z]{1,4}-?\d{2,}\b|\b\d{3,}\b")


def _seed(*parts: Any) -> int:
    return zlib.crc32(json.dumps(parts, sort_keys=True, default=str).encode())


def _instructions(request: CreateResponseRequest) -> str:
    texts = [request.instructions or ""]
    texts += [
        item_text(i) for i in request.input if isinstance(i, MessageItem) and i.role == "system"
    ]
    return "\n".join(t for t in texts if t)


def _last_user_index(items: Sequence[Any]) -> int:
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, MessageItem) and item.role == "user":
            return index
    return -1


def _user_text(items: Sequence[Any]) -> str:
    index = _last_user_index(items)
    return item_text(items[index]) if index >= 0 else ""


def _tool(request: CreateResponseRequest, name: str) -> Any:
    return next((t for t in request.tools or [] if t.function.name == name), None)


HISTORY_MARK = "\n\x00earlier:\n"  # what the user said before, for ids only


def _with_history(items: Sequence[Any], said: str) -> str:
    """The last user message, then (after HISTORY_MARK) the earlier ones, newest first: an
    id the user gave two turns ago is still the one a lookup needs."""
    earlier = [
        item_text(i)
        for i in reversed(items[: _last_user_index(items)])
        if isinstance(i, MessageItem) and i.role == "user"
    ]
    return said + (HISTORY_MARK + "\n".join(earlier) if earlier else "")


def demo_value(schema: Any, hint: str, words: str, depth: int = 0) -> Any:
    """A value `schema` accepts, drawn from `words` where the field name suggests it."""
    if not isinstance(schema, dict) or depth > 8:
        return hint
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][_seed(hint, words) % len(schema["enum"])]
    if "default" in schema:
        return schema["default"]
    if schema.get("examples"):
        return schema["examples"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            options = [
                o for o in schema[key] if not (isinstance(o, dict) and o.get("type") == "null")
            ]
            return demo_value((options or schema[key])[0], hint, words, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {
            name: demo_value(props.get(name, {}), name, words, depth + 1)
            for name in schema.get("required", list(props)[:3])
        }
    if kind in ("integer", "number"):
        low: Any = schema.get("minimum", schema.get("exclusiveMinimum", 1))  # JSON values
        high: Any = schema.get("maximum", max(low, 5))
        found = re.findall(r"\d+", words)
        value = int(found[0]) if found else 1
        value = max(low, min(high, value))
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    if kind == "array":
        count = max(1, schema.get("minItems", 1))
        return [demo_value(schema.get("items", {}), hint, words, depth + 1) for _ in range(count)]
    if kind == "null":
        return None
    lowered = hint.lower()
    if any(k in lowered for k in ("id", "order", "number", "code", "ref")):
        # An id from the user's words, else from earlier in the conversation (the
        # words end with it: see `_with_history`), else the field's own example.
        match = _ID.search(words) or _ID.search(str(schema.get("description") or ""))
        if match:
            return match.group(0)
    words = words.split(HISTORY_MARK)[0]
    if "name" in lowered:
        return "Sam"
    if "email" in lowered:
        return "sam@example.com"
    text = words.strip() or f"demo {hint}"
    return text[: schema.get("maxLength", 200)]


def _calls_this_turn(items: Sequence[Any]) -> list[FunctionCallItem]:
    start = _last_user_index(items)
    return [
        i
        for i in items[start + 1 :]
        if isinstance(i, FunctionCallItem) and i.name not in INTERNAL_TOOLS
    ]


def _outputs_this_turn(items: Sequence[Any]) -> list[str]:
    """What the tools called this turn returned, as sent."""
    start = _last_user_index(items)
    internal = {
        i.call_id for i in items if isinstance(i, FunctionCallItem) and i.name in INTERNAL_TOOLS
    }
    return [
        i.output
        for i in items[start + 1 :]
        if isinstance(i, FunctionCallOutputItem) and i.call_id not in internal
    ]


def _results_this_turn(items: Sequence[Any]) -> list[str]:
    """What the tools called this turn returned, as short readable text."""
    return [_readable(output) for output in _outputs_this_turn(items)]


def _context_given(items: Sequence[Any]) -> str:
    """What the deck was given through `gambit_context`, in a few words (or "")."""
    calls = {
        i.call_id for i in items if isinstance(i, FunctionCallItem) and i.name == "gambit_context"
    }
    for item in items:
        if isinstance(item, FunctionCallOutputItem) and item.call_id in calls:
            try:
                value = json.loads(item.output)
            except ValueError:
                return item.output[:120]
            if isinstance(value, dict):
                text = next((v for v in value.values() if isinstance(v, str) and v.strip()), "")
                return f"\u201c{text[:120]}\u201d" if text else ""
            return f"\u201c{_said(value)[:120]}\u201d" if value not in (None, "") else ""
    return ""


def _first_person(text: str) -> str:
    """A persona's goal, as the persona says it ("you can" -> "I can", "your" -> "my")."""
    swaps = {"you": "I", "your": "my", "yours": "mine", "yourself": "myself"}
    text = " ".join(text.split())
    return re.sub(
        r"\b(you|your|yours|yourself)\b", lambda m: swaps[m.group(1).lower()], text, flags=re.I
    )


def _said(value: Any) -> str:
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _readable(output: str) -> str:
    try:
        value = json.loads(output)
    except ValueError:
        return output[:300]
    if isinstance(value, dict) and "payload" in value:
        value = value["payload"]  # a tool result envelope: the payload is the answer
    if isinstance(value, dict):
        fields = [(k, v) for k, v in value.items() if v is not None][:6]
        return ", ".join(f"{k.replace('_', ' ')}: {_said(v)}" for k, v in fields)[:300]
    return _said(value)[:300]


def _best_tool(tools: Sequence[Any], said: str) -> Any:
    """The tool whose name and description share the most words with the user's message
    ("where is my order" -> `order_status`, "a refund" -> a tool for refunds), as a model
    would choose; among equals, one picked by the message's hash (before, the hash alone
    chose, and the README's "Where is my order A1002?" drafted a refund)."""
    words = {w for w in re.findall(r"[a-z]{4,}", said.lower())}

    def overlap(tool: Any) -> int:
        text = f"{tool.function.name.replace('_', ' ')} {tool.function.description or ''}".lower()
        return sum(1 for w in words if w in text)

    scores = [overlap(t) for t in tools]
    tied = [t for t, score in zip(tools, scores, strict=True) if score == max(scores)]
    return tied[_seed(said) % len(tied)]


def demo_reply(request: CreateResponseRequest) -> Any:
    """The demo model's answer to one request (a `Stream` or a `Call`)."""
    items = list(request.input)
    said = _user_text(items)
    instructions = _instructions(request)

    # The init-fill of a scenario: fill the missing required context fields.
    try:
        fill = json.loads(said)
    except ValueError:
        fill = None
    if isinstance(fill, dict) and fill.get("type") == "gambit_test_bot_init_fill":
        values = {}
        for hint in fill.get("schemaHints") or []:
            kind = hint.get("kind")
            spec = {"enum": hint["enumValues"]} if hint.get("enumValues") else {"type": kind}
            values[hint.get("path", "value")] = demo_value(spec, hint.get("path", ""), "A1002")
        if fill.get("missing") == ["(root)"]:
            return Stream(json.dumps(values.get("(root)", "Sam")))
        return Stream(json.dumps(values))

    # A scenario persona: three customer messages, then the empty message that ends it.
    if PERSONA_MARKER in instructions:
        mine = sum(1 for i in items if isinstance(i, MessageItem) and i.role == "assistant")
        if mine >= PERSONA_TURNS:
            return Stream("")
        goal = re.search(r"[Yy]ou (?:want|need|would like) to\s+([^.]+)\.", instructions)
        about = _ID.search(instructions)
        opening = "Hi! " + (f"It's about order {about.group(0)}. " if about else "")
        lines = [
            opening
            + (f"I'd like to {_first_person(goal.group(1))}." if goal else "I have a question."),
            "Thanks. What happens next, and how long will it take?",
            "That helps, thank you. That's all I needed.",
        ]
        return Stream(lines[mine])

    respond = _tool(request, "gambit_respond")
    payload_schema = (
        respond.function.parameters.get("properties", {}).get("payload", {}) if respond else None
    )
    already_responded = any(
        isinstance(i, FunctionCallItem) and i.name == "gambit_respond" for i in items
    )

    # A grader: a varied score with its reason and evidence.
    if (
        respond is not None
        and not already_responded
        and isinstance(payload_schema, dict)
        and "score" in payload_schema.get("properties", {})
    ):
        graded = _graded_text(items)
        score = _seed(graded) % 7 - 3
        words = graded.split()
        quote = " ".join(words[:8]) if words else "(no text)"
        tone = "concrete and kind" if score > 0 else "acceptable" if score == 0 else "vague"
        payload: dict[str, Any] = {
            "score": score,
            "reason": f"Demo grade: the reply is {tone} ({len(words)} words).",
            "evidence": [quote],
        }
        props = payload_schema.get("properties", {})
        payload = {k: v for k, v in payload.items() if k in props} | {
            k: demo_value(props[k], k, graded)
            for k in payload_schema.get("required", [])
            if k not in payload
        }
        return Call("gambit_respond", {"payload": payload})

    # An edit asked for in so many words (the Build assistant's demo): apply it.
    patch = EDIT_REQUEST.search(said)
    # (edit_file: the Build assistant's own edit tool, which never writes Python)
    editor = _tool(request, "apply_patch") or _tool(request, "edit_file")
    if patch and editor is not None and not _calls_this_turn(items):
        old, new, path = patch.group("old"), patch.group("new"), patch.group("path")
        edits = [{"old_text": old, "new_text": new}]
        return Call(editor.function.name, {"path": path, "edits": edits})
    if _tool(request, "edit_file") is not None:  # the Build assistant: never guess a tool call
        return Stream(_assistant_answer(patch, _outputs_this_turn(items)))

    # A deck with actions or tools: call one before answering, once per turn.
    tools = [t for t in request.tools or [] if t.function.name not in INTERNAL_TOOLS]
    if tools and not _calls_this_turn(items):
        tool = _best_tool(tools, said)
        args = demo_value(
            tool.function.parameters or {}, tool.function.name, _with_history(items, said)
        )
        return Call(tool.function.name, args if isinstance(args, dict) else {"input": args})

    results = _results_this_turn(items)
    if respond is not None and not already_responded:
        given = _context_given(items)
        summary = (
            f"Here is what I found: {results[-1]}."
            if results
            else f"A reply about {given}: we are on it and will follow up within a day."
            if given
            else "Done."
        )
        return Call("gambit_respond", {"payload": demo_value(payload_schema, "reply", summary)})

    if results:
        return Stream(
            f"I looked that up for you: {results[-1]}. Is there anything else I can help with?"
        )
    if said:
        return Stream(
            f"Thanks for your message. You wrote: \u201c{said[:200]}\u201d. "
            "I am the offline demo model, so this is a stand-in answer; set a provider key "
            "to talk to a real model."
        )
    return Stream(
        "Hello! I am the offline demo model. Ask me anything and I will walk through the "
        "deck's tools with you."
    )


# `replace "old" with "new" in FILE` (straight or curly quotes), anywhere in the message.
EDIT_REQUEST = re.compile(
    r'replace\s+["\u201c](?P<old>[^"\u201d]+)["\u201d]\s+with\s+["\u201c](?P<new>[^"\u201d]*)["\u201d]'
    r"\s+in\s+(?P<path>[^\s\"'\u201d]+?)[.,;!?)]*(?:\s|$)",
    re.IGNORECASE,
)
ASSISTANT_HELP = (
    "I am the offline demo model (no provider is configured), so I do not read the deck or "
    "propose changes myself. I can apply one exact edit written as: "
    'replace "old text" with "new text" in PROMPT.md (any file of the deck\'s folder but '
    "Python). Set a provider key for a model that reads INTENT.md and policy/ and proposes "
    "changes."
)


def _refusal(output: str) -> str | None:
    """A tool's error result (`{"status": 4xx, "message": ...}`), as its message."""
    try:
        value = json.loads(output)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("status"), int) and value["status"] >= 400:
        return str(value.get("message") or value.get("code"))
    return None


def _assistant_answer(patch: re.Match[str] | None, outputs: list[str]) -> str:
    """The Build assistant's answer from the demo model, from the tool outputs of this turn:
    what its edit did, or what it can do (it never calls a read or search tool with
    arguments made up from the message)."""
    if patch is None or not outputs:
        return ASSISTANT_HELP
    old, new, path = patch.group("old"), patch.group("new"), patch.group("path")
    outcome = _readable(outputs[-1])
    refused = _refusal(outputs[-1])
    if refused is not None:  # the tool's error result (no match: 409 "no_changes")
        # the file as the user named it, not the server's absolute path to it
        refused = re.sub(r"/\S*/" + re.escape(path.lstrip("./")) + r"\b", path, refused)
        return f"I could not replace \u201c{old}\u201d in {path}: {refused}"
    if any(word in outcome.lower() for word in ("denied", "error", "not found", "failed")):
        return f"I could not replace \u201c{old}\u201d in {path}: {outcome}"
    return (
        f"Done: I replaced \u201c{old}\u201d with \u201c{new}\u201d in {path} "
        "(the offline demo model applies the edit you wrote; the diff is below, with Undo)."
    )


def _graded_text(items: Sequence[Any]) -> str:
    """The text a grader is asked about: `messageToGrade`, else the last assistant message."""
    for item in reversed(items):
        if isinstance(item, FunctionCallOutputItem):
            try:
                context = json.loads(item.output)
            except ValueError:
                continue
            if isinstance(context, dict):
                message = context.get("messageToGrade")
                if isinstance(message, dict) and isinstance(message.get("content"), str):
                    return message["content"]
                session = context.get("session")
                if isinstance(session, dict):
                    contents = [
                        m.get("content")
                        for m in session.get("messages") or []
                        if isinstance(m, dict) and m.get("role") == "assistant"
                    ]
                    texts = [t for t in contents if isinstance(t, str)]
                    if texts:
                        return texts[-1]
    return ""


BUILTIN_MODELS: Mapping[str, ReplyModel] = {
    "echo": echo_reply,
    "demo": demo_reply,
}
"""Demo models that need no script and no API key, by name (without the `offline/` prefix)."""
