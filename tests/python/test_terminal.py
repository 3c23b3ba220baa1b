"""The CLI on a real terminal (a pseudo-terminal): output for people by default, colour unless
NO_COLOR, JSON with --json, errors as one line and a hint, and a question before a
destructive command without a target.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path

import pytest

from conftest import MEMDIR_BIN, server_env

pytestmark = pytest.mark.timeout(120)


def on_tty(store: Path, *argv: str, answer: bytes | None = None, **env: str) -> tuple[int, str]:
    """Runs memdir with stdin, stdout and stderr on one pseudo-terminal; returns the exit code
    and everything it wrote. `answer` is typed once a question appears."""
    master, slave = os.openpty()
    e = server_env(store, TERM="xterm-256color", **env)
    proc = subprocess.Popen([str(MEMDIR_BIN), *argv], stdin=slave, stdout=slave, stderr=slave, env=e, close_fds=True)
    os.close(slave)
    out = b""
    sent = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break  # the child closed the terminal
            if not chunk:
                break
            out += chunk
            if answer is not None and not sent and b"[y/N]" in out:
                os.write(master, answer)
                sent = True
        elif proc.poll() is not None:
            break
    code = proc.wait(timeout=30)
    os.close(master)
    return code, out.decode(errors="replace").replace("\r\n", "\n")


def seed(store: Path) -> None:
    for argv in (
        ["ingest", "--session-id", "s1", "--project", "web", "--text", "the pool timeout was raised"],
        ["write", "base", "--data", json.dumps({"v": 1})],
        ["write", "base", "--data", json.dumps({"v": 2})],
    ):
        p = subprocess.run([str(MEMDIR_BIN), *argv], capture_output=True, env=server_env(store), timeout=60)
        assert p.returncode == 0, p.stderr


def test_a_terminal_gets_output_for_people_in_colour(tmp_path: Path):
    store = tmp_path / "store"
    seed(store)
    code, out = on_tty(store, "search", "pool")
    assert code == 0, out
    assert "\x1b[1;33mpool\x1b[0m" in out, out
    assert "s1#0" in out and '"results"' not in out, out


def test_no_color_keeps_people_output_plain(tmp_path: Path):
    store = tmp_path / "store"
    seed(store)
    code, out = on_tty(store, "search", "pool", NO_COLOR="1")
    assert code == 0, out
    assert "\x1b[" not in out, out
    assert "[pool]" in out, out


def test_json_on_a_terminal_with_json(tmp_path: Path):
    store = tmp_path / "store"
    seed(store)
    code, out = on_tty(store, "--json", "list")
    assert code == 0, out
    assert json.loads(out)["categories"][0]["name"] == "base"


def test_errors_on_a_terminal_are_one_line_and_a_hint(tmp_path: Path):
    store = tmp_path / "store"
    seed(store)
    code, out = on_tty(store, "read", "nope", NO_COLOR="1")
    assert code == 4, out
    lines = out.strip().splitlines()
    assert lines[0].startswith('error (not_found): category "nope" does not exist'), out
    assert lines[1].startswith("  hint:"), out


def test_compact_of_everything_asks_first_on_a_terminal(tmp_path: Path):
    store = tmp_path / "store"
    seed(store)
    code, out = on_tty(store, "compact", "--keep", "1", answer=b"n\n", NO_COLOR="1")
    # Declining is an answer, not an error: nothing is done, exit 0.
    assert code == 0, out
    assert "Trim the history of every category" in out and "not confirmed" in out, out
    code, out = on_tty(store, "compact", "--keep", "1", answer=b"y\n", NO_COLOR="1")
    assert code == 0, out
    assert "removed 1 old version," in out, out


def test_long_jobs_draw_a_progress_bar_on_a_terminal_and_none_into_a_pipe(tmp_path: Path):
    store = tmp_path / "store"
    lines = "".join(
        json.dumps({"session_id": f"s{i}", "content": f"turn about topic {i}"}) + "\n" for i in range(200)
    )
    src = tmp_path / "in.jsonl"
    src.write_text(lines)
    code, out = on_tty(store, "ingest", "--jsonl", str(src))
    assert code == 0, out
    code, out = on_tty(store, "snapshot", str(tmp_path / "snap"))
    assert code == 0, out
    import re

    assert re.search(r"snapshot \[[=> ]+\] \d+/\d+ files", out), out
    # A git sync counts its stages (commit, fetch, merge, push).
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    code, out = on_tty(store, "sync", "--init", str(remote))
    assert code == 0, out
    assert re.search(r"sync \[[=> ]+\] step \d+ of 4", out), out
    # Bytes read are sizes with a rate, never a raw count with decimals.
    code, out = on_tty(store, "reindex")
    assert code == 0, out
    assert re.search(r"reindex \[[=> ]+\] [\d.]+ ?[KMG]?i?B/[\d.]+ ?[KMG]?i?B at ", out), out
    # Piped: the same job writes no bar, and stdout is the JSON answer.
    p = subprocess.run(
        [str(MEMDIR_BIN), "snapshot", str(tmp_path / "snap2")],
        capture_output=True,
        env=server_env(store),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert b"[" not in p.stderr, p.stderr
    assert json.loads(p.stdout)["verified"] is True
