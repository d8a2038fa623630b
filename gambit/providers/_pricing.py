"""Per-call cost from a pricing table (USD per 1M tokens), reported as `usage.costUsd`.

Defaults cover common OpenAI models (list prices at the time of writing; check them). A
`gambit.toml` overrides or extends them:

    [pricing."openai-api/gpt-4.1"]      # or [pricing."gpt-4.1"]
    input = 2.0
    cached_input = 0.5
    output = 8.0

Cost = (input tokens - cached tokens) x input + cached tokens x cached_input (input when
unset) + output tokens x output, divided by 1,000,000. Reasoning tokens are part of the
output tokens and are not counted twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gambit.core.provider import ResponseUsage

__all__ = ["DEFAULT_OPENAI_PRICING", "ModelPricing", "apply_cost", "lookup_pricing"]


@dataclass(frozen=True)
class ModelPricing:
    """USD per 1M tokens."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, usage: ResponseUsage) -> float:
        cached = min(usage.cached_tokens or 0, usage.prompt_tokens)
        regular = usage.prompt_tokens - cached
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        total = regular * self.input + cached * cached_rate + usage.completion_tokens * self.output
        return round(total / 1_000_000, 10)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ModelPricing:
        def number(key: str) -> float | None:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"pricing `{key}` must be a number, got {value!r}")
            return float(value)

        inp, out = number("input"), number("output")
        if inp is None or out is None:
            raise ValueError("pricing needs `input` and `output` (USD per 1M tokens)")
        return cls(input=inp, output=out, cached_input=number("cached_input"))


DEFAULT_OPENAI_PRICING: dict[str, ModelPricing] = {
    "gpt-4o": ModelPricing(2.50, 10.00, 1.25),
    "gpt-4o-mini": ModelPricing(0.15, 0.60, 0.075),
    "gpt-4.1": ModelPricing(2.00, 8.00, 0.50),
    "gpt-4.1-mini": ModelPricing(0.40, 1.60, 0.10),
    "gpt-4.1-nano": ModelPricing(0.10, 0.40, 0.025),
    "gpt-5": ModelPricing(1.25, 10.00, 0.125),
    "gpt-5-mini": ModelPricing(0.25, 2.00, 0.025),
    "gpt-5-nano": ModelPricing(0.05, 0.40, 0.005),
    "o3": ModelPricing(2.00, 8.00, 0.50),
    "o3-mini": ModelPricing(1.10, 4.40, 0.55),
    "o4-mini": ModelPricing(1.10, 4.40, 0.275),
}
"""Defaults for `openai-api/` models, by model name; dated snapshots match by prefix."""


def lookup_pricing(table: Mapping[str, ModelPricing], *names: str) -> ModelPricing | None:
    """The entry for the first name found; a dated snapshot (`gpt-4o-2024-08-06`) falls
    back to the longest key it starts with followed by `-`."""
    for name in names:
        if name in table:
            return table[name]
    for name in names:
        best = None
        for key in table:
            if name.startswith(key + "-") and (best is None or len(key) > len(best)):
                best = key
        if best is not None:
            return table[best]
    return None


def apply_cost(usage: ResponseUsage | None, pricing: ModelPricing | None) -> None:
    """Set `usage.costUsd` (an extra field, camelCase like the rest of usage)."""
    if usage is None or pricing is None:
        return
    extra = usage.model_extra if usage.model_extra is not None else {}
    if "costUsd" in extra:  # the provider reported it (OpenRouter)
        return
    # the ignore: costUsd is an extra field (usage models allow extras), unknown to mypy
    usage.costUsd = pricing.cost(usage)  # type: ignore[attr-defined]
