"""Provider plugins: third-party distributions that add a model prefix through the
`gambit.providers` entry-point group.

Each test writes real distributions into `tmp_path` (a package plus a `*.dist-info` folder with
`METADATA` and `entry_points.txt`, what pip installs) and puts that folder on the path: the
CLI tests run the real `gambit` console script in a subprocess with `PYTHONPATH`, the others
load the entry points in this process against a private copy of the registry.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from importlib.metadata import EntryPoint, distributions
from pathlib import Path

import pytest

from gambit.core.provider import ProviderError
from gambit.providers import (
    ProviderRouter,
    ProviderSpec,
    _registry,
    all_providers,
    describe_providers,
)
from gambit.providers._plugins import load_provider_plugins
from tests.providers.helpers import request

GAMBIT = str(Path(sys.executable).parent / "gambit")

# A complete plugin: a provider answering `<model>: <LAST USER MESSAGE>` and its register
# function. `{marker}` notes that the module was imported (to prove lazy loading).
UPPER = """
from pathlib import Path

from gambit.core.provider import (
    CreateResponseResponse, ProviderResponse, item_text, message_item, new_id,
)
from gambit.providers import ProviderSpec

Path(__file__).with_name("imported").touch()


class UpperProvider:
    name = "{name}"
    offline = True

    def __init__(self, env, settings):
        self.greeting = settings.get("greeting", "")

    async def responses(self, request, *, state=None, deck_path=None, on_stream_event=None):
        said = [item_text(i) for i in request.input if getattr(i, "role", None) == "user"]
        text = f"{{self.greeting}}{{request.model}}: {{said[-1].upper() if said else ''}}"
        response = CreateResponseResponse(
            id=new_id("resp"), model=request.model, status="completed",
            output=[message_item("assistant", text)],
        )
        return ProviderResponse(response=response)


def register(register):
    register(ProviderSpec(
        name="{name}",
        factory=lambda env, *, settings, **_: UpperProvider(env, settings),
        description="answers in capitals",
        offline=True,
    ))
