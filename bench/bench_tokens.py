"""Token counting and compaction: what they cost per model request, and how far the counts are
from the reference (docs/decisions.md, "Token counting").

1. Per request, on a resumed conversation of N turns, answered instantly (a zero-latency
   in-process provider), the run_deck time per call: without a known window (nothing is
   counted), with a window far away (the estimate only), with one near (the o200k_base
   tokenizer), and the `openai-api/` input-token endpoint's round trip (to a local fake).
2. One compaction, the summary request answered instantly: its cost outside the model.
3. The estimate's and the tokenizer's error on tests/core/fixtures/token_corpus.json; with
   `--recordings DIR`, also against the usage OpenAI reported in recorded responses (VCR
   cassettes: request body + response usage), which this repository does not ship.

    .venv/bin/python bench/bench_tokens.py [--turns 50 200] [--calls 30] [--recordings DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gambit.core import load_deck_tree, new_state, run_deck
from gambit.core._openresponses import (
    CreateResponseRequest,
    CreateResponseResponse,
    ResponseUsage,
    message_item,
)
from gambit.core._provider import BaseProvider, ProviderCall, ProviderResponse
from gambit.core._tokens import encoding_for_model, request_token_count

CORPUS = (
    Path(__file__).resolve().parent.parent / "tests" / "core" / "fixtures" / "token_corpus.json"
)


class Instant(BaseProvider):
    """Answers every request at once; a compaction's summary request gets a summary."""

    name = "instant"

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        last = call.request.input[-1]
        text = "A summary." if "detailed summary" in str(last) else "Noted, thank you."
        usage = ResponseUsage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
        return ProviderResponse(
            CreateResponseResponse(
                id="r", status="completed", output=[message_item("assistant", text)], usage=usage
            )
        )


def conversation(turns: int) -> Any:
    state = new_state("responses")
    items = [message_item("system", "You are a patient assistant.")]
    for turn in range(turns):
        items.append(message_item("user", f"Turn {turn}: here is a sentence of some length. " * 3))
        items.append(message_item("assistant", "I noted it, along with the rest. " * 3))
    return state.model_copy(update={"items": items})


def deck(folder: Path, window: int | None) -> Any:
    path = folder / f"d{window}" / "PROMPT.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = f"contextWindow = {window}\n" if window else ""
    path.write_text(f'+++\n[modelParams]\nmodel = "gpt-4o"\n{extra}+++\nHi.\n')
    return load_deck_tree(path)


async def per_call(tree: Any, state: Any, calls: int) -> float:
    provider = Instant()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await run_deck(tree, provider=provider, message="one more", state=state)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def request_costs(turns_list: list[int], calls: int) -> None:
    print("Per request, median ms of a resumed run_deck call (zero-latency model):")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for turns in turns_list:
            state = conversation(turns)
            request = CreateResponseRequest(model="gpt-4o", input=list(state.items or []))
            tokens = request_token_count(request).tokens
            base = await per_call(deck(folder, None), state, calls)
            estimate = await per_call(deck(folder, tokens * 10), state, calls)
            # the window just above the conversation: counted with the tokenizer, no compaction
            precise = await per_call(deck(folder, int(tokens * 1.4)), state, calls)
            print(
                f"  {turns:4d} turns ({tokens} tokens): no window {base:.2f}  "
                f"estimate +{estimate - base:.2f}  tokenizer +{precise - base:.2f}"
            )
            tree = deck(folder, int(tokens * 1.05))  # past 80%: compacts on the first call
            provider = Instant()
            started = time.perf_counter()
            await run_deck(tree, provider=provider, message="one more", state=state)
            once = (time.perf_counter() - started) * 1000
            print(f"        one compaction (summary answered instantly): {once:.2f} ms")
    await api_round_trip(calls)


async def api_round_trip(calls: int) -> None:
    from gambit.providers.openai_api import OpenAIResponsesProvider
    from tests.support.fake_model_server import FakeModelServer

    with FakeModelServer() as server:
        provider = OpenAIResponsesProvider(api_key="k", base_url=server.base_url)
        request = CreateResponseRequest(model="gpt-4o", input=list(conversation(50).items or []))
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            await provider.count_input_tokens(request)
            times.append(time.perf_counter() - started)
        await provider.aclose()
    print(
        f"  openai-api input-token endpoint (local fake, 50 turns): "
        f"{statistics.median(times) * 1000:.2f} ms per count"
    )


