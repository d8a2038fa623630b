"""`gambit verify` beside inspect_ai and promptfoo on the same grading workload, in one run.

The workload (issue 10): 100 scenario runs, each graded once by a conversation grader, at
concurrency 16, against a model with 100 ms latency: 200 model calls (100 answers, 100
grades), so the model-bound limit is 200 x 0.1 s / 16 = 1.25 s. Every tool talks to the same
fake model server on 127.0.0.1 (tests/support/fake_model_server.py), which answers each kind
of request the way that tool expects (a `gambit_respond` call for Gambit's grader,
"GRADE: C" for inspect_ai's model_graded_qa, a JSON verdict for promptfoo's llm-rubric) after
100 ms.

A fourth line, "httpx floor", is no tool: a bare loop of the same 200 requests through httpx
(the HTTP client Gambit uses) at the same concurrency, with no Gambit code at all. Its
span/limit is what the machine, the fake server and the client cost before any harness work:
the floor under gambit verify's figure.

For each tool: wall time of the whole command, the request span at the server (first request
in to last answer out), span / model-bound limit, peak RSS of the process tree (each tool runs
under its own wrapper process, which reads RUSAGE_CHILDREN) and the number of model calls.
The rounds alternate the tools so that a noisy machine hits them alike; medians are printed.

The peers are installed on first use into ~/.cache/gambit-bench/peers (a venv with
inspect_ai 0.3.285, and promptfoo 0.123.1 from npm), never as project dependencies; a peer
that cannot be installed is skipped with the reason.

    .venv/bin/python bench/bench_verify.py [--rounds 3] [--runs 100] [--no-peers]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fake_model_server import FunctionCall, Reply, TimedModelServer  # noqa: E402

LATENCY = 0.1
CONCURRENCY = 16
PEERS = Path.home() / ".cache" / "gambit-bench" / "peers"
INSPECT_VERSION = "0.3.285"
PROMPTFOO_VERSION = "0.123.1"
WRAPPER = (
    "import resource, subprocess, sys, time; t = time.perf_counter(); "
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); "
    "code = p.returncode; sys.stderr.write(p.stderr.decode(errors='replace')[-600:]); "
    "wall = time.perf_counter() - t; "
    "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
    "print(wall, rss, code)"
)


# The floor: 2 x runs requests, as a Gambit answer asks (Open Responses, not streamed), through
# one httpx client at CONCURRENCY, in a process of its own like the tools.
FLOOR = """
import asyncio, os, sys, httpx
runs, concurrency = int(sys.argv[1]), int(sys.argv[2])
body = {"model": "bench", "stream": False,
        "input": [{"role": "user", "content": "What is the capital of France?"}]}
async def main():
    slots = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=os.environ["OPENRESPONSES_BASE_URL"], timeout=60) as client:
        async def one():
            async with slots:
                answer = await client.post("/responses", json=body)
                answer.raise_for_status()
                answer.json()
        await asyncio.gather(*(one() for _ in range(2 * runs)))
asyncio.run(main())
"""


class BenchModel(TimedModelServer):
    """Answers after LATENCY seconds, in the shape each tool's grader expects; counts calls."""

    def __init__(self) -> None:
        super().__init__(LATENCY)

    def answer(self, request):
        body = request.body if isinstance(request.body, dict) else {}
        text = json.dumps(body)
        if "gambit_respond" in json.dumps(body.get("tools") or []):
            score = zlib.crc32(text.encode()) % 7 - 3
            payload = {"score": score, "reason": "graded"}
            return Reply(
                function_calls=[FunctionCall("gambit_respond", {"payload": payload})],
                delay_before=LATENCY,
            )
        if "GRADE" in text:
            return Reply(text="The answer is right.\nGRADE: C", delay_before=LATENCY)
        if "rubric" in text.lower():
            verdict = {"reason": "It answers.", "pass": True, "score": 1}
            return Reply(text=json.dumps(verdict), delay_before=LATENCY)
        return Reply(text="Paris is the capital of France.", delay_before=LATENCY)


# ---------------------------------------------------------------- the tools' workloads


def gambit_workload(folder: Path) -> Path:
    from bench_scenarios import write_dedented

    write = functools.partial(write_dedented, folder)
    write(
        "bot/PROMPT.md",
        """
        +++
        startMode = "user"
        modelParams.model = "openresponses/bench"
        [[scenarios]]
        path = "../persona/deck.py"
        label = "One question"
        [[graders]]
        path = "../grader/PROMPT.md"
        label = "Correct"
        +++
        Answer the question.
        """,
    )
    # The persona is a compute deck: it asks one question and makes no model call, so each
    # run is one answer and one grade, like the peers' samples.
    write(
        "persona/deck.py",
        """
        import gambit
        deck = gambit.define_deck(run=lambda ctx: "What is the capital of France?")
        """,
    )
    write(
        "grader/PROMPT.md",
        """
        +++
        contextSchema = "gambit://schemas/graders/contexts/conversation.zod.ts"
        responseSchema = "gambit://schemas/graders/grader_output.zod.ts"
        modelParams.model = "openresponses/bench"
        +++
        Grade the answer.

        ![](gambit://snippets/respond.md)
        """,
    )
    return folder / "bot" / "PROMPT.md"


