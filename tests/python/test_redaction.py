"""Redaction on the server surfaces: MCP over stdio (the official SDK) and REST.

Secrets and `<private>` spans sent through either surface are replaced (or dropped) before
anything is stored: the response counts them by kind and never echoes them, and no file under
the store (ledger and index included) holds them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import MEMDIR_BIN, server_env
from test_http import start_server

pytestmark = pytest.mark.anyio

# Assembled at run time so that the sources hold no secret.
AWS = "AKIA" + "QWERTYUIOP23ASDF"
GITHUB = "ghp_" + "Zx9Kq2Lm4Np6Rs8Tv0Wy1Ab3Cd5Ef7Gh9Ij1"
PRIVATE = "marmalade" + "-zeppelin-quokka"
PASSWORD = "Tr0ub4dor" + "-and-3"
SECRETS = [AWS, GITHUB, PRIVATE, PASSWORD]
TEXT = f"key {AWS} token {GITHUB} <private>{PRIVATE}</private>done PASSWORD={PASSWORD}"
EXPECT = {"aws_access_key": 1, "github_token": 1, "private": 1, "password": 1}
STORED = "key [REDACTED:aws_access_key] token [REDACTED:github_token] done PASSWORD=[REDACTED:password]"


def assert_nowhere(store: Path) -> None:
    """No file under the store holds a secret, as is or lower-cased (index terms)."""
    subprocess.run([str(MEMDIR_BIN), "reindex"], check=True, capture_output=True, env=server_env(store), timeout=60)
    for p in store.rglob("*"):
        if not p.is_file():
            continue
        data = p.read_bytes()
        for s in SECRETS:
            assert s.encode() not in data and s.lower().encode() not in data, f"{s} is stored in {p}"


async def test_mcp_ingest_and_write_redact(store, mcp_server):
    async with mcp_server(store) as srv:
        r = await srv.call("memory_ingest", {"session_id": "m", "content": TEXT})
        assert r["redacted"] == EXPECT
        assert not any(s in str(r) for s in SECRETS)
        b = await srv.call("memory_ingest", {"chunks": [{"session_id": "m", "content": TEXT}, {"session_id": "m", "content": "plain"}]})
        assert b["redacted"] == {k: v for k, v in EXPECT.items()}
        f = await srv.call("memory_fetch", {"session_id": "m"})
        assert [c["content"] for c in f["chunks"]] == [STORED, STORED, "plain"]
        w = await srv.call("memory_write", {"category": "infra", "data": {"k": [TEXT]}, "reason": f"token {GITHUB}"})
        assert w["redacted"] == {**EXPECT, "github_token": 2}
        a = await srv.call("memory_append", {"category": "log", "data": {"e": TEXT}})
        assert a["redacted"] == EXPECT
        rd = await srv.call("memory_read", {"category": "infra"})
        assert rd["data"] == {"k": [STORED]}
    assert_nowhere(store)


def test_rest_ingest_and_write_redact(tmp_path):
    store = tmp_path / "store"
    srv = start_server(store, "http")
    try:
        r = srv.post("/ingest", {"session_id": "r", "content": TEXT})
        assert r["redacted"] == EXPECT
        assert not any(s in str(r) for s in SECRETS)
        f = srv.post("/fetch", {"session_id": "r"})
        assert f["chunks"][0]["content"] == STORED
        w = srv.post("/api/v1/write", {"category": "infra", "data": {"k": TEXT}})
        assert w["redacted"] == EXPECT
        a = srv.post("/api/v1/append", {"category": "log", "data": {"e": TEXT}})
        assert a["redacted"] == EXPECT
    finally:
        srv.stop()
    assert_nowhere(store)


def test_rest_forget_leaves_no_trace(tmp_path):
    """A forget over REST: the chunk's text is gone from every file and from search; its
    position stays taken."""
    store = tmp_path / "store"
    word = "wallaby" + "secretword"
    srv = start_server(store, "http")
    try:
        srv.post("/ingest", {"chunks": [{"session_id": "f", "content": f"the {word} is here"}, {"session_id": "f", "content": "next"}]})
        hit = srv.post("/search", {"query": word})["results"][0]
        plan = srv.post("/api/v1/forget", {"query": word, "dry_run": True})
        assert plan["count"] == 1 and plan["chunks"][0]["chunk_id"] == hit["chunk_id"]
        out = srv.post("/api/v1/forget", {"session_id": "f", "chunk_ids": [hit["chunk_id"]]})
        assert out["count"] == 1 and "preview" not in out["chunks"][0]
        assert srv.post("/search", {"query": word})["results"] == []
        f = srv.post("/fetch", {"session_id": "f"})
        assert [c["content"] for c in f["chunks"]] == ["", "next"]
    finally:
        srv.stop()
    for p in store.rglob("*"):
        if p.is_file():
            assert word.encode() not in p.read_bytes(), f"{word} is still in {p}"
