"""The 2026-07-28 protocol from a raw client, on stdio and on MCP over HTTP.

No SDK in between: the client never sends `initialize`. It asks `server/discover` first, then
sends each request with the version, client info and capabilities in its own `_meta` (over
HTTP also the `Mcp-Method` and, for a named call, `Mcp-Name` headers), and reads the answers
line by line (stdio) or from the response's event stream (HTTP). Every kind of request a
memory client makes is tried: a tool call that writes and one that searches, a resource read,
a prompt, a completion, and a list with its caching hints.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from conftest import MEMDIR_BIN, server_env
from test_http import http_server  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.timeout(120)]

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}

# (method, params, the name its Mcp-Name header carries over HTTP)
CONVERSATION: list[tuple[str, dict[str, Any], str | None]] = [
    ("server/discover", {}, None),
    ("tools/call", {"name": "memory_ingest", "arguments": {"session_id": "raw", "content": "the deploy moved to Fridays", "project": "ops"}}, "memory_ingest"),
    ("tools/call", {"name": "memory_search", "arguments": {"query": "deploy Fridays"}}, "memory_search"),
    ("resources/read", {"uri": "memdir://sessions/raw/0"}, "memdir://sessions/raw/0"),
    ("prompts/get", {"name": "recall", "arguments": {"topic": "deploys"}}, "recall"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "recall"}, "argument": {"name": "project", "value": "o"}}, None),
    ("tools/list", {}, None),
]


def request(i: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": {**params, "_meta": META}}


def check(answers: list[dict[str, Any]]) -> None:
    """What each request of CONVERSATION must answer."""
    for a in answers:
        assert "error" not in a, a
    discover, ingest, search, read, prompt, complete, tools = (a["result"] for a in answers)
    assert VERSION in discover["supportedVersions"]
    caps = discover["capabilities"]
    assert {"tools", "resources", "prompts", "completions"} <= set(caps)
    assert caps["resources"].get("subscribe") is True
    assert ingest["structuredContent"]["position"] == 0
    hits = search["structuredContent"]["results"]
    assert hits and hits[0]["session_id"] == "raw" and "Fridays" in hits[0]["content"]
    assert json.loads(read["contents"][0]["text"])["content"] == "the deploy moved to Fridays"
    assert "deploys" in prompt["messages"][0]["content"]["text"]
    assert complete["completion"]["values"] == ["ops"]
    assert tools["ttlMs"] == 3_600_000 and tools["cacheScope"] == "public"
    for result in (ingest, search, read, prompt, complete, tools):
        assert result.get("resultType", "complete") == "complete"


def test_a_discover_first_client_over_stdio(tmp_path: Path, memdir_bin: Path):
    store = tmp_path / "store"
    lines = "".join(json.dumps(request(i, m, p)) + "\n" for i, (m, p, _) in enumerate(CONVERSATION))
    # A request that names no version, on a connection that never initialized, is refused with
    # an answer (never left waiting).
    lines += json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {}}) + "\n"
    proc = subprocess.Popen(
        [str(MEMDIR_BIN), "serve"],
        env=server_env(store),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    answers: dict[int, dict[str, Any]] = {}
    assert proc.stdin is not None and proc.stdout is not None
    # One request at a time: the ingest must land before the search looks.
    for line in lines.splitlines():
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        while True:
            msg = json.loads(proc.stdout.readline())
            if "id" in msg:
                answers[msg["id"]] = msg
                break
    proc.stdin.close()
    proc.wait(timeout=30)
    check([answers[i] for i in range(len(CONVERSATION))])
    assert "error" in answers[99], answers[99]


def events(body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an event stream (or of a plain JSON body)."""
    if body.lstrip().startswith("{"):
        return [json.loads(body)]
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]


def test_a_discover_first_client_over_mcp_http(http_server):
    srv = http_server("mcp-http")
    answers = []
    with httpx2.Client(timeout=30, trust_env=False) as http:
        for i, (method, params, name) in enumerate(CONVERSATION):
            headers = {
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": VERSION,
                "Mcp-Method": method,
            }
            if name is not None:
                headers["Mcp-Name"] = name
            r = http.post(srv.mcp_url, headers=headers, content=json.dumps(request(i, method, params)))
            assert r.status_code == 200, (method, r.status_code, r.text)
            [answer] = [m for m in events(r.text) if m.get("id") == i]
            answers.append(answer)
        check(answers)
        # The routing headers are the transport's: a request without Mcp-Method is refused with
        # the protocol's error, not served.
        r = http.post(
            srv.mcp_url,
            headers={"content-type": "application/json", "accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION},
            content=json.dumps(request(50, "tools/list", {})),
        )
        assert r.status_code == 400
        assert events(r.text)[0]["error"]["code"] == -32020
