"""Third-party providers, found through the `gambit.providers` entry-point group.

A distribution that wants to add a model prefix declares an entry point in that group whose
object is a function taking one argument, `register`, and calling `register(ProviderSpec(...))`
once per provider it adds (the way `llm` plugins register models):

```toml
[project.entry-points."gambit.providers"]
echo-upper = "gambit_echo_upper:register"
```

The registry (`_registry.load_plugins`) calls `load_provider_plugins` once per process, the
first time a provider name is asked for that is not built in, or when all providers are
listed. Loading a plugin can fail in many ways (its module does not import, the function
raises, it registers something that is not a `ProviderSpec`, or a name that is taken); each
failing plugin is skipped with one warning that names the entry point, its distribution and
the error, and nothing is raised: a broken plugin must never stop a run that does not use it.
A plugin's providers are added all together or not at all.

See docs/providers.md, "Writing a provider plugin".
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, MutableMapping
from dataclasses import replace
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ._registry import ENTRY_POINT_GROUP, ProviderSpec

__all__ = ["ENTRY_POINT_GROUP", "load_provider_plugins"]

log = logging.getLogger("gambit.providers")


class PluginError(Exception):
    """What a plugin did wrong (reported in its warning, never raised to the caller)."""


def _distribution(entry_point: EntryPoint) -> str:
    """`<distribution name> <version>`, as the plugin's warnings and `ProviderSpec.plugin`
    name it."""
    dist = entry_point.dist
    if dist is None:
        return "an unknown distribution"
    try:  # metadata without Name or Version (a hand-made dist-info) must not stop the run
        return f"{dist.name or 'an unnamed distribution'} {dist.version}"
    except Exception:
        return "a distribution without valid metadata"


def _collect(entry_point: EntryPoint) -> list[ProviderSpec]:
    """Load one entry point and call its register function; the specs it registered."""
    hook: Any = entry_point.load()
    if not callable(hook):
        raise PluginError(f"{entry_point.value} is {hook!r:.60}, not a function register(register)")
    specs: list[ProviderSpec] = []

    def register(spec: ProviderSpec) -> None:
        if not isinstance(spec, ProviderSpec):
            raise PluginError(
                f"register() takes a gambit.providers.ProviderSpec, got {type(spec).__name__}"
            )
        specs.append(spec)

    hook(register)
    return specs


def _check_names(
    specs: list[ProviderSpec],
    registry: MutableMapping[str, ProviderSpec],
    builtin: Collection[str],
) -> None:
    seen: set[str] = set()
    for spec in specs:
        name = spec.name
        if not isinstance(name, str) or not name or "/" in name or name != name.strip():
            raise PluginError(f"{name!r} is not a provider name (a prefix without '/')")
        if not callable(spec.factory):
            raise PluginError(f"the factory of provider {name!r} is not callable")
        if name in builtin:
            raise PluginError(f"{name!r} is a built-in provider and cannot be replaced")
        if name in registry:
            other = registry[name].plugin or "another plugin"
            raise PluginError(f"provider {name!r} is already registered by {other}")
        if name in seen:
            raise PluginError(f"provider {name!r} is registered twice")
        seen.add(name)


def load_provider_plugins(
    registry: MutableMapping[str, ProviderSpec],
    *,
    builtin: Collection[str] = (),
    plugins: Iterable[EntryPoint] | None = None,
) -> list[str]:
    """Add the providers of every plugin (the `gambit.providers` entry points, or `plugins`)
    to `registry`; return the warnings, each also logged once. Never raises."""
    warnings: list[str] = []
    try:
        found = list(entry_points(group=ENTRY_POINT_GROUP) if plugins is None else plugins)
    except Exception as exc:  # a corrupt installation must not stop the run
        message = f"warning: provider plugins could not be listed: {type(exc).__name__}: {exc}"
        log.warning(message)
        return [message]
    for entry_point in sorted(found, key=lambda ep: (_distribution(ep), ep.name)):
        label = _distribution(entry_point)
        try:
            specs = _collect(entry_point)
            _check_names(specs, registry, builtin)
        except (Exception, SystemExit) as exc:
            detail = str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
            message = (
                f"warning: provider plugin {entry_point.name!r} from {label} is skipped: {detail}"
            )
            log.warning(message)
            warnings.append(message)
            continue
        for spec in specs:
            registry[spec.name] = replace(spec, plugin=label)
    return warnings
