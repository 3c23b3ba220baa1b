"""One table of hostile inputs, run through every surface of memdir.

Each row of `CASES` is one hostile input (malformed JSON, wrong types, path tricks in names,
sizes over the documented limits, invalid hashes, numbers out of range, unknown fields, deep
nesting, text that is not UTF-8) with the ONE error code every surface must give for it:

- `cli`: the `memdir` binary (subprocess, `MEMDIR_DIR` set), exit code mapped to its kind and
  the `{"error": {"code": ...}}` JSON on stderr;
- `mcp-stdio`: `memdir serve` through the official Python MCP SDK; a tool error's `code`, or for
  a message the server cannot parse, the JSON-RPC error's `data.code`;
- `rest`: `memdir serve --transport http` through `http.client`; the status and the error's
  `code`, which must agree;
- `mcp-http`: `memdir serve --transport mcp-http` through the SDK's streamable HTTP client, read
  as `mcp-stdio`.

Every run must also leave the memory directory as it was: every file outside `.memdir/` is
hashed before and after.

Where a surface cannot express an input (a CLI flag has no JSON type; the SDK never sends
malformed JSON), the row says so and the cell is skipped with that reason. Where a surface
legitimately answers differently (clap refuses a malformed flag as a usage error, exit 2,
before memdir sees it), the row gives the other outcome and why. Where a surface answers
wrongly because of code outside this suite's reach, the cell is a strict xfail naming the bug,
so it turns into a failure the day the bug is fixed and the mark is forgotten.
"""

from __future__ import annotations

import http.client
import json
import queue
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from conftest import CALL_TIMEOUT_S, MEMDIR_BIN, _leaves, content_agrees, open_server, server_env, store_digest

pytestmark = [pytest.mark.timeout(120)]

KIB = 1024
MIB = 1024 * KIB
SURFACES = ["cli", "mcp-stdio", "rest", "mcp-http"]

# CLI exit codes (`memdir --help`) and HTTP statuses (README) of each error kind.
EXIT_KIND = {0: "ok", 2: "usage", 3: "invalid", 4: "not_found", 5: "conflict", 6: "busy", 7: "corrupt", 8: "unavailable", 9: "too_large", 10: "internal", 11: "denied"}
STATUS_OF = {"invalid": 400, "not_found": 404, "conflict": 409, "too_large": 413, "corrupt": 422, "busy": 503, "unavailable": 503, "denied": 403, "internal": 500}

REST_ROUTE = {
    "memory_search": "/search",
    "memory_ingest": "/ingest",
    "memory_fetch": "/fetch",
    "memory_read": "/api/v1/read",
    "memory_write": "/api/v1/write",
    "memory_append": "/api/v1/append",
    "memory_delete": "/api/v1/delete",
    "memory_history": "/api/v1/history",
}


@dataclass(frozen=True)
class Raw:
    """A REST body sent byte for byte (not JSON-encoded by the test)."""

    body: bytes


@dataclass(frozen=True)
class Case:
    name: str
    tool: str
    # The tool arguments (MCP, and the REST body unless `rest` is given).
    args: Any
    # What every surface must answer: an error code, or "ok".
    expect: str
    # The CLI form: argv and stdin, or a string saying why the CLI cannot express the input.
    cli: tuple[list[str], bytes] | str
    # A REST request other than POSTing `args` to the tool's route: (method, path, body).
    rest: tuple[str, str, Any] | None = None
    # Why the SDK (both MCP surfaces) cannot send this input, if it cannot.
    mcp: str | None = None
    # Surfaces that legitimately answer differently: surface -> (outcome, why).
    differs: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Surfaces that answer wrongly today: surface -> what goes wrong (strict xfail).
    bug: dict[str, str] = field(default_factory=dict)