def errors(pairs: list[tuple[CreateResponseRequest, int]], precise: bool) -> dict[str, float]:
    rel = [(request_token_count(r, precise=precise).tokens - ref) / ref for r, ref in pairs]
    return {
        "n": len(rel),
        "mean_abs": statistics.mean(abs(e) for e in rel),
        "median_abs": statistics.median(abs(e) for e in rel),
        "min": min(rel),
        "max": max(rel),
    }


def show(label: str, stats: dict[str, float]) -> None:
    print(
        f"  {label}: n={stats['n']:.0f}  mean |error| {stats['mean_abs']:.1%}  median "
        f"{stats['median_abs']:.1%}  range {stats['min']:+.1%} .. {stats['max']:+.1%}"
    )


sources: list[str] = []


def recorded_pairs(folder: Path) -> list[tuple[CreateResponseRequest, int]]:
    """(request, reported input tokens) from OpenAI Responses cassettes: text and function
    tools only, no previous_response_id, gpt-4o/4.1/5 family models."""
    import yaml

    pairs = []
    sources.clear()
    for path in sorted(folder.rglob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text("utf-8"))
        except Exception:
            continue
        for exchange in (data or {}).get("interactions") or [] if isinstance(data, dict) else []:
            request, response = exchange.get("request") or {}, exchange.get("response") or {}
            body, answer = request.get("parsed_body"), response.get("parsed_body")
            if not str(request.get("uri", "")).endswith("/v1/responses"):
                continue
            if not isinstance(body, dict) or not isinstance(answer, dict):
                continue
            reported = (answer.get("usage") or {}).get("input_tokens")
            model = str(body.get("model", ""))
            if (
                not reported
                or body.get("previous_response_id")
                or body.get("conversation")
                or encoding_for_model(model) is None
            ):
                continue
            if any(t.get("type") != "function" for t in body.get("tools") or []):
                continue
            items = body.get("input")
            items = [{"role": "user", "content": items}] if isinstance(items, str) else items
            clean = []
            for item in items or []:
                item = {**item, "role": "system"} if item.get("role") == "developer" else item
                content = item.get("content")
                if item.get("type") not in (
                    None,
                    "message",
                    "function_call",
                    "function_call_output",
                ):
                    break  # reasoning (encrypted), compaction items: not counted as text
                if isinstance(content, list) and any(
                    part.get("type") not in ("input_text", "output_text") for part in content
                ):
                    break
                clean.append(item)
            else:
                fmt = (body.get("text") or {}).get("format")
                try:
                    parsed = CreateResponseRequest.model_validate(
                        {
                            "model": model,
                            "input": clean,
                            "tools": body.get("tools") or None,
                            "instructions": body.get("instructions"),
                            "text": {"format": fmt}
                            if fmt and fmt.get("type") == "json_schema"
                            else None,
                        }
                    )
                except Exception:
                    continue
                pairs.append((parsed, int(reported)))
                sources.append(path.name)
    return pairs


def count_errors(recordings: Path | None) -> None:
    corpus = json.loads(CORPUS.read_text("utf-8"))
    pairs = [
        (CreateResponseRequest.model_validate(e["request"]), e["referenceTokens"]) for e in corpus
    ]
    print("Count error against the corpus reference (o200k_base + fitted framing):")
    show("estimate ", errors(pairs, precise=False))
    if recordings is not None:
        real = recorded_pairs(recordings)
        print(f"Count error against usage OpenAI reported ({recordings}):")
        show("tokenizer", errors(real, precise=True))
        show("estimate ", errors(real, precise=False))
        worst = sorted(
            zip(real, sources, strict=True),
            key=lambda x: -abs(request_token_count(x[0][0]).tokens - x[0][1]) / x[0][1],
        )[:5]
        for (request, reported), name in worst:
            print(
                f"    worst: {name} reported {reported}, counted {request_token_count(request).tokens}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--recordings", type=Path, default=None)
    args = parser.parse_args()
    asyncio.run(request_costs(args.turns, args.calls))
    count_errors(args.recordings)


if __name__ == "__main__":
    main()
