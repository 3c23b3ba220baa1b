"""Fixtures for the end-to-end tests of `memdir serve` (MCP over stdio).

The client is the official Python MCP SDK (`mcp`): every test spawns real
`memdir serve` processes through `stdio_client` and talks to them with a
`ClientSession`. Each test gets its own empty store in a temp directory.

The binary is `$MEMDIR_BIN`, by default `target/debug/memdir` under the repo
root (build it first with `cargo build`).
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

REPO_ROOT = Path(__file__).resolve().parents[2]


def cargo_version() -> str:
    """The version the binary reports: the workspace's, which every crate inherits."""
    import tomllib

    with open(REPO_ROOT / "Cargo.toml", "rb") as f:
        manifest = tomllib.load(f)
    version = manifest["package"]["version"]
    if isinstance(version, dict):
        version = manifest["workspace"]["package"]["version"]
    return version
MEMDIR_BIN = Path(os.environ.get("MEMDIR_BIN") or REPO_ROOT / "target" / "debug" / "memdir")

# Per-request timeout inside the client: a hung server fails a call, not the whole run.
CALL_TIMEOUT_S = 30.0


def server_env(store: Path, **extra: str) -> dict[str, str]:
    """The environment a test server runs with: only its own store and nothing else."""
    env = {
        "MEMDIR_DIR": str(store),
        "MEMDIR_DEVICE": "test",
        "HOME": str(store.parent),
        "PATH": os.environ["PATH"],
    }
    env.update(extra)
    return env


def content_agrees(result: Any) -> Any:
    """The JSON answer of a tool result: one text content block holding the lean JSON, and for
    a success the same value as structuredContent (a tool error carries text only)."""
    texts = [c for c in result.content if getattr(c, "type", None) == "text"]
    assert len(texts) == 1, f"exactly one text content block, got {result.content!r}"
    sc = result.structured_content
    if not result.is_error and isinstance(sc, dict) and set(sc) == {"result"} and isinstance(sc["result"], str):
        # A protocol tool (`memory`): the text is the protocol's string itself.
        assert texts[0].text == sc["result"], "the text is the result string"
        return sc
    answer = json.loads(texts[0].text)
    if result.is_error:
        assert result.structured_content is None, "a tool error is its text only"
    else:
        assert result.structured_content == answer, "structuredContent and the text agree"
    return answer


class Server:
    """One running `memdir serve` process and its MCP session."""

    def __init__(self, session: ClientSession, init: Any, store: Path):
        self.session = session
        self.init = init
        self.store = store

    async def raw(self, name: str, args: dict[str, Any] | None = None) -> Any:
        """The CallToolResult of one tools/call."""
        return await self.session.call_tool(name, args if args is not None else {}, read_timeout_seconds=CALL_TIMEOUT_S)

    async def call(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Calls a tool that must succeed; returns its structured content."""
        res = await self.raw(name, args)
        sc = content_agrees(res)
        assert not res.is_error, f"{name}({args!r}) failed: {sc!r}"
        assert isinstance(sc, dict)
        return sc

    async def error(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Calls a tool that must fail with a tool error; returns the `error` object."""
        res = await self.raw(name, args)
        sc = content_agrees(res)
        assert res.is_error is True, f"{name}({args!r}) should have failed, got {sc!r}"
        assert set(sc) == {"error"}, f"tool error body is {{error: ...}}, got {sc!r}"
        err = sc["error"]
        assert isinstance(err.get("code"), str) and err["code"], err
        assert isinstance(err.get("message"), str) and err["message"], err
        assert isinstance(err.get("hints"), list), err
        return err


@asynccontextmanager
async def open_server(
    store: Path,
    profile: str | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    errlog: Any = None,
) -> AsyncIterator[Server]:
    """Spawns `memdir serve` on `store` and yields an initialized session."""
    argv = ["serve"]
    if profile is not None:
        argv += ["--tools", profile]
    argv += args or []
    params = StdioServerParameters(command=str(MEMDIR_BIN), args=argv, env=server_env(store, **(env or {})))
    try:
        async with stdio_client(params, **({"errlog": errlog} if errlog is not None else {})) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
                init = await session.initialize()
                yield Server(session, init, store)
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap whatever the test raised; report the test's own error.
        leaves = list(_leaves(group))
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def _leaves(e: BaseException):
    if isinstance(e, BaseExceptionGroup):
        for sub in e.exceptions:
            yield from _leaves(sub)
    else:
        yield e


def store_digest(store: Path) -> dict[str, str]:
    """The user-visible content of a store: every file outside `.memdir/` and its hash.

    `.memdir/` (ledger, index, staging) is derived state and may change on reads.
    """
    out: dict[str, str] = {}
    if not store.exists():
        return out
    for p in sorted(store.rglob("*")):
        rel = p.relative_to(store)
        if rel.parts and rel.parts[0] == ".memdir":
            continue
        if p.is_file():
            out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def memdir_bin() -> Path:
    if not MEMDIR_BIN.is_file():
        pytest.fail(f"memdir binary not found at {MEMDIR_BIN}: run `cargo build` or set MEMDIR_BIN", pytrace=False)
    return MEMDIR_BIN


@pytest.fixture
def store(tmp_path: Path, memdir_bin: Path) -> Path:
    """A fresh, not yet created memory directory."""
    return tmp_path / "store"


@pytest.fixture
def mcp_server(memdir_bin: Path):
    """Factory: `async with mcp_server(store, profile="full") as srv: ...`."""
    return open_server


# Lines printed in pytest's terminal summary (e.g. the measured tools/list size).
REPORT: list[str] = []


@pytest.fixture
def report():
    """`report("...")` adds a line to the end-of-run summary."""
    return REPORT.append


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if REPORT:
        terminalreporter.section("memdir MCP measurements")
        for line in REPORT:
            terminalreporter.write_line(line)