def inspect_workload(folder: Path, runs: int) -> Path:
    task = folder / "bench_task.py"
    task.write_text(
        textwrap.dedent(
            f"""
            from inspect_ai import Task, task
            from inspect_ai.dataset import Sample
            from inspect_ai.scorer import model_graded_qa
            from inspect_ai.solver import generate

            @task
            def bench():
                samples = [
                    Sample(input=f"Question {{i}}: what is the capital of France?", target="Paris")
                    for i in range({runs})
                ]
                return Task(dataset=samples, solver=generate(), scorer=model_graded_qa())
            """
        )
    )
    return task


def promptfoo_workload(folder: Path, runs: int, base_url: str) -> Path:
    provider = {"id": "openai:chat:bench", "config": {"apiBaseUrl": base_url, "apiKey": "bench"}}
    config = {
        "prompts": ["{{question}}"],
        "providers": [provider],
        "defaultTest": {
            "options": {"provider": provider},
            "assert": [{"type": "llm-rubric", "value": "Names the right capital"}],
        },
        "tests": [
            {"vars": {"question": f"Question {i}: what is the capital of France?"}}
            for i in range(runs)
        ],
    }
    path = folder / "promptfooconfig.json"
    path.write_text(json.dumps(config))
    return path


# ---------------------------------------------------------------- installing the peers


def _install_inspect() -> tuple[list[str] | None, str]:
    venv = PEERS / "inspect"
    inspect = venv / "bin" / "inspect"
    if not inspect.exists():
        print(
            f"installing inspect_ai {INSPECT_VERSION} into {venv} (first run only)...", flush=True
        )
        try:
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [
                    str(venv / "bin" / "pip"),
                    "install",
                    "-q",
                    f"inspect_ai=={INSPECT_VERSION}",
                    "openai",
                ],
                check=True,
                timeout=900,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            return None, f"inspect_ai could not be installed: {exc}"
    return [str(inspect)], ""


def _node_major_minor(node: str) -> tuple[int, int]:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
        major, minor, *_ = out.strip().lstrip("v").split(".")
        return int(major), int(minor)
    except (OSError, ValueError):
        return (0, 0)


