"""SavedState v2 (docs/decks.md, "Saved state"): load, save, format rules, errors."""

from __future__ import annotations

import json
import os

import pytest

from gambit.core._errors import GambitError
from gambit.core._ids import is_valid_id
from gambit.core._messages import ChatMessage
from gambit.core._openresponses import (
    FunctionCallOutputItem,
    MessageItem,
    UnknownItem,
    function_call_item,
    function_call_output_item,
    message_item,
)
from gambit.core._state import (
    MessageRef,
    SavedState,
    StateError,
    derive_messages,
    effective_format,
    load_state,
    new_state,
    save_state,
    state_from_dict,
    state_items,
    state_messages,
    state_to_dict,
)
from gambit.core._trace import RunEndEvent

RESPONSES_ONLY = {
    "format": "responses",
    "runId": "run-0123456789abcdef01234567",
    "items": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}],
        },
        {"type": "function_call", "call_id": "call-1", "name": "gambit_context", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call-1", "output": '{"topic":"x"}'},
    ],
}

CHAT_ONLY = {
    "runId": "run-aaaaaaaaaaaaaaaaaaaaaaaa",
    "messages": [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ],
}

FULL = {
    "format": "responses",
    "runId": "run-bbbbbbbbbbbbbbbbbbbbbbbb",
    "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ],
    "items": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello!"}],
        },
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ],
    "messageRefs": [
        {"id": "msg-111111111111111111111111", "role": "user", "source": "scenario"},
        {"id": "msg-222222222222222222222222", "role": "assistant"},
    ],
    "traces": [{"type": "run.end", "runId": "run-bbbbbbbbbbbbbbbbbbbbbbbb", "ts": 1700000000000}],
    "meta": {"gambit_async_action_jobs_v1": [], "sessionId": "s1"},
    "feedback": [
        {
            "id": "fb-1",
            "runId": "run-bbbbbbbbbbbbbbbbbbbbbbbb",
            "messageRefId": "msg-222222222222222222222222",
            "score": 2,
            "reason": "good",
            "createdAt": "2026-01-16T00:00:00Z",
            "workspaceId": "w1",
        }
    ],
    "notes": {"text": "note", "updatedAt": "2026-01-16T00:00:00Z"},
    "conversationScore": {"score": 3, "updatedAt": "2026-01-16T00:00:00Z"},
    "gradingRuns": [{"id": "g1"}],
}


def write(path, data) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


# --------------------------------------------------------------------------- loading


def test_responses_only_file_loads_with_derived_messages(tmp_path):
    """An items-only state loads with one message per item: the assistant's text, the
    `gambit_context` call and its output are three messages."""
    path = tmp_path / "state.json"
    write(path, RESPONSES_ONLY)
    state = load_state(path)
    assert state.format == "responses"
    assert len(state.items) == 3
    assert len(state.messages) == 3
    assert state.messages[0] == ChatMessage(role="assistant", content="hello")
    assert state.messages[2].role == "tool"
    assert state.messages[2].content == '{"topic":"x"}'
    assert state.message_refs is None  # not invented on load


def test_items_only_file_without_format_is_responses(tmp_path):
    path = tmp_path / "state.json"
    write(path, {k: v for k, v in RESPONSES_ONLY.items() if k != "format"})
    state = load_state(path)
    assert state.format == "responses"
    assert len(state.messages) == 3


def test_chat_only_file_infers_chat_format(tmp_path):
    path = tmp_path / "state.json"
    write(path, CHAT_ONLY)
    state = load_state(path)
    assert state.format == "chat"
    assert state.items is None
    assert [m.role for m in state.messages] == ["system", "user", "assistant"]
    assert [type(i) for i in state_items(state)] == [MessageItem, MessageItem, MessageItem]
    assert state_to_dict(state) == {"format": "chat", **CHAT_ONLY}


def test_explicit_chat_format_is_kept():
    state = state_from_dict({**RESPONSES_ONLY, "format": "chat"})
    assert state.format == "chat"


