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

from gambit.providers import ProviderRouter, all_providers, find_config

OFFLINE_MODEL = "offline/demo"


def provider_env() -> Mapping[str, str]:
    return os.environ


def configured_providers(
    env: Mapping[str, str] | None = None, workspace_root: str | Path | None = None
) -> list[dict[str, Any]]:
    """Every known provider (plugins included) with `configured` and, when not, the reason,
    as the workspace's gambit.toml and the environment configure it. Never a key's value."""
    from gambit.providers import ConfigError, load_config, shown_url

    env = provider_env() if env is None else env
    try:
        tables = load_config(workspace_root).provider_settings if workspace_root else {}
    except ConfigError:
        tables = {}  # the banner says nothing of a broken file; runs say why they fail
    out = []
    for spec in all_providers().values():
        settings = tables.get(spec.name) or {}
        reason = spec.unconfigured_reason(env, settings)
        from_env = bool(spec.base_url_env and env.get(spec.base_url_env))
        # A provider that needs nothing set (Ollama) is "configured" only by its default
        # address; say so, since nothing checked that a server answers there.
        assumed = (
            reason is None
            and not spec.offline
            and spec.base_url_env is not None
            and not from_env
            and not settings.get("base_url")
            and spec.default_base_url is not None
        )
        # An address from gambit.toml is where this provider's key goes: said, since the
        # file may have come with the decks (docs/decisions.md, "Whose gambit.toml says
        # where keys go").
        from_file = (
            shown_url(str(settings["base_url"]))
            if settings.get("base_url") and not from_env and not spec.offline
            else None
        )
        out.append(
            {
                "name": spec.name,
                "description": spec.description,
                "configured": reason is None,
                "reason": reason,
                "offline": spec.offline,
                "assumedBaseUrl": spec.default_base_url if assumed else None,
                "configBaseUrl": from_file,
            }
        )
    return out


def banner_lines(
    env: Mapping[str, str] | None = None, workspace_root: str | Path | None = None
) -> list[str]:
    lines = []
    for p in configured_providers(env, workspace_root):
        if p["configured"]:
            note = " (offline, no network)" if p["offline"] else ""
            if p["assumedBaseUrl"]:
                note = f" (default address {p['assumedBaseUrl']}, not checked)"
            if p["configBaseUrl"]:
                note = f" (address {p['configBaseUrl']} from the workspace's gambit.toml: its key is sent there)"
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
    # No configured provider for the deck's models, or a deck that names none: the offline
    # demo model answers, as in the CLI (docs/decisions.md).
    return OFFLINE_MODEL, OFFLINE_MODEL, True


def make_router(workspace_root: str | Path) -> ProviderRouter:
    return ProviderRouter.from_env(provider_env(), start=workspace_root)


class SharedRouters:
    """The provider routers of one run loop, shared by the runs it executes.

    A router built per run opened a new HTTP client per turn: a new connection and, for an
    https provider, a CA bundle load and a TLS handshake before the first byte. Shared, the
    runs of a workspace reuse one pool of connections, as the runs of a `gambit verify` batch
    do. Each workspace root has one current router, for its `gambit.toml` (path and
    modification time) and environment: when either changes, the next run gets a new router
    and the old one is closed once the last run using it has released it. Use it only on the
    loop it belongs to.
    """

    def __init__(self) -> None:
        self._current: dict[str, tuple[tuple[Any, ...], ProviderRouter]] = {}
        self._uses: dict[int, int] = {}  # id(router) -> runs using it
        self._retired: list[ProviderRouter] = []

    @staticmethod
    def _key(workspace_root: str) -> tuple[Any, ...]:
        config = find_config(workspace_root)
        stamp: tuple[str, int | None] | None = None
        if config is not None:
            try:
                stamp = (str(config), config.stat().st_mtime_ns)
            except OSError:
                stamp = (str(config), None)
        return (stamp, hash(frozenset(provider_env().items())))

    async def acquire(self, workspace_root: str | Path) -> ProviderRouter:
        """The router for a run in `workspace_root`; give it back with `release`."""
        root = str(workspace_root)
        key = self._key(root)
        current = self._current.get(root)
        if current is None or current[0] != key:
            if current is not None:
                self._retired.append(current[1])
            current = self._current[root] = (key, make_router(root))
        router = current[1]
        self._uses[id(router)] = self._uses.get(id(router), 0) + 1
        await self._close_idle()
        return router

    async def release(self, router: ProviderRouter) -> None:
        """A run is done with `router`: a retired router no run uses any more is closed."""
        self._uses[id(router)] = self._uses.get(id(router), 1) - 1
        await self._close_idle()

    async def _close_idle(self) -> None:
        idle = [r for r in self._retired if self._uses.get(id(r), 0) <= 0]
        self._retired = [r for r in self._retired if r not in idle]
        for old in idle:
            self._uses.pop(id(old), None)
            await _close(old)

    async def aclose(self) -> None:
        routers = [router for _, router in self._current.values()] + self._retired
        self._current, self._uses, self._retired = {}, {}, []
        for router in routers:
            await _close(router)


async def _close(router: ProviderRouter) -> None:
    try:
        await router.aclose()
    except Exception:  # a client that fails to close must not stop a run or the shutdown
        pass
