"""Counting a request's input tokens locally (docs/decisions.md, "Token counting"): the
shipped o200k_base encoding, and the estimate's error on a corpus of real-shaped
conversations (tests/core/fixtures/token_corpus.json, written by bench/make_token_corpus.py)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from gambit.core._openresponses import CreateResponseRequest
from gambit.core._tokens import (
    ESTIMATE,
    encoding_for_model,
    estimate_text,
    request_token_count,
    text_counter,
)

CORPUS = json.loads((Path(__file__).parent / "fixtures" / "token_corpus.json").read_text("utf-8"))


def test_the_shipped_encoding_loads_offline_and_tokenizes_as_o200k_base():
    count = text_counter("o200k_base")
    # Known o200k_base tokenizations ("hello world" is "hello" + " world").
    assert count("hello world") == 2
    assert count("") == 0
    assert count("Les élèves étudient.") < len("Les élèves étudient.")


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("openai-api/gpt-4.1-mini", "o200k_base"),
        ("openrouter/openai/gpt-5", "o200k_base"),
        ("openai-api/o3-mini", "o200k_base"),
        ("ollama/llama3.1", None),
        ("openrouter/anthropic/claude-sonnet-4", None),
        ("offline/demo", None),
    ],
)
def test_the_model_family_picks_the_tokenizer(model: str, encoding: str | None):
    assert encoding_for_model(model) == encoding


def test_the_corpus_reference_counts_are_the_tokenizers():
    for entry in CORPUS:
        request = CreateResponseRequest.model_validate(entry["request"])
        assert request_token_count(request).tokens == entry["referenceTokens"], entry


def test_the_estimate_stays_within_a_quarter_of_the_reference_and_is_labelled():
    errors = []
    for entry in CORPUS:
        request = CreateResponseRequest.model_validate(entry["request"])
        count = request_token_count(request, precise=False)
        assert count.method == ESTIMATE and count.estimated
        errors.append((count.tokens - entry["referenceTokens"]) / entry["referenceTokens"])
    assert len(errors) >= 10
    # Figures of docs/decisions.md ("Token counting"): mean 10%, worst -23% on this corpus.
    assert statistics.mean(abs(e) for e in errors) <= 0.12
    assert max(abs(e) for e in errors) <= 0.25


def test_an_unknown_family_is_estimated():
    request = CreateResponseRequest.model_validate(
        {"model": "ollama/llama3.1", "input": [{"role": "user", "content": "hello " * 100}]}
    )
    count = request_token_count(request)
    assert count.method == ESTIMATE
    assert count.tokens == 3 + 4 + estimate_text("hello " * 100)