def test_state_without_conversation_leaves_format_unset():
    state = state_from_dict({"runId": "run-1", "meta": {"a": 1}})
    assert state.format is None
    assert effective_format(state) == "responses"
    assert state_messages(state) == [] and state_items(state) == []


def test_mixed_file_keeps_both_and_every_other_field(tmp_path):
    path = tmp_path / "state.json"
    write(path, FULL)
    state = load_state(path)
    assert len(state.messages) == 2 and len(state.items) == 3
    assert isinstance(state.items[2], UnknownItem)
    assert state.message_refs[0] == MessageRef(
        id="msg-111111111111111111111111", role="user", source="scenario"
    )
    assert isinstance(state.traces[0], RunEndEvent)
    assert state.feedback[0].message_ref_id == "msg-222222222222222222222222"
    assert state.feedback[0].model_extra == {"workspaceId": "w1"}
    assert state.notes.text == "note"
    assert state.conversation_score.score == 3
    assert state.model_extra == {"gradingRuns": [{"id": "g1"}]}
    assert state_to_dict(state) == FULL
    out = tmp_path / "out.json"
    save_state(out, state)
    assert json.loads(out.read_text(encoding="utf-8")) == FULL


def test_items_win_in_responses_format_when_they_disagree():
    data = {
        "format": "responses",
        "runId": "run-1",
        "messages": [{"role": "user", "content": "stale"}],
        "items": [message_item("user", "fresh").to_dict()],
    }
    state = state_from_dict(data)
    assert state.messages[0].content == "stale"  # kept as stored
    assert [m.content for m in state_messages(state)] == ["fresh"]
    assert state_items(state) == [message_item("user", "fresh")]


def test_messages_win_in_chat_format_when_they_disagree():
    data = {
        "format": "chat",
        "runId": "run-1",
        "messages": [{"role": "user", "content": "fresh"}],
        "items": [message_item("user", "stale").to_dict()],
    }
    state = state_from_dict(data)
    assert [m.content for m in state_messages(state)] == ["fresh"]
    assert state_items(state) == [message_item("user", "fresh")]


def test_responses_state_always_persists_items(tmp_path):
    state = SavedState(
        format="responses", run_id="run-1", messages=[ChatMessage(role="user", content="hi")]
    )
    data = state_to_dict(state)
    assert data["format"] == "responses"
    assert data["items"] == [message_item("user", "hi").to_dict()]
    path = tmp_path / "s.json"
    save_state(path, state)
    assert load_state(path).items == [message_item("user", "hi")]


# --------------------------------------------------------------------------- derive


def test_derive_messages_builds_messages_and_aligned_refs():
    state = state_from_dict(RESPONSES_ONLY)
    state.message_refs = [MessageRef(id="msg-keep", role="assistant", source="manual")]
    derived = derive_messages(state)
    assert derived is not state
    assert [m.role for m in derived.messages] == ["assistant", "assistant", "tool"]
    assert derived.message_refs[0] == MessageRef(id="msg-keep", role="assistant", source="manual")
    assert [r.role for r in derived.message_refs] == ["assistant", "assistant", "tool"]
    assert all(is_valid_id(r.id, "msg") for r in derived.message_refs[1:])
    assert len({r.id for r in derived.message_refs}) == 3


def test_derive_messages_updates_a_ref_whose_role_changed():
    state = SavedState(
        run_id="run-1",
        items=[message_item("user", "x")],
        message_refs=[MessageRef(id="msg-1", role="assistant")],
    )
    assert derive_messages(state).message_refs == [MessageRef(id="msg-1", role="user")]


def test_derive_messages_overrides_stale_messages():
    state = SavedState(
        format="responses",
        run_id="run-1",
        messages=[ChatMessage(role="user", content="stale")],
        items=[message_item("user", "fresh"), function_call_item("c", "f", "{}")],
    )
    derived = derive_messages(state)
    assert [m.content for m in derived.messages] == ["fresh", None]


# --------------------------------------------------------------------------- saving