def nested(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = {"a": v}
    return v


def cli(argv: list[str], stdin: bytes = b"") -> tuple[list[str], bytes]:
    return argv, stdin


NO_JSON_TYPES = "CLI arguments are text: there is no JSON type to get wrong"
NO_NUL = "an argv string cannot hold NUL"
SDK_SENDS_JSON = "the SDK serializes every message itself and never sends malformed JSON (raw stdio lines: tests/it/mcp_framing.rs)"
BIG_INT = 123456789012345678901234567890

# fmt: off
CASES: list[Case] = [
    # Malformed JSON and text that is not UTF-8.
    Case("malformed JSON", "memory_write", None, "invalid",
         cli(["write", "m", "--data", '{"k": ']), rest=("POST", "/api/v1/write", Raw(b'{"category": "m", "data": {"k": ')), mcp=SDK_SENDS_JSON),
    Case("body is a JSON array, not an object", "memory_write", None, "invalid",
         "the CLI has no request body", rest=("POST", "/api/v1/write", Raw(b'[{"category": "m", "data": {}}]')), mcp="the SDK sends arguments as an object"),
    Case("byte 0xFF inside a JSON string", "memory_write", None, "invalid",
         cli(["write", "u", "--file", "-"], b'{"v": "\xff"}'), rest=("POST", "/api/v1/write", Raw(b'{"category": "u", "data": {"v": "\xff"}}')),
         mcp="the SDK encodes str as UTF-8"),
    Case("lone surrogate escape \\ud800", "memory_write", None, "invalid",
         cli(["write", "u", "--file", "-"], b'{"v": "\\ud800"}'), rest=("POST", "/api/v1/write", Raw(b'{"category": "u", "data": {"v": "\\ud800"}}')),
         mcp="the SDK cannot encode a lone surrogate (pydantic UnicodeEncodeError) and drops the session"),
    # Wrong types.
    Case("data is an array", "memory_write", {"category": "t", "data": [1, 2]}, "invalid", cli(["write", "t", "--data", "[1, 2]"])),
    Case("category is a number", "memory_write", {"category": 5, "data": {}}, "invalid", NO_JSON_TYPES),
    Case("merge is a string", "memory_write", {"category": "t", "data": {}, "merge": "yes"}, "invalid", NO_JSON_TYPES),
    Case("limit is a string", "memory_search", {"query": "a", "limit": "five"}, "invalid", cli(["search", "a", "--limit", "five"])),
    Case("metadata is an array", "memory_ingest", {"session_id": "t", "content": "c", "metadata": [1]}, "invalid",
         cli(["ingest", "--session-id", "t", "--text", "c", "--metadata", "[1]"])),
    # Path tricks in names.
    Case("category ../x", "memory_write", {"category": "../x", "data": {}}, "invalid", cli(["write", "../x", "--data", "{}"])),
    Case("category a/b", "memory_write", {"category": "a/b", "data": {}}, "invalid", cli(["write", "a/b", "--data", "{}"])),
    Case("category a\\b", "memory_write", {"category": "a\\b", "data": {}}, "invalid", cli(["write", "a\\b", "--data", "{}"])),
    Case("category ..", "memory_write", {"category": "..", "data": {}}, "invalid", cli(["write", "..", "--data", "{}"])),
    Case("category /etc/passwd", "memory_read", {"category": "/etc/passwd"}, "invalid", cli(["read", "/etc/passwd"])),
    Case("category CON is a plain name, and absent", "memory_read", {"category": "CON"}, "not_found", cli(["read", "CON"])),
    Case("category with NUL", "memory_write", {"category": "a\x00b", "data": {}}, "invalid", NO_NUL),
    Case("category with a newline", "memory_write", {"category": "a\nb", "data": {}}, "invalid", cli(["write", "a\nb", "--data", "{}"])),
    Case("category of 129 characters", "memory_write", {"category": "c" * 129, "data": {}}, "invalid", cli(["write", "c" * 129, "--data", "{}"])),
    Case("category of 100 capitals (300 bytes encoded)", "memory_write", {"category": "C" * 100, "data": {}}, "invalid",
         cli(["write", "C" * 100, "--data", "{}"])),
    Case("session ../../etc/passwd is a plain id, and absent", "memory_fetch", {"session_id": "../../etc/passwd"}, "not_found",
         cli(["fetch", "../../etc/passwd"])),
    Case("session id with NUL", "memory_ingest", {"session_id": "a\x00b", "content": "c"}, "invalid", NO_NUL),
    Case("session id of 257 characters", "memory_ingest", {"session_id": "s" * 257, "content": "c"}, "invalid",
         cli(["ingest", "--session-id", "s" * 257, "--text", "c"])),
    Case("project with a tab", "memory_ingest", {"session_id": "t", "content": "c", "project": "a\tb"}, "invalid",
         cli(["ingest", "--session-id", "t", "--text", "c", "--project", "a\tb"])),
    # Sizes over the documented limits.
    Case("content of 256 KiB + 1", "memory_ingest", {"session_id": "t", "content": "x" * (256 * KIB + 1)}, "too_large",
         cli(["ingest", "--session-id", "t", "--file", "-"], b"x" * (256 * KIB + 1))),
    Case("category of 1 MiB", "memory_write", {"category": "t", "data": {"v": "x" * MIB}}, "too_large",
         cli(["write", "t", "--file", "-"], json.dumps({"v": "x" * MIB}).encode())),
    Case("reason of 1001 characters", "memory_write", {"category": "t", "data": {}, "reason": "r" * 1001}, "too_large",
         cli(["write", "t", "--data", "{}", "--reason", "r" * 1001])),
    Case("batch of 10,001 chunks", "memory_ingest", {"chunks": [{"session_id": "t", "content": "c"}] * 10_001}, "too_large",
         "the CLI streams --jsonl input in batches of 1,000 chunks: 10,001 lines are saved, not refused"),
    Case("content of 17 MiB (over the HTTP body limit)", "memory_ingest", {"session_id": "t", "content": "x" * (17 * MIB)}, "too_large",
         cli(["ingest", "--session-id", "t", "--file", "-"], b"x" * (17 * MIB))),
    Case("content of 65 MiB (over the stdio message limit)", "memory_ingest", {"session_id": "t", "content": "x" * (65 * MIB)}, "too_large",
         cli(["ingest", "--session-id", "t", "--file", "-"], b"x" * (65 * MIB))),
    # Compare-and-swap hashes.
    Case("expected_hash that is not a hash", "memory_write", {"category": "base", "data": {}, "expected_hash": "xyz"}, "invalid",
         cli(["write", "base", "--data", "{}", "--expected-hash", "xyz"])),
    Case("expected_hash in upper-case hex", "memory_delete", {"category": "base", "expected_hash": "A" * 64}, "invalid",
         cli(["delete", "base", "--expected-hash", "A" * 64])),
    # Numbers.
    Case("limit -1", "memory_search", {"query": "a", "limit": -1}, "invalid", cli(["search", "a", "--limit", "-1"])),
    Case("limit 1,000,000", "memory_search", {"query": "a", "limit": 1_000_000}, "invalid", cli(["search", "a", "--limit", "1000000"])),
    Case("limit 2^64", "memory_search", {"query": "a", "limit": 2**64}, "invalid", cli(["search", "a", "--limit", str(2**64)])),
    Case("limit 1e300", "memory_search", {"query": "a", "limit": 1e300}, "invalid", cli(["search", "a", "--limit", "1e300"])),
    Case("limit 5.5", "memory_search", {"query": "a", "limit": 5.5}, "invalid", cli(["search", "a", "--limit", "5.5"])),
    Case("limit 5.0 is the integer 5", "memory_search", {"query": "a", "limit": 5.0}, "ok", cli(["search", "a", "--limit", "5.0"])),
    Case("max_entries 2^53 + 1", "memory_append", {"category": "journal", "data": {"e": 1}, "max_entries": 2**53 + 1}, "invalid",
         cli(["append", "journal", "--data", '{"e": 1}', "--max-entries", str(2**53 + 1)])),
    Case("max_entries 2^53 + 1 written as a float", "memory_append", {"category": "journal", "data": {"e": 1}, "max_entries": float(2**53 + 1)}, "invalid",
         NO_JSON_TYPES),
    Case("position 2^64", "memory_fetch", {"session_id": "s1", "position": 2**64}, "invalid", cli(["fetch", "s1", "--position", str(2**64)])),
    Case("days 36,501", "memory_overview", {"days": 36_501}, "invalid", cli(["overview", "--days", "36501"]),
         rest=("GET", "/overview?days=36501", None)),
    Case("offset 2^64", "memory_overview", {"offset": 2**64}, "invalid", cli(["overview", "--offset", str(2**64)]),
         rest=("GET", f"/overview?offset={2**64}", None)),
    Case("context 21", "memory_search", {"query": "a", "context": 21}, "invalid", cli(["search", "a", "--context", "21"])),
    Case("integer beyond 64 bits in data", "memory_write", {"category": "lossy", "data": {"n": BIG_INT}}, "invalid",
         cli(["write", "lossy", "--data", json.dumps({"n": BIG_INT})])),
    # Unknown fields and enum values.
    Case("unknown argument", "memory_write", {"category": "t", "data": {}, "colour": "red"}, "invalid",
         cli(["write", "t", "--data", "{}", "--colour", "red"]), differs={"cli": ("usage", "an unknown flag is a usage error (exit 2), by the documented exit-code contract")}),
    Case("mode regex", "memory_search", {"query": "a", "mode": "regex"}, "invalid", cli(["search", "a", "--mode", "regex"])),
    Case("since last tuesday", "memory_search", {"query": "a", "since": "last tuesday"}, "invalid", cli(["search", "a", "--since", "last tuesday"])),
    Case("empty batch", "memory_ingest", {"chunks": []}, "invalid", cli(["ingest", "--jsonl", "-"], b"")),
    # Deep nesting.
    Case("data nested 200 levels", "memory_write", {"category": "t", "data": nested(200)}, "invalid",
         cli(["write", "t", "--data", json.dumps(nested(200))])),
]
# fmt: on


def _params():
    for case in CASES:
        for surface in SURFACES:
            marks = []
            na = None
            if surface == "cli" and isinstance(case.cli, str):
                na = case.cli
            elif surface.startswith("mcp") and (case.mcp or case.args is None):
                na = case.mcp
            if na:
                marks.append(pytest.mark.skip(reason=f"not expressible: {na}"))
            elif surface in case.bug:
                marks.append(pytest.mark.xfail(strict=True, reason=case.bug[surface]))
            yield pytest.param(case, surface, id=f"{case.name}-{surface}", marks=marks)


def test_the_table_is_consistent():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "case names are unique"
    for c in CASES:
        assert c.tool in REST_ROUTE or c.rest is not None, c.name
        assert set(c.differs) | set(c.bug) <= set(SURFACES), c.name
        assert not (set(c.differs) & set(c.bug)), c.name
        for surface, (outcome, why) in c.differs.items():
            assert outcome != c.expect and why, c.name


# --------------------------------------------------------------------------------------------
# The surfaces
# --------------------------------------------------------------------------------------------

LISTEN_RE = re.compile(r"^memdir: listening on http://(?P<addr>\S+?)(?:/mcp)?$")


@dataclass
class Listener:
    proc: subprocess.Popen
    host: str
    port: int

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def listen(store: Path, transport: str) -> Listener:
    """Starts `memdir serve --transport <transport>` on a free loopback port."""
    proc = subprocess.Popen(
        [str(MEMDIR_BIN), "serve", "--transport", transport, "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=server_env(store),
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + 20
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        if m := LISTEN_RE.match(line):
            host, port = m["addr"].rsplit(":", 1)
            return Listener(proc, host, int(port))
    proc.kill()
    proc.wait()
    raise AssertionError(f"memdir serve --transport {transport} did not start listening")


@dataclass
class World:
    store: Path
    rest: Listener
    mcp_http: Listener


@pytest.fixture(scope="module")
def world(tmp_path_factory, memdir_bin) -> World:
    """One seeded store that every surface serves: a document, a log and a session."""
    store = tmp_path_factory.mktemp("hostile") / "store"
    for argv, stdin in [
        (["write", "base", "--data", '{"a": 1}'], b""),
        (["append", "journal", "--data", '{"e": 0}'], b""),
        (["ingest", "--jsonl", "-"], b'{"session_id": "s1", "content": "alpha one"}\n{"session_id": "s1", "content": "bravo two"}\n'),
    ]:
        p = subprocess.run([str(MEMDIR_BIN), *argv], input=stdin, capture_output=True, env=server_env(store), timeout=30)
        assert p.returncode == 0, p.stderr
    rest = listen(store, "http")
    try:
        mcp_http = listen(store, "mcp-http")
    except BaseException:
        rest.stop()
        raise
    yield World(store, rest, mcp_http)
    rest.stop()
    mcp_http.stop()


def kind_of_mcp_error(e: MCPError) -> str:
    data = e.error.data
    if isinstance(data, dict) and isinstance(data.get("code"), str):
        return data["code"]
    return f"json-rpc {e.error.code}: {e.error.message}"


async def call_mcp(session: ClientSession, case: Case) -> tuple[str, str]:
    try:
        with anyio.fail_after(CALL_TIMEOUT_S + 10):
            res = await session.call_tool(case.tool, case.args, read_timeout_seconds=CALL_TIMEOUT_S)
    except MCPError as e:
        return kind_of_mcp_error(e), f"JSON-RPC error {e.error.code} {e.error.message!r} data={e.error.data!r}"[:500]
    sc = content_agrees(res) or {}
    if res.is_error:
        return sc.get("error", {}).get("code", "?"), json.dumps(sc)[:500]
    return "ok", json.dumps(sc)[:300]


def run_cli(store: Path, case: Case) -> tuple[str, str]:
    assert not isinstance(case.cli, str)
    argv, stdin = case.cli
    p = subprocess.run([str(MEMDIR_BIN), *argv], input=stdin, capture_output=True, env=server_env(store), timeout=60)
    kind = EXIT_KIND.get(p.returncode, f"exit {p.returncode}")
    err = p.stderr.decode(errors="replace")
    if kind not in ("ok", "usage"):
        # Every memdir error is JSON on stderr with the code of its exit status.
        code = json.loads(err)["error"]["code"]
        assert code == kind, f"exit {p.returncode} but error code {code}: {err}"
    return kind, f"exit {p.returncode}: {err[:400]}"


def run_rest(listener: Listener, case: Case) -> tuple[str, str]:
    method, path, body = case.rest or ("POST", REST_ROUTE[case.tool], case.args)
    data = body.body if isinstance(body, Raw) else None if body is None else json.dumps(body).encode()
    conn = http.client.HTTPConnection(listener.host, listener.port, timeout=60)
    try:
        conn.putrequest(method, path)
        if data is not None:
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders()
        if data is not None:
            try:
                conn.send(data)
            except (BrokenPipeError, ConnectionResetError):
                # The server answered (413) before reading the whole body; read its answer.
                pass
        r = conn.getresponse()
        status, raw = r.status, r.read()
    finally:
        conn.close()
    described = f"{method} {path} -> {status} {raw[:400]!r}"
    if status == 200:
        return "ok", described
    code = json.loads(raw)["error"]["code"]
    assert STATUS_OF.get(code) == status, f"status {status} does not match code {code}: {described}"
    return code, described


async def run_mcp_http(listener: Listener, case: Case) -> tuple[str, str]:
    url = f"http://{listener.host}:{listener.port}/mcp"
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(CALL_TIMEOUT_S, read=60), trust_env=False) as http:
        try:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
                    await session.initialize()
                    return await call_mcp(session, case)
        except BaseExceptionGroup as group:
            leaves = list(_leaves(group))
            if len(leaves) == 1:
                raise leaves[0] from None
            raise


async def run_mcp_stdio(store: Path, case: Case) -> tuple[str, str]:
    async with open_server(store) as srv:
        return await call_mcp(srv.session, case)


# --------------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("case", "surface"), list(_params()))
async def test_hostile_input(world: World, case: Case, surface: str):
    before = store_digest(world.store)
    if surface == "cli":
        got, described = run_cli(world.store, case)
    elif surface == "rest":
        got, described = run_rest(world.rest, case)
    elif surface == "mcp-stdio":
        got, described = await run_mcp_stdio(world.store, case)
    else:
        got, described = await run_mcp_http(world.mcp_http, case)
    want, why = case.differs.get(surface, (case.expect, ""))
    assert got == want, f"{case.name} on {surface}: expected {want}{f' ({why})' if why else ''}, got {got}: {described}"
    assert store_digest(world.store) == before, f"{case.name} on {surface} changed the memory directory"
