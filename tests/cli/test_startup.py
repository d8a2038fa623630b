"""The console script's start-up: the collector paused while a command loads, then back on.

How long start-up takes is measured by bench/bench_cli.py, not asserted here; these tests
check what the speed-up must not change.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

GAMBIT = str(Path(sys.executable).parent / "gambit")

# A compute deck that reports, from inside the `gambit` process, the collector's state.
PROBE = """
import gc
import sys
import types

import gambit


def run(ctx):
    return {
        "collecting": gc.isenabled(),
        "frozen": gc.get_freeze_count(),
        "unused_loaded": sorted(
            m for m in (
                "gambit.core._grading",
                "gambit.core._verify",
                "gambit.core._calibration",
                "gambit.core._statistics",
                "statistics",
                # the statistics libraries (docs/decisions.md, "Statistics") never load for a run
                "numpy",
                "scipy",
                "krippendorff",
            )
            if m in sys.modules
        ),
        # modules of the engine and its HTTP stack still seen by the collector's passes
        "unfrozen": sorted(
            o.__name__
            for o in gc.get_objects()
            if isinstance(o, types.ModuleType)
            and o.__name__.split(".")[0] in ("gambit", "httpx", "httpcore", "h11", "pydantic")
        ),
    }


deck = gambit.define_deck(run=run)
"""


def _probe(tmp_path: Path) -> Path:
    deck = tmp_path / "probe.py"
    deck.write_text(textwrap.dedent(PROBE), encoding="utf-8")
    return deck


def test_deck_code_runs_with_the_collector_on_and_start_up_frozen(tmp_path):
    done = subprocess.run(
        [GAMBIT, "run", str(_probe(tmp_path))], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["collecting"] is True
    # what importing the engine allocated is frozen: later passes (and the one at exit) skip it
    assert report["frozen"] > 10_000
    assert report["unused_loaded"] == []
    # the providers and the HTTP stack a run-like command uses are loaded before the freeze
    assert report["unfrozen"] == []


def test_invoking_the_click_group_in_process_leaves_the_collector_alone(tmp_path):
    # Tests and other hosts call `cli`, not the console script: nothing of theirs is frozen.
    code = textwrap.dedent(
        f"""
        import gc, json
        from click.testing import CliRunner
        from gambit.cli.main import cli
        result = CliRunner().invoke(cli, ["run", {str(_probe(tmp_path))!r}])
        print(json.dumps([result.exit_code, gc.isenabled(), gc.get_freeze_count()]))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [0, True, 0]


def test_the_collector_is_back_on_after_help_and_usage_errors():
    code = textwrap.dedent(
        """
        import gc, sys
        from gambit.cli.main import main
        for argv in (["gambit", "--help"], ["gambit", "nosuchcommand"]):
            sys.argv = argv
            try:
                main()
            except SystemExit:
                pass
            assert gc.isenabled(), argv
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_every_dataclass_has_a_docstring() -> None:
    # Documentation first, but also start-up: `dataclasses` builds a missing docstring from
    # inspect.signature when the module is imported (docs/decisions.md, "Start-up").
    import ast

    missing = []
    for path in sorted((Path(__file__).parents[2] / "gambit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or ast.get_docstring(node) is not None:
                continue
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Name) and target.id == "dataclass":
                    missing.append(f"{path.name}:{node.lineno} {node.name}")
    assert missing == []


def _imports_of_a_run(tmp_path: Path, env: dict[str, str], *args: str) -> str:
    """The modules `gambit run ...` imported (python -X importtime writes them to stderr)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", GAMBIT, "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


def test_a_one_turn_run_does_not_import_the_tokenizer(tmp_path, fake_server):
    """Counting starts from an estimate; the tokenizer (tiktoken) loads only for a
    conversation near its compaction limit (docs/decisions.md, "Token counting")."""
    import os

    deck = tmp_path / "d" / "PROMPT.md"
    deck.parent.mkdir()
    deck.write_text(
        '+++\n[modelParams]\nmodel = "openresponses/gpt-4o"\ncontextWindow = 4000\n+++\nHi.\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(fake_server.env())
    imported = _imports_of_a_run(tmp_path, env, str(deck), "--message", "hello")
    assert "gambit.core._tokens" in imported  # the estimate is there...
    assert " tiktoken" not in imported  # ...the tokenizer is not
    # A long conversation (past half of 80% of the window) is counted with the tokenizer:
    # the check above can see it.
    state = tmp_path / "state.json"
    words = " ".join(f"word{i}" for i in range(900))
    state.write_text(
        json.dumps({"runId": "r", "messages": [{"role": "user", "content": words}]}),
    )
    imported = _imports_of_a_run(
        tmp_path, env, str(deck), "--message", "hello", "--state", str(state)
    )
    assert " tiktoken" in imported


def test_a_one_turn_run_does_not_import_opentelemetry_unless_an_export_is_configured(
    tmp_path, fake_server
):
    """An export that is not configured costs nothing: neither the SDK nor the bridge's
    span code loads (docs/observability.md). Configured, both do: the check can see them."""
    import os

    deck = tmp_path / "d" / "PROMPT.md"
    deck.parent.mkdir()
    deck.write_text('+++\n[modelParams]\nmodel = "openresponses/gpt-4o"\n+++\nHi.\n')
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("OTEL_")
    }
    env.update(fake_server.env())
    imported = _imports_of_a_run(tmp_path, env, str(deck), "--message", "hello")
    assert " opentelemetry" not in imported
    assert "gambit.otel.live" not in imported and "gambit.otel.spans" not in imported
    # Configured (a collector that is not there: the run must not mind), they load.
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    imported = _imports_of_a_run(tmp_path, env, str(deck), "--message", "hello")
    assert " opentelemetry.sdk.trace" in imported and "gambit.otel.live" in imported
