"""Regenerate the README's screenshots (docs/images/*.png) from the running simulator.

    .venv/bin/python docs/screenshots.py [--out docs/images] [--width 1280] [--height 800]
                                         [--scheme light|dark]

It copies the bundled examples to a temporary folder, starts `gambit serve` on them with no
API key (the offline demo model answers, as after `./dev start` on a fresh clone), then
drives Chromium (Debian's /usr/bin/chromium, through Playwright) the way a new user would:
chats with the support deck, grades the conversation, opens the deck in the editor. Each tab
is saved as one PNG: build.png, test.png, grade.png.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
DECK = "support/PROMPT.md"
MESSAGE = "Where is my order A1002? It was supposed to arrive last week."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(folder: Path) -> tuple[subprocess.Popen, str]:
    """`gambit serve` on a fresh copy of examples/, offline, on a free port."""
    workspace = folder / "examples"
    shutil.copytree(ROOT / "examples", workspace, ignore=shutil.ignore_patterns(".gambit"))
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    for name in ("DATABASE_URL", "REDIS_URL", "GAMBIT_API_KEYS"):
        env.pop(name, None)
    env.update({"GAMBIT_SIM_DB": str(folder / "sim.sqlite3"), "GAMBIT_DEMO_DELAY_MS": "0"})
    port = _free_port()
    gambit = str(Path(sys.executable).parent / "gambit")
    log = (folder / "serve.log").open("w")
    proc = subprocess.Popen(
        [gambit, "serve", str(workspace), "--port", str(port)],
        cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/test.json", timeout=1).read()
            return proc, url
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("gambit serve did not start:\n" + (folder / "serve.log").read_text())


def shoot(url: str, out: Path, width: int, height: int, scheme: str = "light") -> list[Path]:
    from playwright.sync_api import expect, sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    saved = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": height}, color_scheme=scheme)
        page.set_default_timeout(30_000)

        # Test: a conversation with the support deck, its trace beside it.
        page.goto(url + "/test")
        page.select_option("select[name=deck]", DECK)
        page.click("#new-session")
        page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
        session_url = page.url
        page.fill("#composer textarea[name=message]", MESSAGE)
        page.click("#send")
        expect(page.locator("#status")).to_have_text("completed")
        page.locator("#conversation .feedback button[data-score='2']").first.click()
        expect(page.locator("#conversation .feedback .fb-status").first).to_have_text("Saved")
        page.goto(session_url)  # as it opens, the trace's first run expanded
        saved.append(_save(page, out / "test.png"))

        # Grade: the conversation graded by the deck's grader, each score with its reason.
        session_id = session_url.rstrip("/").rsplit("/", 1)[-1]
        page.goto(f"{url}/grade?session={session_id}")
        page.click("#run-grader")
        page.wait_for_url(re.compile(r".*/grade/runs/run-[0-9a-f]{24}$"))
        expect(page.locator("#grade-result [data-status]")).to_have_text("completed")
        page.reload()  # as it opens once done
        saved.append(_save(page, out / "grade.png"))

        # Build: the deck's prompt in the editor, checked as it is typed.
        page.goto(f"{url}/build/file?path={DECK}&deck={DECK}")
        page.wait_for_function("() => !!window.gambitEditor")
        saved.append(_save(page, out / "build.png"))
        browser.close()
    return saved


def _save(page, path: Path) -> Path:
    page.mouse.move(0, 0)  # no hover state in the picture
    page.screenshot(path=str(path), full_page=False, animations="disabled", caret="initial")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--scheme", choices=["light", "dark"], default="light")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gambit-screenshots-") as tmp:
        proc, url = serve(Path(tmp))
        try:
            for path in shoot(url, args.out, args.width, args.height, args.scheme):
                print(path)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
