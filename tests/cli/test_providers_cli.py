"""`gambit run` against each provider kind through its prefix and environment variables alone.

Every test runs the real console script in a subprocess, with an environment that holds only
the variables of the provider under test (pointed at the fake model server on 127.0.0.1),
and asserts on the requests the server received and on the `--trace` file: the usage of
each `model.result` and the summed usage of `run.end`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

GAMBIT = str(Path(sys.executable).parent / "gambit")
_PROVIDER_PREFIXES = ("OPENAI_", "OPENROUTER_", "OLLAMA_", "OPENRESPONSES_", "GAMBIT_")


@pytest.fixture(autouse=True)
def _no_default_fake_reply(fake_server: FakeModelServer) -> None:
    # A request the test did not script fails loudly instead of answering "ok".
    fake_server.default_reply = None


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without any provider or Gambit variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PROVIDER_PREFIXES)}
    env.update(extra)
    return env


def write_deck(root: Path, model: str | list[str], *, action: bool = False) -> Path:
    model_toml = json.dumps(model)
    actions = ""
    if action:
        actions = textwrap.dedent(
            """
            [[actions]]
            name = "lookup"
            description = "Look an order up"
            execute = "./lookup.py"
            """
        )
        (root / "lookup.py").write_text(
            "import gambit\n"
            "deck = gambit.define_deck(\n"
            "    run=lambda ctx: {'order': ctx.input['order'], 'status': 'shipped'},\n"
            "    context_schema={'type': 'object', 'properties': {'order': {'type': 'string'}},"
            " 'required': ['order']},\n"
            "    response_schema={'type': 'object'},\n"
            ")\n"
        )
    deck = root / "PROMPT.md"
    deck.write_text(
        f"+++\n[modelParams]\nmodel = {model_toml}\n{actions}+++\nYou help customers.\n"
    )
    return deck


def gambit_run(
    deck: Path, env: dict[str, str], *args: str, message: str = "where is A1?"
) -> tuple[subprocess.CompletedProcess, list[dict[str, Any]]]:
    trace = deck.parent / "trace.jsonl"
    trace.unlink(missing_ok=True)
    result = subprocess.run(
        [GAMBIT, "run", str(deck), "--message", message, "--trace", str(trace), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=deck.parent,
        timeout=120,
    )
    events = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    return result, events


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def model_posts(server: FakeModelServer) -> list[str]:
    return [r.path for r in server.requests if r.method == "POST"]


def lookup_then_answer(**usage: Any) -> tuple[Reply, Reply]:
    """Two passes: the model calls `lookup`, then answers with text."""
    first = Reply(
        function_calls=[FunctionCall("lookup", {"order": "A1"}, call_id="call_lookup_1")],
        usage={"input_tokens": 100, "output_tokens": 20, "cached_tokens": 40, **usage},
    )
    second = Reply(
        deltas=["A1 has ", "shipped."],
        usage={"input_tokens": 150, "output_tokens": 10, "reasoning_tokens": 4, **usage},
    )
    return first, second


def assert_summed_usage(events: list[dict[str, Any]], *, cost: bool) -> None:
    results = of_type(events, "model.result")
    end = of_type(events, "run.end")[-1]
    assert end["status"] == "completed", end
    total = end["usage"]
    for key in ("promptTokens", "completionTokens", "totalTokens"):
        assert total[key] == sum(r["usage"][key] for r in results), key
    if cost:
        assert all(r["usage"]["costUsd"] > 0 for r in results)
        expected = sum(r["usage"]["costUsd"] for r in results)
        assert total["costUsd"] == pytest.approx(expected, rel=1e-6)


# ---- openrouter/ ------------------------------------------------------------------------------


def test_openrouter_chat_mode_uses_chat_completions(fake_server: FakeModelServer, tmp_path: Path):
    deck = write_deck(tmp_path, "openrouter/openai/gpt-4o-mini", action=True)
    fake_server.queue(*lookup_then_answer(cost=0.0015))
    env = clean_env(
        OPENROUTER_API_KEY="or-key",
        OPENROUTER_BASE_URL=fake_server.base_url,
        GAMBIT_CHAT_FALLBACK="1",
    )
    result, events = gambit_run(deck, env, "--stream")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A1 has shipped."
    assert model_posts(fake_server) == ["/v1/chat/completions"] * 2
    first = fake_server.requests[0]
    assert first.headers["authorization"] == "Bearer or-key"
    assert first.headers["http-referer"] == "https://gambit.local"
    assert first.headers["x-title"] == "Gambit CLI"
    assert first.body["model"] == "openai/gpt-4o-mini"
    assert first.body["stream"] is True
    assert first.body["tools"][0]["function"]["name"] == "lookup"
    second = fake_server.requests[1].body["messages"]
    assert second[-1]["role"] == "tool"
    assert any(m.get("tool_calls") for m in second if m["role"] == "assistant")
    results = of_type(events, "model.result")
    assert [r["mode"] for r in results] == ["chat", "chat"]
    assert results[0]["usage"] == {
        "promptTokens": 100,
        "completionTokens": 20,
        "totalTokens": 120,
        "reasoningTokens": 0,
        "cachedTokens": 40,
        "costUsd": 0.0015,
    }
    assert results[1]["usage"]["reasoningTokens"] == 4
    assert_summed_usage(events, cost=True)
    assert of_type(events, "run.end")[-1]["usage"]["costUsd"] == pytest.approx(0.003)


@pytest.mark.parametrize("chat_mode", [True, False], ids=["flag-in-chat-mode", "responses-mode"])
def test_openrouter_responses_api(fake_server: FakeModelServer, tmp_path: Path, chat_mode: bool):
    deck = write_deck(tmp_path, "openrouter/openai/gpt-4o-mini", action=True)
    fake_server.queue(*lookup_then_answer(cost=0.001))
    env = clean_env(OPENROUTER_API_KEY="or-key", OPENROUTER_BASE_URL=fake_server.base_url)
    if chat_mode:
        env.update(GAMBIT_CHAT_FALLBACK="1", GAMBIT_OPENROUTER_RESPONSES="1")
    result, events = gambit_run(deck, env, "--stream")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A1 has shipped."
    assert model_posts(fake_server) == ["/v1/responses"] * 2
    body = fake_server.requests[0].body
    assert body["model"] == "openai/gpt-4o-mini"
    assert body["tools"][0] == {
        "type": "function",
        "name": "lookup",
        "description": "Look an order up",
        "parameters": {
            "type": "object",
            "properties": {"order": {"type": "string"}},
            "required": ["order"],
        },
        "strict": False,
    }
    assert fake_server.requests[0].headers["x-title"] == "Gambit CLI"
    # OpenRouter does not chain: the second pass resends the whole conversation.
    second = fake_server.requests[1].body
    assert "previous_response_id" not in second
    assert second["input"][0]["role"] == "system"
    results = of_type(events, "model.result")
    assert [r["mode"] for r in results] == ["chat" if chat_mode else "responses"] * 2
    assert results[0]["usage"]["costUsd"] == 0.001
    assert_summed_usage(events, cost=True)


# ---- openai-api/ ------------------------------------------------------------------------------


def test_openai_chains_passes_within_a_run(fake_server: FakeModelServer, tmp_path: Path):
    deck = write_deck(tmp_path, "openai-api/gpt-4.1-mini", action=True)
    first, second = lookup_then_answer()
    first.response_id = "resp_first"
    fake_server.queue(first, second)
    fake_server.validate_previous_response_id = True
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_server.base_url)
    result, events = gambit_run(deck, env, "--stream")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A1 has shipped."
    one, two = (r.body for r in fake_server.requests)
    assert fake_server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert "previous_response_id" not in one
    assert [i.get("role") for i in one["input"]] == ["system", "user"]
    assert two["previous_response_id"] == "resp_first"
    # Only what is new since the first response: the call's output (and the runtime's
    # completion record of it), no system or user message, no replayed call.
    assert two["input"][0] == {
        "type": "function_call_output",
        "call_id": "call_lookup_1",
        "output": two["input"][0]["output"],
    }
    assert json.loads(two["input"][0]["output"])["payload"] == {"order": "A1", "status": "shipped"}
    assert not any(i["type"] == "message" for i in two["input"])
    assert not any(i.get("call_id") == "call_lookup_1" for i in two["input"][1:])
    results = of_type(events, "model.result")
    # gpt-4.1-mini defaults: input 0.40, cached 0.10, output 1.60 USD per 1M tokens.
    assert results[0]["usage"]["costUsd"] == pytest.approx((60 * 0.4 + 40 * 0.1 + 20 * 1.6) / 1e6)
    assert results[0]["usage"]["cachedTokens"] == 40
    assert results[1]["usage"]["costUsd"] == pytest.approx((150 * 0.4 + 10 * 1.6) / 1e6)
    assert results[1]["usage"]["reasoningTokens"] == 4
    assert_summed_usage(events, cost=True)
    assert of_type(events, "run.end")[-1]["usage"]["cachedTokens"] == 40


def test_openai_resumed_run_sends_the_full_history(fake_server: FakeModelServer, tmp_path: Path):
    deck = write_deck(tmp_path, "openai-api/gpt-4.1-mini")
    state = tmp_path / "state.json"
    fake_server.queue(Reply(text="Hello Sam.", response_id="resp_one"), Reply(text="Still here."))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_server.base_url)
    first, _ = gambit_run(deck, env, "--state", str(state), message="hi, I am Sam")
    assert first.returncode == 0, first.stderr
    saved = json.loads(state.read_text())
    record = saved["meta"]["openaiResponses"][str(deck.resolve())]
    assert record["lastResponseId"] == "resp_one" and record["model"] == "gpt-4.1-mini"

    second, events = gambit_run(deck, env, "--state", str(state), message="are you there?")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "Still here."
    body = fake_server.requests[-1].body
    assert "previous_response_id" not in body  # a new process never reuses an old id
    texts = [(i["role"], i["content"][0]["text"]) for i in body["input"]]
    assert texts == [
        ("system", "You help customers."),
        ("user", "hi, I am Sam"),
        ("assistant", "Hello Sam."),
        ("user", "are you there?"),
    ]
    assert_summed_usage(events, cost=True)


def test_openai_rejected_id_is_retried_with_full_history(
    fake_server: FakeModelServer, tmp_path: Path
):
    deck = write_deck(tmp_path, "openai-api/gpt-4.1-mini", action=True)
    fake_server.queue(*lookup_then_answer())
    fake_server.reject_previous_response_id = True
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_server.base_url)
    result, events = gambit_run(deck, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A1 has shipped."
    bodies = [r.body for r in fake_server.requests]
    assert len(bodies) == 3
    assert "previous_response_id" in bodies[1]
    assert "previous_response_id" not in bodies[2]
    assert bodies[2]["input"][0]["role"] == "system"
    assert_summed_usage(events, cost=True)


# ---- ollama/ ----------------------------------------------------------------------------------


def test_ollama_through_its_base_url(fake_server: FakeModelServer, tmp_path: Path):
    deck = write_deck(tmp_path, "ollama/llama3", action=True)
    fake_server.queue(*lookup_then_answer())
    env = clean_env(OLLAMA_BASE_URL=fake_server.base_url)
    result, events = gambit_run(deck, env, "--stream")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A1 has shipped."
    assert model_posts(fake_server) == ["/v1/responses"] * 2
    assert fake_server.requests[0].body["model"] == "llama3"
    assert fake_server.requests[0].headers["authorization"] == "Bearer ollama"
    results = of_type(events, "model.result")
    assert results[0]["usage"]["promptTokens"] == 100
    assert "costUsd" not in results[0]["usage"]  # no pricing for local models
    assert_summed_usage(events, cost=False)


def test_ollama_first_in_a_list_is_skipped_when_the_model_is_not_pulled(
    fake_server: FakeModelServer, tmp_path: Path
):
    deck = write_deck(tmp_path, ["ollama/not-pulled", "ollama/qwen3:0.6b"])
    fake_server.queue(Reply(text="hi from qwen"))
    result, events = gambit_run(deck, clean_env(OLLAMA_BASE_URL=fake_server.base_url))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hi from qwen"
    assert fake_server.requests[0].path == "/api/tags"
    assert fake_server.requests_to("/responses")[0].body["model"] == "qwen3:0.6b"
    assert of_type(events, "model.call")[0]["model"] == "ollama/qwen3:0.6b"


# ---- openresponses/ ---------------------------------------------------------------------------


def test_openresponses_server(fake_server: FakeModelServer, tmp_path: Path):
    deck = write_deck(tmp_path, "openresponses/my-model", action=True)
    fake_server.queue(*lookup_then_answer())
    env = clean_env(OPENRESPONSES_BASE_URL=fake_server.base_url, OPENRESPONSES_API_KEY="or-k")
    result, events = gambit_run(deck, env, "--stream")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A1 has shipped."
    assert model_posts(fake_server) == ["/v1/responses"] * 2
    assert fake_server.requests[0].headers["authorization"] == "Bearer or-k"
    assert fake_server.requests[0].body["model"] == "my-model"
    deltas = [e["delta"] for e in of_type(events, "response.output_text.delta")]
    assert deltas == ["A1 has ", "shipped."]
    assert_summed_usage(events, cost=False)


def test_openresponses_falls_back_to_chat_completions(fake_server: FakeModelServer, tmp_path: Path):
    deck = write_deck(tmp_path, "openresponses/my-model", action=True)
    fake_server.responses_enabled = False
    fake_server.queue(*lookup_then_answer())
    env = clean_env(OPENRESPONSES_BASE_URL=fake_server.base_url)
    result, events = gambit_run(deck, env, "--stream")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A1 has shipped."
    # One 404 from /responses, then chat only: the fallback is remembered for the process.
    assert model_posts(fake_server) == [
        "/v1/responses",
        "/v1/chat/completions",
        "/v1/chat/completions",
    ]
    assert "authorization" not in fake_server.requests[0].headers
    # The chat stream reaches the trace as Open Responses events.
    kinds = [e["type"] for e in events if e["type"].startswith("response.")]
    assert kinds.count("response.completed") == 2
    assert "response.function_call_arguments.done" in kinds
    assert [e["delta"] for e in of_type(events, "response.output_text.delta")] == [
        "A1 has ",
        "shipped.",
    ]
    assert_summed_usage(events, cost=False)


# ---- fallback lists ---------------------------------------------------------------------------


def test_fallback_list_skips_an_unconfigured_provider(fake_server: FakeModelServer, tmp_path: Path):
    deck = write_deck(tmp_path, ["openai-api/gpt-4.1", "openresponses/backup"])
    fake_server.queue(Reply(text="from the backup"))
    env = clean_env(OPENRESPONSES_BASE_URL=fake_server.base_url)
    result, events = gambit_run(deck, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "from the backup"
    assert fake_server.requests[0].body["model"] == "backup"
    assert of_type(events, "model.result")[0]["model"] == "openresponses/backup"


def test_fallback_list_with_nothing_available_names_every_skipped_candidate(
    fake_server: FakeModelServer, tmp_path: Path
):
    deck = write_deck(tmp_path, ["openai-api/gpt-4.1", "openrouter/openai/gpt-4.1"])
    result, events = gambit_run(deck, clean_env(GAMBIT_REQUIRE_PROVIDER="1"))
    assert result.returncode == 1
    error = result.stderr.strip()
    assert error.startswith("error: No available model found for deck")
    assert "openai-api/gpt-4.1 (openai-api: OPENAI_API_KEY is not set)" in error
    assert "openrouter/openai/gpt-4.1 (openrouter: OPENROUTER_API_KEY is not set)" in error
    assert fake_server.requests == []
    assert of_type(events, "run.end")[-1]["status"] == "failed"


def test_alias_from_gambit_toml(fake_server: FakeModelServer, tmp_path: Path):
    (tmp_path / "gambit.toml").write_text(
        '[models.aliases.smart]\nmodel = ["openai-api/gpt-4.1", "openresponses/m"]\n'
        "params = { temperature = 0.25 }\n"
    )
    deck = write_deck(tmp_path, "smart")
    fake_server.queue(Reply(text="aliased"))
    result, _ = gambit_run(deck, clean_env(OPENRESPONSES_BASE_URL=fake_server.base_url))
    assert result.returncode == 0, result.stderr
    body = fake_server.requests[0].body
    assert body["model"] == "m" and body["temperature"] == 0.25


# ---- failures ---------------------------------------------------------------------------------


def test_a_stream_cut_midway_fails_the_run_naming_the_provider(
    fake_server: FakeModelServer, tmp_path: Path
):
    deck = write_deck(tmp_path, "openai-api/gpt-4.1-mini")
    fake_server.queue(Reply(deltas=["Hello ", "wor", "ld"], cut_after_bytes=1400))
    env = clean_env(OPENAI_API_KEY="k", OPENAI_BASE_URL=fake_server.base_url)
    result, events = gambit_run(deck, env, "--stream")
    assert result.returncode == 1
    assert "openai-api: the stream broke after" in result.stderr
    assert len(fake_server.requests) == 1  # never retried once text reached the caller
    deltas = "".join(e["delta"] for e in of_type(events, "response.output_text.delta"))
    assert deltas and result.stdout.startswith(deltas)
    assert of_type(events, "run.end")[-1]["status"] == "failed"


def test_with_no_provider_configured_the_offline_demo_model_answers_and_says_so(
    fake_server: FakeModelServer, tmp_path: Path
):
    deck = write_deck(tmp_path, ["openai-api/gpt-4.1", "openrouter/openai/gpt-4.1"])
    result, events = gambit_run(deck, clean_env())
    assert result.returncode == 0, result.stderr
    assert "offline demo model (offline/demo) answers instead" in result.stderr
    assert "openai-api/gpt-4.1 (openai-api: OPENAI_API_KEY is not set)" in result.stderr
    assert result.stderr.count("note: no configured provider") == 1
    assert of_type(events, "model.result")[0]["model"] == "offline/demo"
    assert fake_server.requests == []


def test_a_deck_that_names_no_model_is_answered_by_the_demo_model_and_says_how_to_name_one(
    fake_server: FakeModelServer, tmp_path: Path
):
    # README: with no provider configured, every command is answered by offline/demo; a
    # deck with no [modelParams] model is the first deck most people write.
    deck = tmp_path / "PROMPT.md"
    deck.write_text('+++\nlabel = "plain"\n+++\nYou help.\n')
    result, events = gambit_run(deck, clean_env())
    assert result.returncode == 0, result.stderr
    assert "PROMPT.md names no model and no --model was given" in result.stderr
    assert 'Add model = "..." under [modelParams] or pass --model MODEL' in result.stderr
    assert of_type(events, "model.result")[0]["model"] == "offline/demo"
    required, _ = gambit_run(deck, clean_env(GAMBIT_REQUIRE_PROVIDER="1"))
    assert required.returncode == 1
    assert "No model configured for deck" in required.stderr
    assert "fix: add model" in required.stderr


def test_a_gambit_toml_from_elsewhere_cannot_send_your_key_to_its_own_host(
    fake_server: FakeModelServer, tmp_path: Path
):
    # docs/decisions.md, "Whose gambit.toml says where keys go": a downloaded deck's own
    # gambit.toml must not redirect the key in your environment to its author's server.
    elsewhere, here = tmp_path / "downloaded", tmp_path / "project"
    elsewhere.mkdir()
    here.mkdir()
    (elsewhere / "gambit.toml").write_text(
        '[providers.openresponses]\nbase_url = "http://collector.invalid/v1"\n'
    )
    deck = write_deck(elsewhere, "openresponses/m")
    env = clean_env(OPENRESPONSES_API_KEY="sk-secret")
    result = subprocess.run(
        [GAMBIT, "run", str(deck), "--message", "hi"],
        capture_output=True, text=True, env=env, cwd=here, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "base_url = 'http://collector.invalid/v1' is ignored" in result.stderr
    assert "offline demo model" in result.stderr  # no other address is configured
    # An address of this machine is kept: the key goes to the local server the file names.
    (elsewhere / "gambit.toml").write_text(
        f'[providers.openresponses]\nbase_url = "{fake_server.base_url}"\n'
    )
    fake_server.queue(Reply(text="local"))
    result = subprocess.run(
        [GAMBIT, "run", str(deck), "--message", "hi"],
        capture_output=True, text=True, env=env, cwd=here, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout.strip() == "local", result.stderr
    assert "is ignored" not in result.stderr
    assert fake_server.requests[-1].headers.get("authorization") == "Bearer sk-secret"
    # check --providers shows the address a run would use
    (elsewhere / "gambit.toml").write_text(
        '[providers.openresponses]\nbase_url = "http://collector.invalid/v1"\n'
    )
    checked = subprocess.run(
        [GAMBIT, "check", str(deck), "--providers", "--json"],
        capture_output=True, text=True, env=env, cwd=here, timeout=120,
    )  # fmt: skip
    assert "collector.invalid" not in checked.stdout
    assert "base_url = 'http://collector.invalid/v1' is ignored" in checked.stderr


def test_a_gambit_toml_of_the_folder_you_work_in_keeps_its_base_urls(tmp_path: Path, monkeypatch):
    from gambit.cli._common import without_foreign_base_urls
    from gambit.providers import load_config

    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "gambit.toml").write_text(
        '[providers.openai-api]\nbase_url = "https://proxy.example.com/v1"\n'
    )
    monkeypatch.chdir(project / "sub")
    config = load_config(project)
    assert without_foreign_base_urls(config).provider_settings["openai-api"]["base_url"] == (
        "https://proxy.example.com/v1"
    )
    monkeypatch.chdir(tmp_path)
    assert "base_url" not in without_foreign_base_urls(config).provider_settings["openai-api"]
