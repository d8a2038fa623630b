"""The click commands behind `gambit serve` and `gambit worker`."""

import subprocess
import sys

from click.testing import CliRunner

from gambit.cli._serve import serve_command, worker_command


def test_the_commands_document_their_options():
    out = CliRunner().invoke(serve_command, ["--help"]).output
    assert "DECK_OR_FOLDER" in out and "--host" in out and "127.0.0.1" in out and "--port" in out
    out = CliRunner().invoke(worker_command, ["--help"]).output
    assert "--slots" in out and "--burst" in out


def test_importing_the_cli_does_not_import_django():
    code = "import sys, gambit.cli._serve; print('django' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_second_server_on_a_busy_port_exits_1_before_touching_the_database(tmp_path):
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        db = tmp_path / "sim.sqlite3"
        env = {**os.environ, "GAMBIT_SIM_DB": str(db)}
        env.pop("DATABASE_URL", None)
        result = subprocess.run(
            [sys.executable, "-c", "from gambit.cli.main import main; main()", "serve", "--port", str(port)],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "is another server running? Pick another port with --port." in result.stderr
    assert not db.exists()  # nothing touched: no migration, no run marked interrupted


def test_bad_ports_workers_and_hosts_are_refused_in_one_line_without_a_traceback(tmp_path):
    import os

    env = {**os.environ, "GAMBIT_SIM_DB": str(tmp_path / "sim.sqlite3")}
    env.pop("DATABASE_URL", None)

    def serve(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", "from gambit.cli.main import main; main()", "serve", *args],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip

    for args, said in [
        (("--port", "99999"), "'--port': 99999 is not in the range 1<=x<=65535"),
        (("--port", "-1"), "'--port': -1 is not in the range"),
        (("--workers", "-3"), "'--workers': -3 is not in the range 0<=x<=256"),
    ]:
        result = serve(*args)
        assert result.returncode == 2 and said in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    result = serve("--host", "0.0.0.0.0", "--port", "8123")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "cannot listen on 0.0.0.0.0:8123 (unknown host" in result.stderr
    assert "give --host an address of this machine" in result.stderr
    assert "another server" not in result.stderr
    assert not (tmp_path / "sim.sqlite3").exists()


def test_a_worker_on_the_embedded_profile_exits_1_and_says_where_the_workers_are(tmp_path):
    import os

    env = {**os.environ, "GAMBIT_SIM_DB": str(tmp_path / "sim.sqlite3")}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", "from gambit.cli.main import main; main()", "worker"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "runs its workers inside `gambit serve`" in result.stderr
    assert "DATABASE_URL and REDIS_URL" in result.stderr
    assert not (tmp_path / "sim.sqlite3").exists()  # it touched no data


def test_the_banner_flags_a_broken_deck_with_its_error(tmp_path):
    import os
    import socket

    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "PROMPT.md").write_text('+++\nlabel = "Good"\n+++\n\nHi.\n')
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "PROMPT.md").write_text('+++\nlabel = "Bad"\ncontextSchema = "./nope.json"\n+++\n\nHi.\n')  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GAMBIT_SIM_DB": str(tmp_path / ".gambit" / "sim.sqlite3")}
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from gambit.cli.main import main; main()", "serve", str(tmp_path), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "Open Responses endpoint" in line:
                break
    finally:
        proc.terminate()
        proc.wait(15)
    banner = "".join(lines)
    assert "decks: bad/PROMPT.md, good/PROMPT.md" in banner
    [flag] = [line for line in lines if "BROKEN" in line]
    assert "bad/PROMPT.md" in flag and "nope.json" in flag
