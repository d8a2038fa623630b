"""Property tests for every parser that takes outside input: each returns a value or raises
its own error with a message, never anything else (no 500, no traceback).

`./dev test` runs each target with a small budget (60 examples); `./dev fuzz` runs them with
GAMBIT_FUZZ_EXAMPLES (10,000 by default) and prints Hypothesis's statistics.
"""

from __future__ import annotations

import json
import os
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BUDGET = settings(
    max_examples=int(os.environ.get("GAMBIT_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

# JSON-ish values, including the nasty ones (deep nesting, huge numbers, NUL, surrogates).
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
NASTY_TEXT = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["inf", "-inf", "nan", "1e999", "-0", "0x10", "３", "2\x00", " 2 ", "+3"]),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(0, 20_000)),
    st.builds(lambda n: '{"a":' * n + "1" + "}" * n, st.integers(0, 5_000)),
    st.builds(json.dumps, JSON),
)


@BUDGET
@given(NASTY_TEXT)
def test_scores(text):
    from decks_app.sessions.feedback import FeedbackError, parse_score

    try:
        score = parse_score(text)
    except FeedbackError as exc:
        assert str(exc).startswith("score must be a whole number")
    else:
        assert score is None or (isinstance(score, int) and -3 <= score <= 3)


@BUDGET
@given(NASTY_TEXT)
def test_session_context(text):
    from decks_app.sessions.actions import InvalidInput, parse_context

    try:
        parse_context(text)
    except InvalidInput as exc:
        assert str(exc)


@BUDGET
@given(NASTY_TEXT)
def test_websocket_hello(text):
    from decks_app.sessions.consumers import _hello

    hello = _hello(text)
    assert hello is None or (isinstance(hello[0], int) and hello[0] >= 0)


@BUDGET
@given(NASTY_TEXT)
def test_imported_states_and_traces(text):
    from decks_app.sessions.actions import InvalidInput
    from decks_app.sessions.transfer import parse_state, parse_trace

    for parse in (parse_state, parse_trace):
        try:
            parse(text)
        except InvalidInput as exc:
            assert str(exc)


@BUDGET
@given(st.dictionaries(st.text(max_size=12), NASTY_TEXT, max_size=6), st.booleans())
def test_context_forms(form, with_schema):
    from decks_app.sessions.forms import FormError, read

    schema = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array"},
            "nested": {"type": "object", "properties": {"x": {"type": "number"}}},
        },
    }
    keys = ["ctx__json", "ctx", "ctx.name", "ctx.age", "ctx.ok", "ctx.tags", "ctx.nested.x"]
    data = {keys[hash(k) % len(keys)]: v for k, v in form.items()}
    try:
        read(schema if with_schema else None, data)
    except FormError as exc:
        assert str(exc)


@BUDGET
@given(st.one_of(JSON, st.dictionaries(st.sampled_from(["model", "input", "tools", "stream", "instructions", "previous_response_id", "metadata", "tool_choice"]), JSON)))  # fmt: skip
def test_responses_request_bodies(data):
    from endpoint.schemas import ApiError, parse_body

    try:
        parse_body(data)
    except ApiError as exc:
        assert 400 <= exc.status < 500 and str(exc)


@BUDGET
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_sse_decoder(chunks):
    from gambit.providers._http import SSEDecoder

    decoder = SSEDecoder()
    for chunk in chunks:
        decoder.feed(chunk)
    decoder.flush()


@BUDGET
@given(JSON)
def test_saved_states(data):
    from gambit.core import StateError, state_from_dict

    try:
        state_from_dict(data)
    except StateError as exc:
        assert str(exc)


ZOD_WORDS = st.sampled_from(
    ["z.object({", "})", "z.string()", "z.number()", ".optional()", ".describe(", '"x"', ",",
     "a:", "z.enum([", "])", "z.array(", ")", "export default", "import { z } from 'zod';", "\n"]
)  # fmt: skip


@BUDGET
@given(st.lists(ZOD_WORDS | st.text(string.printable, max_size=10), max_size=30))
def test_zod_translator(words):
    from gambit.core import GambitError
    from gambit.core._zod import translate_zod_source

    try:
        translate_zod_source("".join(words), file="fuzz.zod.ts")
    except (GambitError, ValueError) as exc:
        assert str(exc)


@pytest.fixture(scope="module")
def deck_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-decks")


@BUDGET
@given(text=st.text(max_size=400), body=st.text(max_size=50))
def test_deck_loader_never_raises(deck_folder, text, body):
    from gambit.core import check_deck_tree

    path = deck_folder / "PROMPT.md"
    path.write_text(f"+++\n{text}\n+++\n{body}\n", encoding="utf-8", errors="surrogatepass")
    check_deck_tree(path)  # returns problems; must not raise