def _npm_install(folder: Path, package: str, what: str, timeout: int) -> Exception | None:
    """`npm install package` into `folder`, saying so (`what`); the failure, or None."""
    print(f"installing {what} into {folder}...", flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", package],
            cwd=folder,
            check=True,
            timeout=timeout,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return exc
    return None


def _node_path() -> str | None:
    """A folder holding a Node.js >= 22.22 (promptfoo's minimum), installed from npm if needed."""
    system = shutil.which("node")
    if system and _node_major_minor(system) >= (22, 22):
        return str(Path(system).parent)
    folder = PEERS / "node22"
    node = folder / "node_modules" / ".bin" / "node"
    if not node.exists():
        failure = _npm_install(folder, "node@22", "Node.js 22 (promptfoo needs >= 22.22)", 900)
        if failure is not None:
            return None
    return str(node.parent) if _node_major_minor(str(node)) >= (22, 22) else None


def _install_promptfoo() -> tuple[list[str] | None, str]:
    folder = PEERS / "promptfoo"
    binary = folder / "node_modules" / ".bin" / "promptfoo"
    if shutil.which("npm") is None:
        return None, "promptfoo needs npm, which is not installed"
    if not binary.exists():
        failure = _npm_install(
            folder,
            f"promptfoo@{PROMPTFOO_VERSION}",
            f"promptfoo {PROMPTFOO_VERSION} (first run only)",
            1800,
        )
        if failure is not None:
            return None, f"promptfoo could not be installed: {failure}"
    return [str(binary)], ""


# ---------------------------------------------------------------- measuring


def measure(model: BenchModel, command: list[str], env: dict[str, str], cwd: Path) -> dict:
    model.reset_counts()
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, *command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall, rss_kb, code = out.stdout.split()
    span = model.span()
    if int(code) != 0:
        print(f"  exit {code}: {out.stderr.strip()[-600:]}", flush=True)
    return {
        "wall": float(wall),
        "span": span,
        "rss_mb": int(rss_kb) / 1024,
        "calls": model.calls,
        "exit": int(code),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument(
        "--no-peers", action="store_true", help="time gambit verify (and the httpx floor) only"
    )
    args = parser.parse_args()
    limit = 2 * args.runs * LATENCY / CONCURRENCY

    model = BenchModel().start()
    work = Path(tempfile.mkdtemp(prefix="gambit-bench-verify-"))
    base_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    tools: dict[str, tuple[list[str], dict[str, str], Path]] = {}

    gambit = str(Path(sys.executable).parent / "gambit")
    deck = gambit_workload(work / "gambit")
    tools["gambit verify"] = (
        [
            gambit,
            "verify",
            str(deck),
            "--runs",
            str(args.runs),
            "--repeats",
            "1",
            "--concurrency",
            str(CONCURRENCY),
            "--max-turns",
            "1",
            "--quiet",
            "--sessions",
            str(work / "gambit" / "sessions"),
        ],  # fmt: skip
        {**base_env, **model.env()},
        work / "gambit",
    )
    tools["httpx floor"] = (
        [sys.executable, "-c", FLOOR, str(args.runs), str(CONCURRENCY)],
        {**base_env, **model.env()},
        work,
    )
    skipped: list[str] = []
    if not args.no_peers:
        inspect, why = _install_inspect()
        if inspect is None:
            skipped.append(why)
        else:
            task = inspect_workload(work, args.runs)
            tools["inspect_ai"] = (
                [
                    *inspect,
                    "eval",
                    task.name,  # inspect wants a path relative to its working folder
                    "--model",
                    "openai/bench",
                    "--max-connections",
                    str(CONCURRENCY),
                    "--log-dir",
                    str(work / "inspect-logs"),
                    "--display",
                    "none",
                ],  # fmt: skip
                {
                    **base_env,
                    "OPENAI_BASE_URL": model.base_url,
                    "OPENAI_API_KEY": "bench",
                    "INSPECT_LOG_LEVEL": "warning",
                },
                work,
            )
        node: str | None = None
        promptfoo, why = _install_promptfoo()
        if promptfoo is None:
            skipped.append(why)
        else:
            config = promptfoo_workload(work, args.runs, model.base_url)
            node = _node_path()
            if node is None:
                skipped.append("promptfoo needs Node.js >= 22.22, which could not be installed")
        if promptfoo is not None and node is not None:
            tools["promptfoo"] = (
                [
                    *promptfoo,
                    "eval",
                    "-c",
                    str(config),
                    "--max-concurrency",
                    str(CONCURRENCY),
                    "--no-cache",
                    "--no-progress-bar",
                    "--no-table",
                    "-o",
                    str(work / "promptfoo.json"),
                ],  # fmt: skip
                {
                    **base_env,
                    "PROMPTFOO_DISABLE_TELEMETRY": "1",
                    "PROMPTFOO_DISABLE_UPDATE": "1",
                    "PROMPTFOO_CONFIG_DIR": str(work / "promptfoo-config"),
                    "OPENAI_API_KEY": "bench",
                    "PATH": node + os.pathsep + base_env.get("PATH", ""),
                },
                work,
            )

    results: dict[str, list[dict]] = {name: [] for name in tools}
    for round_ in range(args.rounds):
        for name, (command, env, cwd) in tools.items():
            result = measure(model, command, env, cwd)
            results[name].append(result)
            print(
                f"round {round_ + 1} {name}: wall {result['wall']:.2f} s, "
                f"span/limit {(result['span'] or float('nan')) / limit:.3f}, "
                f"{result['calls']} calls, exit {result['exit']}",
                flush=True,
            )
    model.stop()

    print()
    print(
        f"Workload: {args.runs} runs x 1 grade, concurrency {CONCURRENCY}, model latency "
        f"{LATENCY * 1000:.0f} ms; model-bound limit {limit:.2f} s; medians of {args.rounds} rounds"
    )
    header = f"{'tool':<15} {'wall s':>7} {'span s':>7} {'span/limit':>11} {'peak RSS MB':>12} {'calls':>6} {'wall vs gambit':>15}"
    print(header)
    print("-" * len(header))
    ours = statistics.median(r["wall"] for r in results["gambit verify"])
    for name, rounds in results.items():
        wall = statistics.median(r["wall"] for r in rounds)
        spans = [r["span"] for r in rounds if r["span"] is not None]
        span = statistics.median(spans) if spans else float("nan")
        rss = statistics.median(r["rss_mb"] for r in rounds)
        calls = statistics.median(r["calls"] for r in rounds)
        failed = sum(r["exit"] != 0 for r in rounds)
        print(
            f"{name:<15} {wall:>7.2f} {span:>7.2f} {span / limit:>11.3f} {rss:>12.0f} {calls:>6.0f} "
            f"{wall / ours:>14.2f}x" + (f"  ({failed} rounds exited non-zero)" if failed else "")
        )
    for reason in skipped:
        print(f"skipped: {reason}")
    print("targets for gambit verify: wall <= 2.5 s, span/limit <= 1.1, peak RSS <= 150 MB")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
