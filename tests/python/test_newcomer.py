"""What a newcomer meets on a terminal: the rough edges of a first walkthrough, each driven
through a pseudo-terminal the way a person types it (issue: every step works the first time).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import MEMDIR_BIN, server_env
from test_terminal import on_tty

pytestmark = pytest.mark.timeout(180)


def run(store: Path, *argv: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(MEMDIR_BIN), *argv], capture_output=True, input=input, env=server_env(store), timeout=120
    )


def test_bulk_ingest_of_many_batches_says_what_it_did_and_what_was_already_there(tmp_path: Path):
    """More lines than one batch holds: the terminal says how many chunks went into how many
    sessions, and a re-run that skips everything says they were already there."""
    store = tmp_path / "store"
    src = tmp_path / "chunks.jsonl"
    lines = [
        json.dumps({"session_id": f"s{i % 3}", "source_id": f"line-{i}", "content": f"turn number {i}"})
        for i in range(10_001)
    ]
    src.write_text("\n".join(lines) + "\n")
    code, out = on_tty(store, "ingest", "--jsonl", str(src), NO_COLOR="1")
    assert code == 0, out
    assert "ingested 10001 chunks into 3 sessions" in out, out
    assert "at position" not in out, out
    code, out = on_tty(store, "ingest", "--jsonl", str(src), NO_COLOR="1")
    assert code == 0, out
    assert "ingested 0 chunks into 0 sessions (10001 already there)" in out, out


def test_one_chunk_is_said_in_the_singular(tmp_path: Path):
    store = tmp_path / "store"
    src = tmp_path / "one.jsonl"
    src.write_text(json.dumps({"session_id": "s", "content": "only line"}) + "\n")
    code, out = on_tty(store, "ingest", "--jsonl", str(src), NO_COLOR="1")
    assert code == 0, out
    assert "ingested 1 chunk into 1 session\n" in out, out


def test_ingest_of_a_long_file_makes_one_chunk_per_section(tmp_path: Path):
    """`ingest --file README.md` of a long document: a chunk is one message, note or
    paragraph, so the file becomes its sections, and a search finds the section."""
    store = tmp_path / "store"
    doc = tmp_path / "README.md"
    body = ["# Project", "", "An introduction. " * 40, ""]
    for i in range(8):
        body += [f"## Part {i}", "", f"Details of part {i}: " + "filler words here. " * 60, ""]
    body += ["## Troubleshooting", "", "If the walrus protocol stalls, restart the daemon.", ""]
    doc.write_text("\n".join(body))
    p = run(store, "ingest", "--session-id", "docs", "--file", str(doc))
    assert p.returncode == 0, p.stderr
    fetched = json.loads(run(store, "fetch", "docs", "--limit", "100").stdout)
    contents = [c["content"] for c in fetched["chunks"]]
    assert len(contents) >= 9, contents
    assert all(len(c) < 2000 for c in contents), [len(c) for c in contents]
    hits = json.loads(run(store, "search", "walrus protocol").stdout)["results"]
    assert hits[0]["content"].startswith("## Troubleshooting"), hits[0]
    # A short text from stdin stays one chunk.
    p = run(store, "ingest", "--session-id", "short", "--file", "-", input=b"one line\n\nand another\n")
    assert p.returncode == 0, p.stderr
    assert len(json.loads(run(store, "fetch", "short").stdout)["chunks"]) == 1
