"""The byte-level SSE decoder: any split of the bytes gives the same events."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gambit.providers._http import ServerSentEvent, SSEDecoder

STREAM = (
    ": ping\n\n"
    'event: response.output_text.delta\ndata: {"delta":"Grüße 🎉"}\n\n'
    "data: first line\ndata: second line\n\n"
    "event: only-event\n\n"
    ":comment only\n\n"
    "data:no-space\n\n"
    "data: [DONE]\n\n"
)
EXPECTED = [
    ServerSentEvent("response.output_text.delta", '{"delta":"Grüße 🎉"}'),
    ServerSentEvent("message", "first line\nsecond line"),
    ServerSentEvent("only-event", ""),
    ServerSentEvent("message", "no-space"),
    ServerSentEvent("message", "[DONE]"),
]


def decode(pieces: list[bytes]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    return events + decoder.flush()


def test_every_single_split_point_with_every_line_ending() -> None:
    for ending in ("\n", "\r\n", "\r"):
        data = STREAM.replace("\n", ending).encode()
        for cut in range(len(data) + 1):
            assert decode([data[:cut], data[cut:]]) == EXPECTED, (ending, cut)


def test_one_byte_at_a_time() -> None:
    data = STREAM.replace("\n", "\r\n").encode()
    assert decode([data[i : i + 1] for i in range(len(data))]) == EXPECTED


@given(
    st.lists(st.integers(min_value=0, max_value=400), max_size=12), st.sampled_from(["\n", "\r\n"])
)
def test_random_splits(cuts: list[int], ending: str) -> None:
    data = STREAM.replace("\n", ending).encode()
    points = sorted({min(c, len(data)) for c in cuts})
    pieces, prev = [], 0
    for point in points:
        pieces.append(data[prev:point])
        prev = point
    pieces.append(data[prev:])
    assert decode(pieces) == EXPECTED


def test_last_event_without_blank_line_is_kept() -> None:
    assert decode([b"data: tail"]) == [ServerSentEvent("message", "tail")]
    assert decode([b"data: tail\r"]) == [ServerSentEvent("message", "tail")]


def test_a_4_mb_event_in_1_kib_chunks_comes_out_whole() -> None:
    payload = "x" * (4 * 1024 * 1024)
    data = f"event: big\r\ndata: {payload}\r\n\r\ndata: after\r\n\r\n".encode()
    events = decode([data[i : i + 1024] for i in range(0, len(data), 1024)])
    assert [e.event for e in events] == ["big", "message"]
    assert events[0].data == payload and events[1].data == "after"
