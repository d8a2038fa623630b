"""Which providers are configured, and which model a session runs with.

A session uses its model override when set; otherwise the deck's first model when that
model's provider is configured; otherwise the offline demo model `offline/echo`, labelled
offline, so the bundled examples work with no API key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gambit.providers import ProviderRouter, all_providers

OFFLINE_MODEL = "offline/demo"


def provider_env() -> Mapping[str, str]:
    return os.environ


def configured_providers(env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every known provider (plugins included) with `configured` and, when not, the reason.
    Never the values."""
    env = provider_env() if env is None else env
    out = []
    for spec in all_providers().values():
        reason = spec.unconfigured_reason(env)
        # A provider that needs nothing set (Ollama) is "configured" only by its default
        # address; say so, since nothing checked that a server answers there.
        assumed = (
            reason is None
            and not spec.offline
            and spec.base_url_env is not None
            and not env.get(spec.base_url_env)
            and spec.default_base_url is not None
        )
        out.append(
            {
                "name": spec.name,
                "description": spec.description,
                "configured": reason is None,
                "reason": reason,
                "offline": spec.offline,
                "assumedBaseUrl": spec.default_base_url if assumed else None,
            }
        )
    return out


def banner_lines(env: Mapping[str, str] | None = None) -> list[str]:
    lines = []
    for p in configured_providers(env):
        if p["configured"]:
            note = " (offline, no network)" if p["offline"] else ""
            if p["assumedBaseUrl"]:
                note = f" (default address {p['assumedBaseUrl']}, not checked)"
            lines.append(f"  [x] {p['name']}{note}")
        else:
            lines.append(f"  [ ] {p['name']}: {p['reason']}")
    return lines


def effective_model(override: str, deck_models: list[str], router: ProviderRouter):
    """(model override to pass to the engine or None, the model label, offline?).

    Routing, aliases and the default provider are the router's (gambit.toml), never
    re-derived here.
    """
    if override:
        return override, override, router.route(override).provider == "offline"
    candidates, _, _ = router.expand(deck_models) if deck_models else ([], {}, False)
    for model in candidates:
        if router.unavailable_reason(model, probe=False) is None:
            return None, model, router.route(model).provider == "offline"
    if deck_models:
        return OFFLINE_MODEL, OFFLINE_MODEL, True
    return None, "", False


def make_router(workspace_root: str | Path) -> ProviderRouter:
    return ProviderRouter.from_env(provider_env(), start=workspace_root)