"""


def write_distribution(
    site: Path, dist: str, version: str, entry_points: dict[str, str], modules: dict[str, str]
) -> None:
    """Install by hand what pip would: the modules, and `<dist>-<version>.dist-info/` with
    METADATA and entry_points.txt (group `gambit.providers`)."""
    for name, source in modules.items():
        package = site / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[gambit.providers]\n{lines}")


def upper_plugin(site: Path, module: str = "gambit_upper", name: str = "upper") -> None:
    write_distribution(
        site,
        "gambit-upper",
        "0.1",
        {name: f"{module}:register"},
        {module: UPPER.format(name=name)},
    )


def broken_plugin(site: Path) -> None:
    write_distribution(
        site, "gambit-broken", "2.0", {"broken": "gambit_broken_missing:register"}, {}
    )


def gambit(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OPENROUTER_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env["GAMBIT_REQUIRE_PROVIDER"] = "1"
    return subprocess.run(
        [GAMBIT, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def write_deck(folder: Path) -> Path:
    deck = folder / "PROMPT.md"
    deck.write_text('+++\nlabel = "bot"\nmodelParams.model = "offline/echo"\n+++\nYou answer.\n')
    return deck


# ---- through the CLI, in a subprocess ---------------------------------------------------------


def test_gambit_run_routes_a_plugin_prefix_to_the_plugin(tmp_path: Path) -> None:
    site = tmp_path / "site"
    upper_plugin(site)
    deck = write_deck(tmp_path)
    (tmp_path / "gambit.toml").write_text('[providers.upper]\ngreeting = "> "\n')

    done = gambit(
        site, "run", str(deck), "--message", "hello there", "--model-force", "upper/x", cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "> upper/x: HELLO THERE"  # its gambit.toml settings too
    assert "warning" not in done.stderr


def test_plugins_load_only_for_a_prefix_that_is_not_built_in(tmp_path: Path) -> None:
    site = tmp_path / "site"
    upper_plugin(site)
    deck = write_deck(tmp_path)
    marker = site / "gambit_upper" / "imported"

    help_ = gambit(site, "--help", cwd=tmp_path)
    assert help_.returncode == 0 and "run" in help_.stdout
    assert not marker.exists()  # `gambit --help` never looks at plugins

    builtin = gambit(site, "run", str(deck), "--message", "hi", cwd=tmp_path)
    assert builtin.returncode == 0, builtin.stderr
    assert builtin.stdout.strip() == "You said: hi"
    assert not marker.exists()  # offline/echo is built in: plugins were not loaded

    gambit(site, "run", str(deck), "--message", "hi", "--model-force", "upper/x", cwd=tmp_path)
    assert marker.exists()


def test_a_broken_plugin_is_one_warning_and_the_others_still_work(tmp_path: Path) -> None:
    site = tmp_path / "site"
    upper_plugin(site)
    broken_plugin(site)
    deck = write_deck(tmp_path)

    done = gambit(
        site, "run", str(deck), "--message", "hi", "--model-force", "upper/x", cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "upper/x: HI"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: provider plugin 'broken' from gambit-broken 2.0 is skipped: "
        "ModuleNotFoundError: No module named 'gambit_broken_missing'"
    ]
    assert "Traceback" not in done.stderr


# ---- in this process, against a private copy of the registry ----------------------------------


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, ProviderSpec]:
    """The registry as if no plugin had been loaded yet in this process."""
    builtin = _registry.BUILTIN_PROVIDERS
    providers = {name: spec for name, spec in _registry.PROVIDERS.items() if name in builtin}
    monkeypatch.setattr(_registry, "PROVIDERS", providers)
    monkeypatch.setattr(_registry, "_plugins_loaded", False)
    return providers


def entry_points_in(site: Path) -> list[EntryPoint]:
    return [
        ep
        for dist in distributions(path=[str(site)])
        for ep in dist.entry_points
        if ep.group == "gambit.providers"
    ]


async def test_the_router_serves_a_plugin_prefix_and_lists_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: dict[str, ProviderSpec]
) -> None:
    site = tmp_path / "site"
    upper_plugin(site, module="gambit_upper_router", name="shout")
    monkeypatch.syspath_prepend(str(site))
    assert "shout" not in registry  # nothing is loaded before it is needed

    router = ProviderRouter(env={})
    resolved = router.resolve_model("shout/x", params=None, deck_path=None)

    assert resolved.model == "shout/x"
    result = await router.responses(request(model="shout/x", text="quiet"))
    assert result.response.output[0].content[0].text == "shout/x: QUIET"
    spec = all_providers()["shout"]
    assert spec.plugin == "gambit-upper 0.1" and spec.description == "answers in capitals"
    [entry] = describe_providers(["shout/x"], env={})
    assert (entry["provider"], entry["providerModel"], entry["configured"]) == ("shout", "x", True)


async def test_a_plugin_whose_factory_fails_names_the_plugin(
    monkeypatch: pytest.MonkeyPatch, registry: dict[str, ProviderSpec]
) -> None:
    def factory(env, **_):
        raise RuntimeError("no token file")

    registry["flaky"] = ProviderSpec(name="flaky", factory=factory, plugin="gambit-flaky 1.0")
    monkeypatch.setattr(_registry, "_plugins_loaded", True)
    with pytest.raises(ProviderError) as info:
        await ProviderRouter(env={}).responses(request(model="flaky/x"))
    assert str(info.value) == (
        "flaky: the provider plugin gambit-flaky 1.0 failed to build the provider: "
        "RuntimeError: no token file"
    )


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("def register(register):\n    raise ValueError('bad config')\n", "ValueError: bad config"),
        (
            "def register(register):\n    register('openai')\n",
            "register() takes a gambit.providers.ProviderSpec, got str",
        ),
        ("register = 42\n", "gambit_bad_{n}:register is 42, not a function register(register)"),
        (
            "from gambit.providers import ProviderSpec\n"
            "def register(register):\n"
            "    register(ProviderSpec(name='openrouter', factory=print))\n",
            "'openrouter' is a built-in provider and cannot be replaced",
        ),
        (
            "from gambit.providers import ProviderSpec\n"
            "def register(register):\n"
            "    register(ProviderSpec(name='a/b', factory=print))\n",
            "'a/b' is not a provider name (a prefix without '/')",
        ),
        ("raise SystemExit(3)\n", "SystemExit: 3"),
    ],
)
def test_each_broken_plugin_is_one_warning_naming_its_distribution(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    source: str,
    error: str,
) -> None:
    n = uuid.uuid4().hex[:8]  # a module name of its own per case (modules stay imported)
    site = tmp_path / "site"
    write_distribution(
        site, "gambit-bad", "0.3", {"bad": f"gambit_bad_{n}:register"}, {f"gambit_bad_{n}": source}
    )
    upper_plugin(site, module=f"gambit_upper_{n}", name="good")
    monkeypatch.syspath_prepend(str(site))
    registry = {name: _registry.PROVIDERS[name] for name in _registry.BUILTIN_PROVIDERS}

    with caplog.at_level("WARNING", logger="gambit.providers"):
        warnings = load_provider_plugins(
            registry, builtin=_registry.BUILTIN_PROVIDERS, plugins=entry_points_in(site)
        )

    expected = f"warning: provider plugin 'bad' from gambit-bad 0.3 is skipped: {error.format(n=n)}"
    assert warnings == [expected]
    assert [r.getMessage() for r in caplog.records] == [expected]
    assert "bad" not in registry and registry["good"].plugin == "gambit-upper 0.1"


def test_a_prefix_taken_by_another_plugin_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    upper_plugin(site, module="gambit_upper_first", name="dup")
    write_distribution(
        site,
        "gambit-zz-copy",
        "1.0",
        {"dup": "gambit_upper_second:register"},
        {"gambit_upper_second": UPPER.format(name="dup")},
    )
    monkeypatch.syspath_prepend(str(site))
    registry: dict[str, ProviderSpec] = {}

    warnings = load_provider_plugins(registry, plugins=entry_points_in(site))

    assert registry["dup"].plugin == "gambit-upper 0.1"  # distributions load in name order
    assert warnings == [
        "warning: provider plugin 'dup' from gambit-zz-copy 1.0 is skipped: "
        "provider 'dup' is already registered by gambit-upper 0.1"
    ]