def test_new_state_has_fresh_run_id():
    a, b = new_state(), new_state("chat")
    assert is_valid_id(a.run_id, "run") and is_valid_id(b.run_id, "run")
    assert a.run_id != b.run_id
    assert (a.format, a.items, a.messages) == ("responses", [], None)
    assert (b.format, b.items, b.messages) == ("chat", None, [])
    assert state_to_dict(a) == {"format": "responses", "runId": a.run_id, "items": []}


def test_save_writes_pretty_utf8_camel_case_json(tmp_path):
    state = new_state(run_id="run-0123456789abcdef01234567")
    state.items = [
        message_item("user", "héllo 日本"),
        function_call_item("c", "gambit_respond", '{ "payload" :"ü" }'),
        function_call_output_item("c", "\u2028raw"),
    ]
    state.message_refs = [MessageRef(id="msg-1", role="user")]
    state.conversation_score = None
    path = tmp_path / "nested" / "dir" / "state.json"
    save_state(path, state)
    raw = path.read_bytes().decode("utf-8")
    assert raw.startswith('{\n  "format": "responses",\n  "runId": ')
    assert "héllo 日本" in raw and "\\u00e9" not in raw
    assert '"messageRefs"' in raw and "message_refs" not in raw
    assert raw.endswith("}\n")
    loaded = load_state(path)
    assert loaded.items == state.items
    assert loaded.items[1].arguments == '{ "payload" :"ü" }'
    assert isinstance(loaded.items[2], FunctionCallOutputItem)
    assert loaded.items[2].output == "\u2028raw"


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    save_state(path, state_from_dict(CHAT_ONLY))
    before = path.read_text(encoding="utf-8")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    changed = state_from_dict(CHAT_ONLY)
    changed.messages.append(ChatMessage(role="user", content="more"))
    with pytest.raises(StateError) as err:
        save_state(path, changed)
    assert str(path) in str(err.value)
    assert "No space left" in str(err.value)
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_save_replaces_existing_file_and_keeps_its_mode(tmp_path):
    path = tmp_path / "state.json"
    save_state(path, CHAT_ONLY)
    os.chmod(path, 0o640)
    save_state(path, RESPONSES_ONLY)
    assert load_state(path).format == "responses"
    assert path.stat().st_mode & 0o777 == 0o640


def test_save_accepts_a_dict_and_validates_it(tmp_path):
    path = tmp_path / "s.json"
    with pytest.raises(StateError, match="runId"):
        save_state(path, {"messages": []})
    assert not path.exists()


# --------------------------------------------------------------------------- errors


def test_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(StateError) as err:
        load_state(path)
    assert isinstance(err.value, GambitError)
    assert str(err.value) == f"{path}: state file not found"
    assert err.value.file == str(path)


def test_invalid_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"runId": "run-1",\n  "messages": [}', encoding="utf-8")
    with pytest.raises(StateError) as err:
        load_state(path)
    message = str(err.value)
    assert message.startswith(f"{path}: invalid JSON at line 2")


def test_not_an_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(StateError, match=r"must be a JSON object, got array") as err:
        load_state(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"messages": []}, "runId: Field required"),
        ({"runId": "r", "format": "xml"}, "format: Input should be 'chat' or 'responses'"),
        ({"runId": "r", "messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        ({"runId": "r", "items": [{"type": "function_call", "call_id": "c"}]}, "items.0"),
        ({"runId": "r", "messages": "hello"}, "messages: Input should be a valid list"),
    ],
)
def test_wrong_shape_names_file_and_field(tmp_path, data, fragment):
    path = tmp_path / "shape.json"
    write(path, data)
    with pytest.raises(StateError) as err:
        load_state(path)
    message = str(err.value)
    assert message.startswith(f"{path}: invalid saved state: ")
    assert fragment in message


def test_state_from_dict_without_file():
    with pytest.raises(StateError, match="^a saved state must be a JSON object, got str$"):
        state_from_dict("x")


def test_directory_is_not_a_state_file(tmp_path):
    with pytest.raises(StateError, match="directory"):
        load_state(tmp_path)


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes('{"runId": "é"}'.encode("latin-1"))
    with pytest.raises(StateError, match="not UTF-8"):
        load_state(path)
