"""End-to-end tests of memdir's MCP server (`memdir serve`), driven by the official Python MCP SDK.

Every test starts real `memdir serve` processes over stdio on a fresh store
(see conftest.py). What is checked is the contract of SPEC.md sections 5 and 7
and src/mcp/: the handshake, both tool profiles and their schemas, the result
shape of every tool (structuredContent and the JSON text agree), tool errors
(`isError: true`, `{"error": {code, message, hints, ...}}`) that leave the store
as it was, JSON-RPC errors for unknown tools, read-your-writes between server
processes, and concurrent writers on one store.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import MCPError

from conftest import MEMDIR_BIN, REPO_ROOT, cargo_version, content_agrees, server_env, store_digest

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

DEFAULT_TOOLS = [
    "memory_search",
    "memory_fetch",
    "memory_overview",
    "memory_ingest",
    "memory_read",
    "memory_write",
    "memory_append",
    "memory_list",
    "memory_history",
    "memory_delete",
    "memory_status",
]
FULL_ONLY_TOOLS = [
    "memory_search_semantic",
    "memory_context",
    "memory_delta",
    "memory_compact",
    "memory_restore",
    "memory_blame",
    "memory_review",
    "memory_forget",
    "memory_doctor",
    "memory_sync",
    "sync_manifest",
    "sync_diff",
    "sync_pull",
    "sync_push",
    "note_read",
    "note_write",
    "note_append",
    "note_edit",
    "note_list",
    "memory",
    "note_delete",
    "note_rename",
    "note_history",
    "note_diff",
    "note_restore",
]
ALL_TOOLS = DEFAULT_TOOLS + FULL_ONLY_TOOLS
READ_ONLY_TOOLS = {
    "memory_search",
    "memory_fetch",
    "memory_overview",
    "memory_read",
    "memory_list",
    "memory_history",
    "memory_status",
    "memory_search_semantic",
    "memory_blame",
    "memory_context",
    "memory_delta",
    "memory_doctor",
    "sync_manifest",
    "sync_diff",
    "sync_pull",
    "note_read",
    "note_list",
    "note_history",
    "note_diff",
}
HASH_RE = re.compile(r"^[0-9a-f]{64}$")
ZERO_HASH = "0" * 64
TOKEN_BUDGET = 2500

# Valid arguments for every tool on the seeded store (see `seed`); the schema-driven invalid
# cases are derived from these by breaking one argument at a time.
VALID_ARGS: dict[str, dict[str, Any]] = {
    "memory_search": {"query": "alpha"},
    "memory_fetch": {"session_id": "s1"},
    "memory_overview": {},
    "memory_sync": {"remote": "http://127.0.0.1:9"},
    "sync_manifest": {},
    "sync_diff": {"buckets": {}},
    "sync_pull": {"want": []},
    "sync_push": {"items": []},
    "memory_ingest": {"session_id": "s1", "content": "a valid chunk"},
    "memory_read": {"category": "base"},
    "memory_write": {"category": "base", "data": {"k": "v"}},
    "memory_append": {"category": "journal", "data": {"e": 1}},
    "memory_list": {},
    "memory_history": {"category": "base"},
    "memory_delete": {"category": "base"},
    "memory_status": {},
    "memory_search_semantic": {"query": "alpha"},
    "memory_context": {"categories": ["base"]},
    "memory_delta": {"category": "base", "since_hash": ZERO_HASH},
    "memory_compact": {},
    "memory_restore": {"category": "base", "version": "1"},
    "memory_blame": {"category": "base"},
    "memory_review": {"category": "base", "note": "checked"},
    "memory_forget": {"query": "alpha", "dry_run": True},
    "memory_doctor": {},
    "note_read": {"path": "base.md"},
    "note_write": {"path": "base.md", "text": "# Base\n\nrewritten\n"},
    "note_append": {"path": "base.md", "text": "- appended"},
    "note_edit": {"path": "base.md", "insert_line": 0, "insert_text": "top"},
    "note_list": {},
    "memory": {"command": "view", "path": "/memories"},
    "note_delete": {"path": "base.md"},
    "note_rename": {"from": "base.md", "to": "moved.md"},
    "note_history": {"path": "base.md"},
    "note_diff": {"path": "base.md"},
    "note_restore": {"path": "base.md", "version": "1"},
}
# Tools whose VALID_ARGS call removes or moves what the others act on: test_every_tool_called
# runs them last, in this order.
LAST_TOOLS = ["memory_delete", "memory_restore", "note_delete", "note_restore", "note_rename"]


async def seed(srv) -> dict[str, Any]:
    """A small store: document `base`, log `journal`, session `s1` with three chunks."""
    w = await srv.call("memory_write", {"category": "base", "data": {"a": 1, "b": "two"}})
    await srv.call("memory_append", {"category": "journal", "data": {"e": 0}})
    await srv.call(
        "memory_ingest",
        {
            "chunks": [
                {"session_id": "s1", "content": "alpha one"},
                {"session_id": "s1", "content": "bravo two"},
                {"session_id": "s1", "content": "charlie three"},
            ]
        },
    )
    return {"base_hash": w["new_hash"]}


async def seed_notes(srv) -> None:
    """Notes for the full profile's note tools: `base.md` (with `alpha` twice) and `other.md`."""
    await srv.call("note_write", {"path": "base.md", "text": "# Base\n\nalpha one\nalpha two\n"})
    await srv.call("note_write", {"path": "other.md", "text": "other\n"})


def read_data(r: dict[str, Any]) -> Any:
    """The document of a memory_read result: named `data` today; `content` is accepted too."""
    assert ("data" in r) or ("content" in r), f"memory_read result has neither data nor content: {r!r}"
    return r["data"] if "data" in r else r["content"]


def chunk_hits(search: dict[str, Any], containing: str | None = None) -> list[dict[str, Any]]:
    """Chunk rows of a search result; with `containing`, only those whose text has that word
    (a neighbour of a hit may rank too: memdir propagates a share of its score)."""
    return [r for r in search["results"] if "session_id" in r and (containing is None or containing in r["content"])]


def category_hits(search: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [r for r in search["results"] if r.get("category") == name]


def walk_schemas(schema: Any, path: str = "$"):
    """Yields (path, subschema) for every schema position of a JSON Schema."""
    yield path, schema
    if not isinstance(schema, dict):
        return
    for k in ("properties", "patternProperties", "$defs", "definitions"):
        for name, sub in (schema.get(k) or {}).items():
            yield from walk_schemas(sub, f"{path}.{k}.{name}")
    for k in ("items", "not", "if", "then", "else", "contains", "propertyNames"):
        if k in schema:
            yield from walk_schemas(schema[k], f"{path}.{k}")
    for k in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(k) or []):
            yield from walk_schemas(sub, f"{path}.{k}[{i}]")


def raw_tools_list(store: Path, *serve_args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """tools/list over a bare JSON-RPC exchange (no SDK), exactly as the server sent it."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pytest", "version": "0"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    proc = subprocess.run(
        [str(MEMDIR_BIN), "serve", *serve_args],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        timeout=30,
        env=server_env(store, **(env or {})),
    )
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("id") == 2:
            assert "result" in msg, msg
            return msg["result"]
    raise AssertionError(f"no tools/list response; stdout={proc.stdout!r} stderr={proc.stderr!r}")


# --------------------------------------------------------------------------------------------
# Handshake and tool listing
# --------------------------------------------------------------------------------------------


async def test_initialize(store, mcp_server):
    async with mcp_server(store) as srv:
        init = srv.init
        assert init.server_info.name == "memdir"
        assert init.server_info.version == cargo_version()
        assert init.capabilities.tools is not None
        instructions = init.instructions or ""
        assert "memory_search" in instructions
        assert "memory_write" in instructions
        # Initialize does no store work: the store is not even created by it.
        assert not store.exists()


async def test_initialize_on_missing_store_then_reads_work(store, mcp_server):
    """Read tools on a store that does not exist yet answer without creating it."""
    async with mcp_server(store) as srv:
        status = await srv.call("memory_status")
        assert status["exists"] is False
        assert (status["sessions"], status["chunks"], status["categories"]) == (0, 0, 0)
        assert (await srv.call("memory_list"))["categories"] == []
        assert (await srv.call("memory_overview"))["sessions"] == []
        s = await srv.call("memory_search", {"query": "anything"})
        assert s["results"] == []
        err = await srv.error("memory_read", {"category": "base"})
        assert err["code"] == "not_found"
        assert not store.exists()


@pytest.mark.parametrize(
    "how",
    [
        pytest.param({}, id="no-flag"),
        pytest.param({"profile": "default"}, id="--tools-default"),
        pytest.param({"env": {"MEMDIR_TOOLS": "default"}}, id="MEMDIR_TOOLS=default"),
    ],
)
async def test_tools_list_default_profile(store, mcp_server, how):
    async with mcp_server(store, **how) as srv:
        tools = (await srv.session.list_tools()).tools
        names = [t.name for t in tools]
        assert len(names) == len(set(names)), f"duplicate tool names: {names}"
        assert sorted(names) == sorted(DEFAULT_TOOLS)


@pytest.mark.parametrize(
    "how",
    [
        pytest.param({"profile": "full"}, id="--tools-full"),
        pytest.param({"env": {"MEMDIR_TOOLS": "full"}}, id="MEMDIR_TOOLS=full"),
        pytest.param({"profile": "compat"}, id="--tools-compat"),
    ],
)
async def test_tools_list_full_profile(store, mcp_server, how):
    async with mcp_server(store, **how) as srv:
        tools = (await srv.session.list_tools()).tools
        names = [t.name for t in tools]
        assert len(names) == len(set(names)), f"duplicate tool names: {names}"
        assert sorted(names) == sorted(ALL_TOOLS)


async def test_flag_wins_over_env_profile(store, mcp_server):
    async with mcp_server(store, profile="default", env={"MEMDIR_TOOLS": "full"}) as srv:
        names = {t.name for t in (await srv.session.list_tools()).tools}
        assert names == set(DEFAULT_TOOLS)


async def test_unknown_profile_refuses_to_start(store, mcp_server, tmp_path):
    errlog_path = tmp_path / "stderr.txt"
    with open(errlog_path, "w") as errlog:
        with pytest.raises(Exception) as info:
            async with mcp_server(store, profile="bogus", errlog=errlog):
                pass
    # The SDK reports the closed connection (possibly wrapped in exception groups).
    def flatten(e: BaseException):
        yield e
        for sub in getattr(e, "exceptions", []):
            yield from flatten(sub)

    assert any(isinstance(e, MCPError) for e in flatten(info.value)), repr(info.value)
    err = errlog_path.read_text()
    assert "invalid" in err and "bogus" in err, err
    assert not store.exists()


@pytest.mark.parametrize("profile", ["default", "full"])
async def test_tool_schemas_are_plain(store, mcp_server, profile):
    """Every inputSchema is an object schema with a properties map, no $defs/$ref, and no
    boolean schemas in any schema position (`additionalProperties: false` is allowed: it is a
    keyword value, not a subschema clients need to interpret)."""
    async with mcp_server(store, profile=profile) as srv:
        tools = (await srv.session.list_tools()).tools
    for t in tools:
        s = t.input_schema
        assert isinstance(s, dict), t.name
        assert s.get("type") == "object", t.name
        assert isinstance(s.get("properties"), dict), t.name
        dumped = json.dumps(s)
        assert "$defs" not in dumped and "definitions" not in dumped and "$ref" not in dumped, t.name
        for path, sub in walk_schemas(s):
            assert isinstance(sub, dict), f"{t.name}: boolean schema at {path}"
        for r in s.get("required", []):
            assert r in s["properties"], f"{t.name}: required {r} is not a property"
        jsonschema.Draft202012Validator.check_schema(s)
        assert t.description and len(t.description) > 20, t.name
        for name, ps in s["properties"].items():
            assert ps.get("description") or name == "chunks", f"{t.name}.{name} has no description"


@pytest.mark.parametrize("profile", ["default", "full"])
async def test_tool_annotations(store, mcp_server, profile):
    async with mcp_server(store, profile=profile) as srv:
        tools = (await srv.session.list_tools()).tools
    for t in tools:
        a = t.annotations
        assert a is not None, t.name
        if t.name in READ_ONLY_TOOLS:
            assert a.read_only_hint is True, t.name
        else:
            assert a.read_only_hint is not True, f"{t.name} changes the store but claims readOnlyHint"
    by_name = {t.name: t for t in tools}
    assert by_name["memory_delete"].annotations.destructive_hint is True
    if profile == "full":
        assert by_name["memory_compact"].annotations.destructive_hint is True
        assert by_name["memory_forget"].annotations.destructive_hint is True
        for name in ("note_write", "note_edit", "note_delete", "note_rename", "note_restore", "memory"):
            assert by_name[name].annotations.destructive_hint is True, name
        assert by_name["note_append"].annotations.destructive_hint is not True


def test_valid_args_conform_to_schemas(store):
    """The arguments the tests treat as valid are valid per the advertised schemas."""
    listed = {t["name"]: t for t in raw_tools_list(store, "--tools", "full")["tools"]}
    assert set(listed) == set(VALID_ARGS)
    for name, args in VALID_ARGS.items():
        jsonschema.validate(args, listed[name]["inputSchema"], cls=jsonschema.Draft202012Validator)


def test_tools_list_size(store, report):
    """The default tools/list stays small: at most 10,000 characters (about 2,500 tokens at four
    characters a token), so it lists no output schemas; the full profile lists them."""
    default = raw_tools_list(store)
    full = raw_tools_list(store, "--tools", "full")
    assert sorted(t["name"] for t in default["tools"]) == sorted(DEFAULT_TOOLS)
    assert not any("outputSchema" in t for t in default["tools"])
    assert all("outputSchema" in t for t in full["tools"])
    d_chars = len(json.dumps(default, separators=(",", ":"), ensure_ascii=False))
    f_chars = len(json.dumps(full, separators=(",", ":"), ensure_ascii=False))
    no_schemas = {"tools": [{k: v for k, v in t.items() if k != "outputSchema"} for t in full["tools"]]}
    f_bare = len(json.dumps(no_schemas, separators=(",", ":"), ensure_ascii=False))
    report(f"tools/list default: {d_chars} chars ~ {d_chars // 4} tokens (budget {TOKEN_BUDGET})")
    report(f"tools/list full:    {f_chars} chars ~ {f_chars // 4} tokens ({f_bare} without output schemas)")
    assert d_chars <= 4 * TOKEN_BUDGET, f"default tools/list is {d_chars} chars ~{d_chars // 4} tokens"


# --------------------------------------------------------------------------------------------
# Every tool with valid arguments
# --------------------------------------------------------------------------------------------


async def test_ingest_single_and_batch(store, mcp_server):
    async with mcp_server(store) as srv:
        r = await srv.call(
            "memory_ingest",
            {"session_id": "sess-a", "content": "first note", "project": "proj", "metadata": {"role": "user"}},
        )
        assert r["session_id"] == "sess-a"
        assert r["position"] == 0
        assert r["ok"] is True
        r = await srv.call("memory_ingest", {"session_id": "sess-a", "content": "second note"})
        assert (r["session_id"], r["position"], r["ok"]) == ("sess-a", 1, True)

        b = await srv.call(
            "memory_ingest",
            {
                "chunks": [
                    {"session_id": "sess-a", "content": "third note"},
                    {"session_id": "sess-b", "content": "other session", "metadata": {"title": "B"}},
                    {"session_id": "sess-a", "content": "fourth note", "project": "proj"},
                ]
            },
        )
        assert b["ok"] is True
        assert b.get("count") == 3
        rows = b["chunks"]
        assert [(c["session_id"], c["position"], c["ok"]) for c in rows] == [
            ("sess-a", 2, True),
            ("sess-b", 0, True),
            ("sess-a", 3, True),
        ]
        f = await srv.call("memory_fetch", {"session_id": "sess-a"})
        assert [c["content"] for c in f["chunks"]] == ["first note", "second note", "third note", "fourth note"]
        assert f["chunks"][0]["metadata"] == {"role": "user"}
        assert f["chunks"][0]["project"] == "proj"


async def test_ingest_batch_is_all_or_nothing(store, mcp_server):
    async with mcp_server(store) as srv:
        await srv.call("memory_ingest", {"session_id": "s", "content": "kept"})
        before = store_digest(store)
        err = await srv.error(
            "memory_ingest",
            {"chunks": [{"session_id": "s", "content": "good"}, {"session_id": "s", "content": "   "}]},
        )
        assert err["code"] == "invalid"
        assert err.get("index") == 1
        assert store_digest(store) == before
        f = await srv.call("memory_fetch", {"session_id": "s"})
        assert [c["content"] for c in f["chunks"]] == ["kept"]


async def test_search_result_shape(store, mcp_server):
    async with mcp_server(store) as srv:
        await srv.call(
            "memory_ingest",
            {"chunks": [{"session_id": "s1", "content": f"c{i} " + w} for i, w in enumerate(
                ["alpha", "bravo", "the postgres server refused", "delta", "echo", "foxtrot", "golf"])]},
        )
        s = await srv.call("memory_search", {"query": "postgres"})
        assert set(s) >= {"results", "engine"}
        assert isinstance(s["engine"], str) and s["engine"] not in ("", "empty")
        hits = chunk_hits(s)
        assert hits, s
        top = hits[0]
        for k in ("session_id", "position", "content", "score", "context"):
            assert k in top, f"row lacks {k}: {top!r}"
        assert (top["session_id"], top["position"]) == ("s1", 2)
        assert "postgres" in top["content"]
        assert isinstance(top["score"], (int, float)) and top["score"] > 0
        ctx = top["context"]
        # Default 3 per side, clipped at 0; the hit itself is not repeated.
        assert [c["position"] for c in ctx] == [0, 1, 3, 4, 5]
        for c in ctx:
            assert set(c) == {"position", "content"}
        # Scores are ordered.
        scores = [r["score"] for r in s["results"]]
        assert scores == sorted(scores, reverse=True)

        s1 = await srv.call("memory_search", {"query": "postgres", "context": 1, "limit": 1})
        assert len(s1["results"]) == 1
        assert [c["position"] for c in s1["results"][0]["context"]] == [1, 3]
        s0 = await srv.call("memory_search", {"query": "postgres", "context": 0, "limit": 1})
        assert s0["results"][0]["context"] == []


async def test_search_empty_query(store, mcp_server):
    async with mcp_server(store) as srv:
        await seed(srv)
        for q in ("", "   "):
            s = await srv.call("memory_search", {"query": q})
            assert s["engine"] == "empty"
            assert s["results"] == []


async def test_search_modes_and_filters(store, mcp_server):
    async with mcp_server(store) as srv:
        await srv.call(
            "memory_ingest",
            {
                "chunks": [
                    {"session_id": "s1", "content": "connect failed: ECONNREFUSED 127.0.0.1:5432", "project": "api"},
                    {"session_id": "s1", "content": "we moved to port 6543 afterwards", "project": "api"},
                    {"session_id": "s2", "content": "the refused connection was a firewall", "project": "web"},
                ]
            },
        )
        await srv.call("memory_write", {"category": "projects", "data": {"api": {"db": "postgres on port 5432"}}})

        exact = await srv.call("memory_search", {"query": "ECONNREFUSED 127.0.0.1:5432", "kind": "chunk"})
        assert exact["engine"] == "exact"
        assert [(r["session_id"], r["position"]) for r in exact["results"]] == [("s1", 0)]

        forced = await srv.call("memory_search", {"query": "127.0.0.1:5432", "mode": "exact"})
        assert forced["engine"] == "exact"
        assert all("127.0.0.1:5432" in r["content"] for r in forced["results"])

        by_session = await srv.call("memory_search", {"query": "refused connection", "session_id": "s2"})
        assert by_session["results"] and all(r.get("session_id") == "s2" for r in by_session["results"])

        by_project = await srv.call("memory_search", {"query": "refused", "project": "web"})
        assert by_project["results"] and all(r.get("project") == "web" for r in by_project["results"])

        cats = await srv.call("memory_search", {"query": "postgres", "kind": "category"})
        hit = category_hits(cats, "projects")
        assert hit, cats
        assert set(hit[0]) >= {"category", "key_path", "score"}
        assert HASH_RE.match(hit[0]["hash"])

        limited = await srv.call("memory_search", {"query": "port", "limit": 1})
        assert len(limited["results"]) == 1


async def test_fetch_pages(store, mcp_server):
    async with mcp_server(store) as srv:
        await srv.call("memory_ingest", {"chunks": [{"session_id": "long", "content": f"chunk {i}"} for i in range(7)]})
        f = await srv.call("memory_fetch", {"session_id": "long", "limit": 3})
        assert f["session_id"] == "long"
        assert [c["position"] for c in f["chunks"]] == [0, 1, 2]
        assert all(set(c) >= {"position", "content"} for c in f["chunks"])
        assert f["next_position"] == 3
        f2 = await srv.call("memory_fetch", {"session_id": "long", "position": f["next_position"], "limit": 3})
        assert [c["content"] for c in f2["chunks"]] == ["chunk 3", "chunk 4", "chunk 5"]
        f3 = await srv.call("memory_fetch", {"session_id": "long", "position": 6})
        assert [c["position"] for c in f3["chunks"]] == [6]
        assert f3["next_position"] is None
        past = await srv.call("memory_fetch", {"session_id": "long", "position": 100})
        assert past["chunks"] == []


async def test_overview(store, mcp_server):
    async with mcp_server(store) as srv:
        await srv.call("memory_ingest", {"session_id": "older", "content": "Planning the release\nmore"})
        await srv.call("memory_ingest", {"session_id": "newer", "content": "x", "metadata": {"title": "Bug triage"}, "project": "p"})
        await srv.call("memory_ingest", {"session_id": "newer", "content": "y"})
        o = await srv.call("memory_overview", {})
        sessions = o["sessions"]
        assert [s["id"] for s in sessions] == ["newer", "older"]  # newest first
        for s in sessions:
            assert set(s) >= {"id", "title", "message_count", "start_time", "last_active"}
            assert s["start_time"] <= s["last_active"]
        by_id = {s["id"]: s for s in sessions}
        assert by_id["newer"]["message_count"] == 2
        assert by_id["newer"]["title"] == "Bug triage"
        assert by_id["older"]["title"] == "Planning the release"
        assert [s["id"] for s in (await srv.call("memory_overview", {"days": 0}))["sessions"]] == ["newer", "older"]
        assert [s["id"] for s in (await srv.call("memory_overview", {"project": "p"}))["sessions"]] == ["newer"]
        page = await srv.call("memory_overview", {"limit": 1, "offset": 1})
        assert [s["id"] for s in page["sessions"]] == ["older"]


async def test_write_read_merge(store, mcp_server):
    async with mcp_server(store) as srv:
        w1 = await srv.call("memory_write", {"category": "base", "data": {"name": "Ada", "lang": "en"}, "reason": "first"})
        assert w1["previous_hash"] is None
        assert HASH_RE.match(w1["new_hash"])
        assert isinstance(w1["timestamp"], str) and w1["timestamp"]

        r = await srv.call("memory_read", {"category": "base"})
        assert read_data(r) == {"name": "Ada", "lang": "en"}
        meta = r["meta"]
        assert meta["hash"] == w1["new_hash"]
        assert meta["updated_by"] == "test"
        assert meta["updated_at"]
        assert meta["size_bytes"] == (store / "categories" / "base.json").stat().st_size

        w2 = await srv.call("memory_write", {"category": "base", "data": {"lang": None, "tz": "UTC"}, "merge": True})
        assert w2["previous_hash"] == w1["new_hash"]
        assert w2["new_hash"] != w1["new_hash"]
        assert read_data(await srv.call("memory_read", {"category": "base"})) == {"name": "Ada", "tz": "UTC"}

        only = await srv.call("memory_read", {"category": "base", "fields": "tz, nope"})
        assert read_data(only) == {"tz": "UTC"}

        # Writing the same content again changes nothing.
        before = store_digest(store)
        same = await srv.call("memory_write", {"category": "base", "data": {"name": "Ada", "tz": "UTC"}})
        assert same["new_hash"] == same["previous_hash"] == w2["new_hash"]
        assert store_digest(store) == before

        # Replace (no merge) drops keys not given.
        w3 = await srv.call("memory_write", {"category": "base", "data": {"only": True}, "expected_hash": w2["new_hash"]})
        assert w3["previous_hash"] == w2["new_hash"]
        assert read_data(await srv.call("memory_read", {"category": "base"})) == {"only": True}

        old = await srv.call("memory_read", {"category": "base", "version": 1})
        assert read_data(old) == {"name": "Ada", "lang": "en"}
        assert old["meta"]["hash"] == w1["new_hash"]


async def test_write_cas_conflict(store, mcp_server):
    async with mcp_server(store) as srv:
        created = await srv.call("memory_write", {"category": "prefs", "data": {"v": 1}, "expected_hash": "absent"})
        h = created["new_hash"]
        before = store_digest(store)
        for expected in ("absent", ZERO_HASH):
            err = await srv.error("memory_write", {"category": "prefs", "data": {"v": 2}, "expected_hash": expected})
            assert err["code"] == "conflict"
            assert err["current_hash"] == h
            assert err["hints"]
        assert store_digest(store) == before
        ok = await srv.call("memory_write", {"category": "prefs", "data": {"v": 2}, "expected_hash": h})
        assert ok["previous_hash"] == h
        # expected_hash on a category that does not exist is a conflict too.
        err = await srv.error("memory_write", {"category": "ghost", "data": {}, "expected_hash": h})
        assert err["code"] == "conflict"
        assert err.get("current_hash") is None


async def test_append_log(store, mcp_server):
    async with mcp_server(store) as srv:
        for i in range(4):
            a = await srv.call("memory_append", {"category": "events", "data": {"n": i}, "max_entries": 3})
            assert HASH_RE.match(a["new_hash"])
        assert a["entries"] == 3
        log = read_data(await srv.call("memory_read", {"category": "events"}))
        assert log["_kind"] == "log"
        assert [e["data"]["n"] for e in log["entries"]] == [1, 2, 3]
        assert all(set(e) >= {"id", "ts", "data"} for e in log["entries"])
        ids = [e["id"] for e in log["entries"]]
        assert ids == sorted(ids)
        lst = await srv.call("memory_list")
        assert {c["name"]: c.get("kind") for c in lst["categories"]}["events"] == "log"

        # A write to a log and an append to a document are refused.
        await srv.call("memory_write", {"category": "doc", "data": {"x": 1}})
        before = store_digest(store)
        assert (await srv.error("memory_write", {"category": "events", "data": {"x": 1}}))["code"] == "conflict"
        assert (await srv.error("memory_append", {"category": "doc", "data": {"x": 1}}))["code"] == "conflict"
        assert store_digest(store) == before


async def test_list(store, mcp_server):
    async with mcp_server(store) as srv:
        w = await srv.call("memory_write", {"category": "b-doc", "data": {"x": 1}})
        await srv.call("memory_append", {"category": "a-log", "data": {"x": 1}})
        lst = await srv.call("memory_list")
        cats = {c["name"]: c for c in lst["categories"]}
        assert set(cats) == {"b-doc", "a-log"}
        for c in cats.values():
            assert set(c) >= {"name", "hash", "updated_at", "updated_by", "size_bytes"}
            assert c["updated_by"] == "test"
        assert cats["b-doc"]["hash"] == w["new_hash"]
        assert cats["b-doc"]["size_bytes"] == (store / "categories" / "b-doc.json").stat().st_size


async def test_history_and_diff(store, mcp_server):
    async with mcp_server(store) as srv:
        await srv.call("memory_write", {"category": "base", "data": {"a": 1}, "reason": "create"})
        await srv.call("memory_write", {"category": "base", "data": {"b": 2}, "merge": True, "reason": "add b"})
        w3 = await srv.call("memory_write", {"category": "base", "data": {"a": 3}, "merge": True})
        h = await srv.call("memory_history", {"category": "base"})
        versions = h["versions"]
        assert [v["version"] for v in versions] == [3, 2, 1]  # newest first
        for v in versions:
            assert set(v) >= {"id", "hash", "reason", "actor", "timestamp"}
            assert v["actor"] == "test"
        assert versions[0]["hash"] == w3["new_hash"]
        assert [v["reason"] for v in versions][1:] == ["add b", "create"]
        assert len((await srv.call("memory_history", {"category": "base", "limit": 1}))["versions"]) == 1

        d = await srv.call("memory_history", {"category": "base", "diff_from": 1, "diff_to": 3})
        diff = d["diff"]["diff"] if isinstance(d["diff"], dict) else d["diff"]
        assert '-  "a": 1' in diff and '+  "a": 3' in diff and '+  "b": 2' in diff
        by_id = await srv.call("memory_history", {"category": "base", "diff_from": versions[1]["id"]})
        diff2 = by_id["diff"]["diff"] if isinstance(by_id["diff"], dict) else by_id["diff"]
        assert '+  "a": 3' in diff2 and '"b": 2' in diff2


async def test_delete(store, mcp_server):
    async with mcp_server(store) as srv:
        w = await srv.call("memory_write", {"category": "tmp", "data": {"x": 1}})
        before = store_digest(store)
        err = await srv.error("memory_delete", {"category": "tmp", "expected_hash": ZERO_HASH})
        assert err["code"] == "conflict" and err["current_hash"] == w["new_hash"]
        assert store_digest(store) == before
        d = await srv.call("memory_delete", {"category": "tmp", "expected_hash": w["new_hash"], "reason": "cleanup"})
        assert d.get("deleted") is True
        assert not (store / "categories" / "tmp.json").exists()
        assert (await srv.error("memory_read", {"category": "tmp"}))["code"] == "not_found"
        assert "tmp" not in {c["name"] for c in (await srv.call("memory_list"))["categories"]}
        # History is kept, with the delete on top.
        h = await srv.call("memory_history", {"category": "tmp"})
        assert [v.get("op") for v in h["versions"]][:2] == ["delete", "write"]
        assert (await srv.error("memory_delete", {"category": "tmp"}))["code"] == "not_found"


async def test_status_counts(store, mcp_server):
    async with mcp_server(store) as srv:
        await seed(srv)
        await srv.call("memory_ingest", {"session_id": "s2", "content": "another"})
        st = await srv.call("memory_status")
        assert st["sessions"] == 2
        assert st["chunks"] == 4
        assert st["categories"] == 2
        assert st.get("logs") == 1
        assert isinstance(st["size_bytes"], int) and st["size_bytes"] > 0


async def test_search_semantic_full_profile(store, mcp_server):
    async with mcp_server(store, profile="full") as srv:
        await seed(srv)
        s = await srv.call("memory_search_semantic", {"query": "charlie", "limit": 2})
        assert s["engine"] == "keyword-fallback"
        hits = chunk_hits(s)
        assert hits and hits[0]["content"] == "charlie three"
        for k in ("session_id", "position", "content", "score", "context"):
            assert k in hits[0]
        assert len(s["results"]) <= 2
        e = await srv.call("memory_search_semantic", {"query": ""})
        assert e["engine"] == "empty" and e["results"] == []


async def test_context_full_profile(store, mcp_server):
    async with mcp_server(store, profile="full") as srv:
        await seed(srv)
        c = await srv.call("memory_context", {"categories": ["base", "journal", "missing"], "fields": "a"})
        assert set(c["categories"]) == {"base", "journal"}
        assert read_data(c["categories"]["base"]) == {"a": 1}
        assert c["missing"] == ["missing"]
        # A hostile name is reported for that entry, and nothing is touched.
        before = store_digest(store)
        h = await srv.call("memory_context", {"categories": ["../x"]})
        assert h["categories"] == {}
        assert h["errors"]["../x"]["code"] == "invalid"
        assert store_digest(store) == before


async def test_delta_full_profile(store, mcp_server):
    async with mcp_server(store, profile="full") as srv:
        ids = await seed(srv)
        h = ids["base_hash"]
        assert (await srv.call("memory_delta", {"category": "base", "since_hash": h}))["status"] == "unchanged"
        w = await srv.call("memory_write", {"category": "base", "data": {"c": 3}, "merge": True})
        ch = await srv.call("memory_delta", {"category": "base", "since_hash": h})
        assert ch["status"] == "changed"
        assert ch["hash"] == w["new_hash"]
        assert read_data(ch) == {"a": 1, "b": "two", "c": 3}
        await srv.call("memory_delete", {"category": "base"})
        assert (await srv.call("memory_delta", {"category": "base", "since_hash": w["new_hash"]}))["status"] == "deleted"


async def test_compact_full_profile(store, mcp_server):
    async with mcp_server(store, profile="full") as srv:
        for i in range(6):
            await srv.call("memory_write", {"category": "busy", "data": {"i": i}})
        await srv.call("memory_write", {"category": "quiet", "data": {"i": 0}})
        c = await srv.call("memory_compact", {"category": "busy", "keep_versions": 2})
        assert c["removed"] == 4
        h = await srv.call("memory_history", {"category": "busy"})
        assert [v["version"] for v in h["versions"]] == [6, 5]
        assert read_data(await srv.call("memory_read", {"category": "busy"})) == {"i": 5}
        all_ = await srv.call("memory_compact", {})
        assert all_["removed"] == 0
        assert len(list((store / "history").rglob("*.json"))) == 3


async def test_restore_full_profile(store, mcp_server):
    async with mcp_server(store, profile="full") as srv:
        await srv.call("memory_write", {"category": "base", "data": {"v": 1}})
        await srv.call("memory_write", {"category": "base", "data": {"v": 2}})
        r = await srv.call("memory_restore", {"category": "base", "version": 1, "reason": "undo"})
        assert HASH_RE.match(r["new_hash"])
        assert read_data(await srv.call("memory_read", {"category": "base"})) == {"v": 1}
        await srv.call("memory_delete", {"category": "base"})
        hist = (await srv.call("memory_history", {"category": "base"}))["versions"]
        tomb = hist[0]
        assert tomb["op"] == "delete"
        # A tombstone is not restorable; the store stays as it is.
        before = store_digest(store)
        err = await srv.error("memory_restore", {"category": "base", "version": tomb["version"]})
        assert err["code"] == "invalid"
        assert store_digest(store) == before
        # Restore after delete, by id.
        v2 = next(v for v in hist if v["version"] == 2)
        await srv.call("memory_restore", {"category": "base", "version": v2["id"], "expected_hash": "absent"})
        assert read_data(await srv.call("memory_read", {"category": "base"})) == {"v": 2}


async def test_doctor_full_profile(store, mcp_server):
    async with mcp_server(store, profile="full") as srv:
        await seed(srv)
        await srv.call("memory_search", {"query": "alpha"})
        d = await srv.call("memory_doctor")
        assert Path(d["dir"]) == store
        assert d["dir_source"] == "environment MEMDIR_DIR"
        assert d["version"] == cargo_version()
        assert d["status"]["chunks"] == 3
        assert d["checks"]["ok"] is True, d["checks"]
        assert d["checks"]["problems"] == []


async def test_every_tool_called(store, mcp_server):
    """Each tool of the full profile answers its VALID_ARGS call on a seeded store."""
    async with mcp_server(store, profile="full") as srv:
        await seed(srv)
        await seed_notes(srv)
        for name in ALL_TOOLS:
            if name in LAST_TOOLS:
                continue
            if name == "memory":
                # The memory-tool protocol answers its own string, not JSON (test_memory_tool.py).
                res = await srv.raw(name, VALID_ARGS[name])
                assert not res.is_error and res.structured_content == {"result": res.content[0].text}, res
                continue
            await srv.call(name, VALID_ARGS[name])
        for name in LAST_TOOLS:
            await srv.call(name, VALID_ARGS[name])


# --------------------------------------------------------------------------------------------
# Bad input: a tool error with a code, and the store as it was
# --------------------------------------------------------------------------------------------

BIG_CONTENT = "x" * (256 * 1024 + 1)
BIG_DATA = {"blob": "y" * (1024 * 1024 + 10)}
BIG_ENTRY = {"blob": "z" * (64 * 1024 + 10)}
LONG_REASON = "r" * 1001
HOSTILE = ["../x", "..", ".", "/etc/passwd", "a/b", "a\\b", "", "a\x00b", " padded "]
# Note paths may have folders (a/b.md), but no empty, hidden or '..' component.
NOTE_HOSTILE = ["../x.md", "..", ".", "/etc/passwd", "a//b.md", "a/", ".hidden.md", "a\\b.md", "", "a\x00b.md", " padded "]
# note_delete and note_rename also take folders, which may be spelled with a trailing '/'.
NOTE_OR_FOLDER_HOSTILE = [h for h in NOTE_HOSTILE if h != "a/"]

INVALID_CASES: dict[str, list[tuple[dict[str, Any], str]]] = {
    "memory_search": [
        ({}, "invalid"),
        ({"query": 5}, "invalid"),
        ({"query": "x", "limit": "5"}, "invalid"),
        ({"query": "x", "limit": 0}, "invalid"),
        ({"query": "x", "limit": 1001}, "invalid"),
        ({"query": "x", "limit": -1}, "invalid"),
        ({"query": "x", "limit": 2.5}, "invalid"),
        ({"query": "x", "bogus": 1}, "invalid"),
        ({"query": "x", "mode": "weird"}, "invalid"),
        ({"query": "x", "kind": "bad"}, "invalid"),
        ({"query": "x", "context": 21}, "invalid"),
        ({"query": "x", "since": "not a time"}, "invalid"),
        ({"query": "x", "full": "yes"}, "invalid"),
        ({"query": "q" * 10_001}, "too_large"),
    ],
    "memory_fetch": [
        ({}, "invalid"),
        ({"session_id": 5}, "invalid"),
        ({"session_id": ""}, "invalid"),
        ({"session_id": "s1", "limit": "5"}, "invalid"),
        ({"session_id": "s1", "limit": 0}, "invalid"),
        ({"session_id": "s1", "limit": 1001}, "invalid"),
        ({"session_id": "s1", "position": -1}, "invalid"),
        ({"session_id": "s1", "bogus": 1}, "invalid"),
        ({"session_id": "no-such-session"}, "not_found"),
    ],
    "memory_overview": [
        ({"days": "7"}, "invalid"),
        ({"days": -1}, "invalid"),
        ({"limit": 0}, "invalid"),
        ({"limit": 1001}, "invalid"),
        ({"offset": -1}, "invalid"),
        ({"project": 5}, "invalid"),
        ({"bogus": 1}, "invalid"),
    ],
    "memory_ingest": [
        ({}, "invalid"),
        ({"session_id": "s1"}, "invalid"),
        ({"content": "no session"}, "invalid"),
        ({"session_id": "s1", "content": ""}, "invalid"),
        ({"session_id": "s1", "content": "  \n "}, "invalid"),
        ({"session_id": "s1", "content": 5}, "invalid"),
        ({"session_id": 5, "content": "x"}, "invalid"),
        ({"session_id": "", "content": "x"}, "invalid"),
        ({"session_id": "a\x00b", "content": "x"}, "invalid"),
        ({"session_id": "s" * 257, "content": "x"}, "invalid"),
        ({"session_id": "s1", "content": "x", "bogus": 1}, "invalid"),
        ({"session_id": "s1", "content": "x", "metadata": "str"}, "invalid"),
        ({"session_id": "s1", "content": "x", "metadata": [1]}, "invalid"),
        ({"session_id": "s1", "content": "x", "project": 5}, "invalid"),
        ({"session_id": "s1", "content": "x", "project": "bad\nproject"}, "invalid"),
        ({"session_id": "s1", "content": BIG_CONTENT}, "too_large"),
        ({"session_id": "s1", "content": "x", "metadata": {"m": "m" * (16 * 1024)}}, "too_large"),
        ({"chunks": []}, "invalid"),
        ({"chunks": "x"}, "invalid"),
        ({"chunks": [{"session_id": "s1", "content": "ok"}, {"session_id": "s1"}]}, "invalid"),
        ({"chunks": [{"session_id": "s1", "content": "ok"}, {"session_id": "s1", "content": "x", "bogus": 1}]}, "invalid"),
        ({"chunks": [{"session_id": "s1", "content": "ok"}], "session_id": "s1"}, "invalid"),
        ({"chunks": [{"session_id": "s1", "content": "ok"}, {"session_id": "s1", "content": BIG_CONTENT}]}, "too_large"),
    ],
    "memory_read": [
        ({}, "invalid"),
        ({"category": 5}, "invalid"),
        *[({"category": h}, "invalid") for h in HOSTILE],
        ({"category": "base", "bogus": 1}, "invalid"),
        ({"category": "base", "version": True}, "invalid"),
        ({"category": "base", "version": -1}, "invalid"),
        ({"category": "base", "fields": 5}, "invalid"),
        ({"category": "nope"}, "not_found"),
        ({"category": "base", "version": 99}, "not_found"),
    ],
    "memory_write": [
        ({"category": "base"}, "invalid"),
        ({"data": {"a": 1}}, "invalid"),
        ({"category": "base", "data": "a string"}, "invalid"),
        ({"category": "base", "data": '{"a": 1}'}, "invalid"),
        ({"category": "base", "data": [1, 2]}, "invalid"),
        ({"category": "base", "data": 5}, "invalid"),
        ({"category": "base", "data": None}, "invalid"),
        *[({"category": h, "data": {"a": 1}}, "invalid") for h in HOSTILE],
        ({"category": 5, "data": {"a": 1}}, "invalid"),
        ({"category": "base", "data": {"a": 1}, "bogus": 1}, "invalid"),
        ({"category": "base", "data": {"a": 1}, "merge": "yes"}, "invalid"),
        ({"category": "base", "data": {"a": 1}, "expected_hash": "abc"}, "invalid"),
        ({"category": "base", "data": {"a": 1}, "expected_hash": 5}, "invalid"),
        ({"category": "base", "data": {"a": 1}, "reason": 5}, "invalid"),
        ({"category": "base", "data": {"_kind": "log"}}, "invalid"),
        ({"category": "base", "data": {"a": 1}, "reason": LONG_REASON}, "too_large"),
        ({"category": "base", "data": BIG_DATA}, "too_large"),
        ({"category": "journal", "data": {"a": 1}}, "conflict"),
        ({"category": "base", "data": {"a": 9}, "expected_hash": "absent"}, "conflict"),
        ({"category": "base", "data": {"a": 9}, "expected_hash": ZERO_HASH}, "conflict"),
    ],
    "memory_append": [
        ({"category": "journal"}, "invalid"),
        ({"data": {"e": 1}}, "invalid"),
        ({"category": "journal", "data": "s"}, "invalid"),
        ({"category": "journal", "data": [1]}, "invalid"),
        *[({"category": h, "data": {"e": 1}}, "invalid") for h in HOSTILE],
        ({"category": "journal", "data": {"e": 1}, "bogus": 1}, "invalid"),
        ({"category": "journal", "data": {"e": 1}, "max_entries": 0}, "invalid"),
        ({"category": "journal", "data": {"e": 1}, "max_entries": "5"}, "invalid"),
        ({"category": "journal", "data": {"e": 1}, "max_entries": 100_001}, "invalid"),
        ({"category": "journal", "data": {"e": 1}, "max_age_days": 0}, "invalid"),
        ({"category": "journal", "data": {"e": 1}, "max_age_days": 36_501}, "invalid"),
        ({"category": "journal", "data": BIG_ENTRY}, "too_large"),
        ({"category": "base", "data": {"e": 1}}, "conflict"),
    ],
    "memory_list": [
        ({"bogus": 1}, "invalid"),
    ],
    "memory_history": [
        ({}, "invalid"),
        ({"category": 5}, "invalid"),
        *[({"category": h}, "invalid") for h in HOSTILE],
        ({"category": "base", "limit": "5"}, "invalid"),
        ({"category": "base", "limit": 0}, "invalid"),
        ({"category": "base", "limit": 1001}, "invalid"),
        ({"category": "base", "bogus": 1}, "invalid"),
        ({"category": "base", "diff_from": [1]}, "invalid"),
        ({"category": "base", "diff_to": {"v": 1}}, "invalid"),
        ({"category": "nope"}, "not_found"),
        ({"category": "base", "diff_from": 99}, "not_found"),
    ],
    "memory_delete": [
        ({}, "invalid"),
        ({"category": 5}, "invalid"),
        *[({"category": h}, "invalid") for h in HOSTILE],
        ({"category": "base", "bogus": 1}, "invalid"),
        ({"category": "base", "expected_hash": "abc"}, "invalid"),
        ({"category": "base", "reason": LONG_REASON}, "too_large"),
        ({"category": "nope"}, "not_found"),
        ({"category": "base", "expected_hash": ZERO_HASH}, "conflict"),
    ],
    "memory_status": [
        ({"bogus": 1}, "invalid"),
    ],
    "memory_search_semantic": [
        ({}, "invalid"),
        ({"query": 5}, "invalid"),
        ({"query": "x", "limit": "5"}, "invalid"),
        ({"query": "x", "limit": 0}, "invalid"),
        ({"query": "x", "limit": 1001}, "invalid"),
        ({"query": "x", "mode": "bm25"}, "invalid"),
    ],
    "memory_context": [
        ({}, "invalid"),
        ({"categories": "base"}, "invalid"),
        ({"categories": [5]}, "invalid"),
        ({"categories": ["base"], "fields": 5}, "invalid"),
        ({"categories": ["base"], "bogus": 1}, "invalid"),
    ],
    "memory_delta": [
        ({}, "invalid"),
        ({"category": "base"}, "invalid"),
        ({"since_hash": ZERO_HASH}, "invalid"),
        ({"category": "base", "since_hash": 5}, "invalid"),
        *[({"category": h, "since_hash": ZERO_HASH}, "invalid") for h in HOSTILE],
        ({"category": "base", "since_hash": ZERO_HASH, "bogus": 1}, "invalid"),
        ({"category": "nope", "since_hash": ZERO_HASH}, "not_found"),
    ],
    "memory_compact": [
        ({"keep_versions": 0}, "invalid"),
        ({"keep_versions": "5"}, "invalid"),
        ({"keep_versions": 100_001}, "invalid"),
        *[({"category": h}, "invalid") for h in HOSTILE],
        ({"bogus": 1}, "invalid"),
        ({"category": "nope"}, "not_found"),
    ],
    "memory_blame": [
        ({}, "invalid"),
        ({"category": 5}, "invalid"),
        *[({"category": h}, "invalid") for h in HOSTILE],
        ({"category": "base", "bogus": 1}, "invalid"),
        ({"category": "base", "path": "k"}, "invalid"),
        ({"category": "base", "path": "/nope"}, "invalid"),
        ({"category": "nope"}, "not_found"),
    ],
    "memory_review": [
        ({}, "invalid"),
        ({"category": 5}, "invalid"),
        *[({"category": h}, "invalid") for h in HOSTILE],
        ({"category": "base", "bogus": 1}, "invalid"),
        ({"key": "k"}, "invalid"),
        ({"category": "base", "stale": -1}, "invalid"),
        ({"stale": "soon"}, "invalid"),
        ({"chunk": "memdir://sessions/s1/99"}, "not_found"),
        ({"category": "base", "key": "nope"}, "not_found"),
        ({"category": "nope"}, "not_found"),
    ],
    "memory_restore": [
        ({}, "invalid"),
        ({"category": "base"}, "invalid"),
        ({"version": 1}, "invalid"),
        ({"category": "base", "version": [1]}, "invalid"),
        ({"category": "base", "version": -1}, "invalid"),
        *[({"category": h, "version": 1}, "invalid") for h in HOSTILE],
        ({"category": "base", "version": 1, "bogus": 1}, "invalid"),
        ({"category": "base", "version": 1, "expected_hash": "abc"}, "invalid"),
        ({"category": "base", "version": 1, "reason": LONG_REASON}, "too_large"),
        ({"category": "base", "version": 99}, "not_found"),
        ({"category": "nope", "version": 1}, "not_found"),
        ({"category": "base", "version": 1, "expected_hash": ZERO_HASH}, "conflict"),
    ],
    "memory_forget": [
        ({}, "invalid"),
        ({"bogus": 1}, "invalid"),
        ({"session_id": "s1", "query": "alpha"}, "invalid"),
        ({"chunk_ids": ["x:0"]}, "invalid"),
        ({"session_id": "s1", "chunk_ids": []}, "invalid"),
        ({"session_id": "s1", "chunk_ids": ["nope:0"]}, "not_found"),
        ({"session_id": "nope"}, "not_found"),
        ({"query": ""}, "invalid"),
        ({"query": "alpha", "limit": 0}, "invalid"),
        ({"category": "base"}, "invalid"),
        ({"category": "base", "version": 99}, "not_found"),
        *[({"session_id": h}, "invalid") for h in HOSTILE if h in ("", "a\x00b")],
    ],
    "memory_doctor": [
        ({"bogus": 1}, "invalid"),
    ],
    "memory_sync": [
        ({"bogus": 1}, "invalid"),
        ({"remote": "http://127.0.0.1:9", "strategy": "coin_flip"}, "invalid"),
    ],
    "sync_manifest": [
        ({"bogus": 1}, "invalid"),
    ],
    "sync_diff": [
        ({"buckets": {"history/x": [{"path": "../../etc/passwd", "len": 1, "hash": "0" * 64}]}}, "invalid"),
        ({"buckets": []}, "invalid"),
    ],
    "sync_pull": [
        ({"want": [{"path": "history/../x.json"}]}, "invalid"),
        ({"want": "all"}, "invalid"),
    ],
    "sync_push": [
        ({"items": [{"path": "sessions/s/r.jsonl", "hash": "0" * 64, "data": "{}\n"}]}, "corrupt"),
        ({"items": [{"path": "categories/x.json", "hash": "0" * 64, "data": "{}"}]}, "invalid"),
        ({"format": "other/9", "items": []}, "invalid"),
    ],
    # Notes (seeded by seed_notes: base.md with `alpha` on lines 3 and 4, other.md).
    "note_read": [
        ({}, "invalid"),
        ({"path": 5}, "invalid"),
        *[({"path": h}, "invalid") for h in NOTE_HOSTILE],
        ({"path": "base.md", "bogus": 1}, "invalid"),
        ({"path": "base.md", "view_range": [0, 1]}, "invalid"),
        ({"path": "base.md", "view_range": [1]}, "invalid"),
        ({"path": "base.md", "view_range": "1-2"}, "invalid"),
        ({"path": "base.md", "version": True}, "invalid"),
        ({"path": "base.md", "as_of": "not a time"}, "invalid"),
        ({"path": "nope.md"}, "not_found"),
        ({"path": "base.md", "version": 99}, "not_found"),
    ],
    "note_write": [
        ({"path": "base.md"}, "invalid"),
        ({"text": "x"}, "invalid"),
        ({"path": "base.md", "text": 5}, "invalid"),
        *[({"path": h, "text": "x"}, "invalid") for h in NOTE_HOSTILE],
        ({"path": "base.md", "text": "x", "bogus": 1}, "invalid"),
        ({"path": "base.md", "text": "x", "expected_hash": "abc"}, "invalid"),
        ({"path": "base.md", "text": "x", "reason": 5}, "invalid"),
        ({"path": "base.md", "text": "x", "reason": LONG_REASON}, "too_large"),
        ({"path": "big.md", "text": BIG_CONTENT}, "too_large"),
        ({"path": "base.md", "text": "x", "expected_hash": "absent"}, "conflict"),
        ({"path": "base.md", "text": "x", "expected_hash": ZERO_HASH}, "conflict"),
    ],
    "note_append": [
        ({"path": "base.md"}, "invalid"),
        ({"text": "x"}, "invalid"),
        ({"path": "base.md", "text": 5}, "invalid"),
        *[({"path": h, "text": "x"}, "invalid") for h in NOTE_HOSTILE],
        ({"path": "base.md", "text": "x", "bogus": 1}, "invalid"),
        ({"path": "base.md", "text": "x", "reason": LONG_REASON}, "too_large"),
        ({"path": "base.md", "text": BIG_CONTENT}, "too_large"),
        ({"path": "base.md", "text": "x", "expected_hash": ZERO_HASH}, "conflict"),
    ],
    "note_edit": [
        ({}, "invalid"),
        ({"path": "base.md"}, "invalid"),
        ({"path": "base.md", "insert_line": 0}, "invalid"),
        ({"path": "base.md", "old_str": "alpha one", "new_str": "x", "insert_line": 0, "insert_text": "y"}, "invalid"),
        *[({"path": h, "old_str": "a", "new_str": "b"}, "invalid") for h in NOTE_HOSTILE],
        ({"path": "base.md", "old_str": 5, "new_str": "b"}, "invalid"),
        ({"path": "base.md", "insert_line": -1, "insert_text": "y"}, "invalid"),
        ({"path": "base.md", "insert_line": 99, "insert_text": "y"}, "invalid"),
        ({"path": "base.md", "old_str": "alpha one", "new_str": "x", "bogus": 1}, "invalid"),
        ({"path": "base.md", "old_str": "zzz", "new_str": "y"}, "not_found"),
        ({"path": "nope.md", "old_str": "a", "new_str": "b"}, "not_found"),
        ({"path": "base.md", "old_str": "alpha", "new_str": "b"}, "conflict"),
        ({"path": "base.md", "old_str": "alpha one", "new_str": "b", "expected_hash": ZERO_HASH}, "conflict"),
    ],
    "note_list": [
        ({"bogus": 1}, "invalid"),
        ({"depth": 0}, "invalid"),
        ({"depth": "2"}, "invalid"),
        ({"folder": "../x"}, "invalid"),
        ({"folder": 5}, "invalid"),
        ({"folder": "nope"}, "not_found"),
    ],
    "note_delete": [
        ({}, "invalid"),
        ({"path": 5}, "invalid"),
        *[({"path": h}, "invalid") for h in NOTE_OR_FOLDER_HOSTILE],
        ({"path": "base.md", "bogus": 1}, "invalid"),
        ({"path": "base.md", "expected_hash": "abc"}, "invalid"),
        ({"path": "base.md", "reason": LONG_REASON}, "too_large"),
        ({"path": "nope.md"}, "not_found"),
        ({"path": "base.md", "expected_hash": ZERO_HASH}, "conflict"),
    ],
    "note_rename": [
        ({}, "invalid"),
        ({"from": "base.md"}, "invalid"),
        ({"to": "x.md"}, "invalid"),
        *[({"from": "base.md", "to": h}, "invalid") for h in NOTE_OR_FOLDER_HOSTILE],
        *[({"from": h, "to": "x.md"}, "invalid") for h in NOTE_OR_FOLDER_HOSTILE],
        ({"from": "base.md", "to": "base.md"}, "invalid"),
        ({"from": "base.md", "to": "x.md", "bogus": 1}, "invalid"),
        ({"from": "nope.md", "to": "x.md"}, "not_found"),
        ({"from": "base.md", "to": "other.md"}, "conflict"),
        ({"from": "base.md", "to": "x.md", "expected_hash": ZERO_HASH}, "conflict"),
    ],
    "note_history": [
        ({}, "invalid"),
        ({"path": 5}, "invalid"),
        *[({"path": h}, "invalid") for h in NOTE_HOSTILE],
        ({"path": "base.md", "limit": "2"}, "invalid"),
        ({"path": "base.md", "limit": 0}, "invalid"),
        ({"path": "base.md", "limit": 1001}, "invalid"),
        ({"path": "base.md", "bogus": 1}, "invalid"),
        ({"path": "nope.md"}, "not_found"),
    ],
    "note_diff": [
        ({}, "invalid"),
        *[({"path": h}, "invalid") for h in NOTE_HOSTILE],
        ({"path": "base.md", "from": [1]}, "invalid"),
        ({"path": "base.md", "to": True}, "invalid"),
        ({"path": "base.md", "bogus": 1}, "invalid"),
        ({"path": "nope.md"}, "not_found"),
        ({"path": "base.md", "from": 99}, "not_found"),
    ],
    "note_restore": [
        ({}, "invalid"),
        ({"path": "base.md"}, "invalid"),
        ({"version": 1}, "invalid"),
        ({"path": "base.md", "version": [1]}, "invalid"),
        ({"path": "base.md", "version": -1}, "invalid"),
        *[({"path": h, "version": 1}, "invalid") for h in NOTE_HOSTILE],
        ({"path": "base.md", "version": 1, "bogus": 1}, "invalid"),
        ({"path": "base.md", "version": 1, "expected_hash": "abc"}, "invalid"),
        ({"path": "base.md", "version": 1, "reason": LONG_REASON}, "too_large"),
        ({"path": "base.md", "version": 99}, "not_found"),
        ({"path": "nope.md", "version": 1}, "not_found"),
        ({"path": "base.md", "version": 1, "expected_hash": ZERO_HASH}, "conflict"),
    ],
    # The memory-tool protocol: a tool error is the protocol's own string (no JSON); the second
    # element is that string exactly.
    "memory": [
        ({}, "invalid argument command: missing field `command`"),
        ({"command": "view"}, "Error: Parameter `path` is required for command: view"),
        ({"command": "create", "path": "/memories/x.md"}, "Error: Parameter `file_text` is required for command: create"),
        ({"command": "bogus", "path": "/memories"}, "Error: Unknown command: bogus. The commands are view, create, str_replace, insert, delete and rename"),
        ({"command": "view", "path": "/etc/passwd"}, "Error: Path must start with /memories, got: /etc/passwd"),
        ({"command": "view", "path": "/memories/../x"}, "Error: Path /memories/../x would escape /memories directory"),
        ({"command": "create", "path": "/memories/%2e%2e/x.md", "file_text": "x"}, "Error: Path /memories/%2e%2e/x.md would escape /memories directory"),
        ({"command": "view", "path": "/memories/nope.md"}, "The path /memories/nope.md does not exist. Please provide a valid path."),
        ({"command": "create", "path": "/memories/base.md", "file_text": "x"}, "Error: File /memories/base.md already exists"),
        (
            {"command": "str_replace", "path": "/memories/base.md", "old_str": "alpha", "new_str": "x"},
            "No replacement was performed. Multiple occurrences of old_str `alpha` in lines: 3, 4. Please ensure it is unique",
        ),
        (
            {"command": "str_replace", "path": "/memories/base.md", "old_str": "zzz", "new_str": "x"},
            "No replacement was performed, old_str `zzz` did not appear verbatim in /memories/base.md.",
        ),
        (
            {"command": "insert", "path": "/memories/base.md", "insert_line": 99, "insert_text": "x"},
            "Error: Invalid `insert_line` parameter: 99. It should be within the range of lines of the file: [0, 4]",
        ),
        ({"command": "delete", "path": "/memories"}, "Error: Cannot delete the /memories directory itself"),
        ({"command": "delete", "path": "/memories/nope.md"}, "Error: The path /memories/nope.md does not exist"),
        (
            {"command": "rename", "old_path": "/memories/base.md", "new_path": "/memories/other.md"},
            "Error: The destination /memories/other.md already exists",
        ),
    ],
}


def short(args: dict[str, Any]) -> str:
    s = json.dumps(args)
    return s if len(s) <= 90 else s[:87] + "..."


MEMORY_INVALID_ARGUMENT = re.compile(r"^invalid argument (\S+): ")


async def memory_rejected(srv, args: dict[str, Any], text: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """`memory` with bad arguments: a tool error whose one text block is the protocol's string,
    `text` exactly (None: an `invalid argument FIELD: ...` string). Returns (what went wrong or
    None, {field, message} or None)."""
    before = store_digest(srv.store)
    res = await srv.raw("memory", args)
    texts = [c.text for c in res.content if getattr(c, "type", None) == "text"]
    got = texts[0] if len(texts) == 1 else None
    problem = None
    if res.is_error is not True or got is None or res.structured_content is not None:
        problem = f"memory {short(args)}: expected a tool error with one text block, got {res!r}"
    elif text is not None and got != text:
        problem = f"memory {short(args)}: expected {text!r}, got {got!r}"
    elif text is None and not MEMORY_INVALID_ARGUMENT.match(got):
        problem = f"memory {short(args)}: expected `invalid argument FIELD: ...`, got {got!r}"
    if store_digest(srv.store) != before:
        problem = (problem + "; and " if problem else f"memory {short(args)}: ") + "the store changed"
    m = MEMORY_INVALID_ARGUMENT.match(got or "")
    return problem, ({"field": m[1] if m else None, "message": got} if got is not None else None)


async def call_rejected(srv, name: str, args: dict[str, Any], code: str) -> tuple[str | None, dict[str, Any] | None]:
    """Calls a tool with bad arguments. Returns (what went wrong or None, the tool error or None)."""
    if name == "memory":
        assert code == "invalid", code
        return await memory_rejected(srv, args, None)
    before = store_digest(srv.store)
    res = await srv.raw(name, args)
    try:
        sc = content_agrees(res)
    except AssertionError as e:
        return f"{name} {short(args)}: {e}", None
    problem = None
    err = sc.get("error") if res.is_error is True and isinstance(sc.get("error"), dict) else None
    if res.is_error is not True:
        problem = f"{name} {short(args)}: expected isError with code {code!r}, got success {short(sc)}"
    elif err is None or not {"code", "message", "hints"} <= set(err):
        problem = f"{name} {short(args)}: malformed tool error {short(sc)}"
    elif err["code"] != code:
        problem = f"{name} {short(args)}: expected code {code!r}, got {err['code']!r} ({err['message']})"
    if store_digest(srv.store) != before:
        problem = (problem + "; and " if problem else f"{name} {short(args)}: ") + "the store changed"
    return problem, err


def test_invalid_cases_cover_every_tool():
    assert set(INVALID_CASES) == set(ALL_TOOLS)


@pytest.mark.parametrize("tool", ALL_TOOLS)
async def test_invalid_arguments(store, mcp_server, tool):
    """Each bad call is a tool error with the expected code, and changes no file."""
    async with mcp_server(store, profile="full") as srv:
        await seed(srv)
        await seed_notes(srv)
        problems = []
        for args, code in INVALID_CASES[tool]:
            if tool == "memory":
                p, _ = await memory_rejected(srv, args, code)
            else:
                p, _ = await call_rejected(srv, tool, args, code)
            if p:
                problems.append(p)
        assert not problems, "\n".join(problems)


def wrong_type_value(prop_schema: dict[str, Any]) -> Any:
    t = prop_schema.get("type")
    types = set(t) if isinstance(t, list) else {t}
    if types == {"string"}:
        # Not 12345: a version field is a string in its schema, yet a number is accepted as
        # the version number it is (clients send both); an object is wrong for every string.
        return {"not": "a string"}
    if types == {"integer"}:
        return "5"
    if types == {"boolean"}:
        return "yes"
    if types == {"object"}:
        return "not an object"
    if types == {"array"}:
        return "not an array"
    if types == {"integer", "string"}:
        return [1]
    if types == {"string", "array"}:
        return 12345
    raise AssertionError(f"no wrong-type value for {prop_schema}")


def schema_violations(name: str, schema: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(label, args, offending field) for one-argument breaks of VALID_ARGS[name] per its schema."""
    base = VALID_ARGS[name]
    out: list[tuple[str, dict[str, Any], str]] = []
    for req in schema.get("required", []):
        out.append((f"missing {req}", {k: v for k, v in base.items() if k != req}, req))
    out.append(("unknown argument", {**base, "bogus_arg": 1}, "bogus_arg"))
    for prop, ps in schema["properties"].items():
        bad = wrong_type_value(ps)
        args = {prop: bad} if (name, prop) == ("memory_ingest", "chunks") else {**base, prop: bad}
        out.append((f"{prop} wrong type", args, prop))
        if ps.get("type") == "integer":
            if "minimum" in ps:
                out.append((f"{prop} below minimum", {**base, prop: ps["minimum"] - 1}, prop))
            if "maximum" in ps and ps["maximum"] < 2**53:
                out.append((f"{prop} above maximum", {**base, prop: ps["maximum"] + 1}, prop))
        if "enum" in ps:
            out.append((f"{prop} not in enum", {**base, prop: "not-an-enum-value"}, prop))
    return out


async def run_schema_violations(store, mcp_server):
    """Runs every schema violation against a seeded full-profile server.

    Returns (case, tool error or None, problem or None) per case."""
    out = []
    async with mcp_server(store, profile="full") as srv:
        await seed(srv)
        await seed_notes(srv)
        tools = {t.name: t.input_schema for t in (await srv.session.list_tools()).tools}
        for name in ALL_TOOLS:
            schema = tools[name]
            validator = jsonschema.Draft202012Validator(schema)
            for label, args, field in schema_violations(name, schema):
                assert not validator.is_valid(args), f"test bug: {name} {label} is valid per the schema"
                problem, err = await call_rejected(srv, name, args, "invalid")
                out.append(((name, label, args, field), err, problem))
    return out


async def test_schema_violations_are_rejected(store, mcp_server):
    """Arguments that break the advertised inputSchema (missing required, unknown argument,
    wrong type, out of minimum/maximum, not in enum) are refused with code invalid."""
    results = await run_schema_violations(store, mcp_server)
    assert len(results) > 80
    problems = [p for _, _, p in results if p]
    assert not problems, f"{len(problems)} schema violations not refused:\n" + "\n".join(problems)


async def test_invalid_argument_errors_name_the_field(store, mcp_server):
    """A tool error for a bad argument names it in `field`, whichever tool it is."""
    results = await run_schema_violations(store, mcp_server)
    unnamed = []
    for (name, label, args, field), err, problem in results:
        if err is not None and err.get("field") != field:
            unnamed.append(f"{name} {label} {short(args)}: field={err.get('field')!r}, message={err['message']!r}")
    assert not unnamed, f"{len(unnamed)} errors do not name the offending argument:\n" + "\n".join(unnamed)


async def test_hostile_session_ids_stay_inside_the_store(store, mcp_server, tmp_path):
    ids = ["../../outside", "/etc/passwd", "a:b", "CON", "Case", "case", "..", ".", "sp ace", "ünï", "x" * 200]
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    async with mcp_server(store) as srv:
        for i, sid in enumerate(ids):
            r = await srv.call("memory_ingest", {"session_id": sid, "content": f"chunk of {i}"})
            assert (r["session_id"], r["position"]) == (sid, 0), sid
        for i, sid in enumerate(ids):
            f = await srv.call("memory_fetch", {"session_id": sid})
            assert [c["content"] for c in f["chunks"]] == [f"chunk of {i}"], sid
        o = await srv.call("memory_overview", {"limit": 100})
        assert sorted(s["id"] for s in o["sessions"]) == sorted(ids)
    assert sorted(p.name for p in tmp_path.iterdir() if p != store) == outside_before
    for p in (store / "sessions").rglob("*"):
        assert p.resolve().is_relative_to(store.resolve() / "sessions"), p


async def test_category_names_are_encoded_without_twins(store, mcp_server):
    names = ["Base", "base", "a:b", "CON", "ünï", "with space", "x" * 60]
    async with mcp_server(store) as srv:
        for n in names:
            await srv.call("memory_write", {"category": n, "data": {"name": n}})
        for n in names:
            assert read_data(await srv.call("memory_read", {"category": n})) == {"name": n}
        assert sorted(c["name"] for c in (await srv.call("memory_list"))["categories"]) == sorted(names)
    files = [p.name for p in (store / "categories").iterdir()]
    assert len(files) == len(names)
    assert len({f.lower() for f in files}) == len(files), f"case-only twins on disk: {files}"
    assert all(f.isascii() and ":" not in f for f in files), files


async def test_text_round_trips_exactly(store, mcp_server):
    text = "línea 1 — naïve café 😀\n日本語のテキスト\n\ttabbed \"quoted\" \\ back\u00a0slash " + "long " * 200
    async with mcp_server(store) as srv:
        await srv.call("memory_ingest", {"session_id": "ü-session", "content": text, "metadata": {"k": ["ü", 1, None]}})
        f = await srv.call("memory_fetch", {"session_id": "ü-session"})
        assert f["chunks"][0]["content"] == text
        assert f["chunks"][0]["metadata"] == {"k": ["ü", 1, None]}
        full = chunk_hits(await srv.call("memory_search", {"query": "naïve café", "full": True}))
        assert full and full[0]["content"] == text
        short_ = chunk_hits(await srv.call("memory_search", {"query": "naïve café"}))
        assert short_ and len(short_[0]["content"]) < len(text)
        assert chunk_hits(await srv.call("memory_search", {"query": "日本語"}))
        doc = {"emoji": "😀", "nested": {"list": [1, 2.5, True, None, "ü"]}, "empty": {}}
        await srv.call("memory_write", {"category": "unicode", "data": doc})
        assert read_data(await srv.call("memory_read", {"category": "unicode"})) == doc


async def test_hand_edits_are_adopted(store, mcp_server):
    """A file edited outside memdir is served as it is now: as a new version by `external`;
    a malformed edit affects only its own category and is never overwritten silently."""
    async with mcp_server(store, env={"MEMDIR_SCAN_INTERVAL_MS": "0"}) as srv:
        await srv.call("memory_write", {"category": "base", "data": {"fruit": "kumquat"}})
        await srv.call("memory_write", {"category": "other", "data": {"x": 1}})
        assert category_hits(await srv.call("memory_search", {"query": "kumquat"}), "base")

        (store / "categories" / "base.json").write_text('{\n  "fruit": "durian"\n}\n')
        r = await srv.call("memory_read", {"category": "base"})
        assert read_data(r) == {"fruit": "durian"}
        assert r["meta"]["updated_by"] == "external"
        assert not category_hits(await srv.call("memory_search", {"query": "kumquat"}), "base")
        assert category_hits(await srv.call("memory_search", {"query": "durian"}), "base")

        (store / "categories" / "base.json").write_text("{ broken")
        before = store_digest(store)
        err = await srv.error("memory_read", {"category": "base"})
        assert err["code"] == "corrupt" and HASH_RE.match(err["current_hash"])
        assert (await srv.error("memory_write", {"category": "base", "data": {"a": 1}}))["code"] == "corrupt"
        assert store_digest(store) == before
        assert read_data(await srv.call("memory_read", {"category": "other"})) == {"x": 1}
        assert "base" in (await srv.call("memory_status"))["malformed"]
        await srv.call("memory_write", {"category": "base", "data": {"fixed": True}, "expected_hash": err["current_hash"]})
        assert read_data(await srv.call("memory_read", {"category": "base"})) == {"fixed": True}


# --------------------------------------------------------------------------------------------
# Unknown tools are protocol errors
# --------------------------------------------------------------------------------------------


async def test_unknown_tool_is_jsonrpc_error(store, mcp_server):
    async with mcp_server(store) as srv:
        with pytest.raises(MCPError) as info:
            await srv.raw("memory_nonexistent", {})
        assert "memory_nonexistent" in str(info.value)
        # A full-profile tool is unknown in the default profile.
        for name in FULL_ONLY_TOOLS:
            with pytest.raises(MCPError):
                await srv.raw(name, VALID_ARGS[name])
        # The session is still usable afterwards.
        await srv.call("memory_status")
    assert not store.exists()


# --------------------------------------------------------------------------------------------
# Several server processes on one store
# --------------------------------------------------------------------------------------------


async def test_read_your_writes_across_processes(store, mcp_server):
    """What server A acknowledged, server B (already running, index built) sees at once."""
    async with mcp_server(store) as a, mcp_server(store) as b:
        await a.call("memory_ingest", {"session_id": "warm", "content": "warm up the index"})
        assert chunk_hits(await b.call("memory_search", {"query": "warm"}))  # B's index is now built

        r = await a.call("memory_ingest", {"session_id": "s1", "content": "the xylophone lives in the attic"})
        hits = chunk_hits(await b.call("memory_search", {"query": "xylophone"}), "xylophone")
        assert [(h["session_id"], h["position"]) for h in hits] == [("s1", r["position"])]
        assert [c["content"] for c in (await b.call("memory_fetch", {"session_id": "s1"}))["chunks"]] == [
            "the xylophone lives in the attic"
        ]
        assert "s1" in {s["id"] for s in (await b.call("memory_overview"))["sessions"]}

        w = await a.call("memory_write", {"category": "notes", "data": {"fruit": "kumquat"}})
        rb = await b.call("memory_read", {"category": "notes"})
        assert read_data(rb) == {"fruit": "kumquat"}
        assert rb["meta"]["hash"] == w["new_hash"]
        hit = category_hits(await b.call("memory_search", {"query": "kumquat"}), "notes")
        assert hit and hit[0]["hash"] == w["new_hash"]

        # An edit is never served stale.
        w2 = await a.call("memory_write", {"category": "notes", "data": {"fruit": "persimmon"}, "expected_hash": w["new_hash"]})
        assert not category_hits(await b.call("memory_search", {"query": "kumquat"}), "notes")
        hit = category_hits(await b.call("memory_search", {"query": "persimmon"}), "notes")
        assert hit and hit[0]["hash"] == w2["new_hash"]
        # B's compare-and-swap with the hash it saw before A's edit is a conflict.
        err = await b.error("memory_write", {"category": "notes", "data": {"fruit": "fig"}, "expected_hash": w["new_hash"]})
        assert err["code"] == "conflict" and err["current_hash"] == w2["new_hash"]

        # A delete is never served stale either.
        await a.call("memory_delete", {"category": "notes"})
        assert not category_hits(await b.call("memory_search", {"query": "persimmon"}), "notes")
        assert (await b.error("memory_read", {"category": "notes"}))["code"] == "not_found"
        assert "notes" not in {c["name"] for c in (await b.call("memory_list"))["categories"]}

        # And the other way round.
        await b.call("memory_append", {"category": "journal", "data": {"from": "b"}})
        log = read_data(await a.call("memory_read", {"category": "journal"}))
        assert [e["data"] for e in log["entries"]] == [{"from": "b"}]
        await b.call("memory_ingest", {"session_id": "s1", "content": "a quokka visited"})
        hits = chunk_hits(await a.call("memory_search", {"query": "quokka"}), "quokka")
        assert [(h["session_id"], h["position"]) for h in hits] == [("s1", 1)]
        st_a, st_b = await a.call("memory_status"), await b.call("memory_status")
        for k in ("sessions", "chunks", "categories"):
            assert st_a[k] == st_b[k]
        assert (st_a["sessions"], st_a["chunks"], st_a["categories"]) == (2, 3, 1)


async def test_own_write_visible_after_another_process_updated_the_index(store, mcp_server):
    """B ingests; A searches first (A brings the shared on-disk index up to date); B's next
    search must still see B's own acknowledged write."""
    async with mcp_server(store) as a, mcp_server(store) as b:
        await a.call("memory_ingest", {"session_id": "warm", "content": "warm up the index"})
        assert chunk_hits(await a.call("memory_search", {"query": "warm"}))
        assert chunk_hits(await b.call("memory_search", {"query": "warm"}))

        await b.call("memory_ingest", {"session_id": "s1", "content": "a quokka visited"})
        assert chunk_hits(await a.call("memory_search", {"query": "quokka"}), "quokka")
        hits = chunk_hits(await b.call("memory_search", {"query": "quokka"}), "quokka")
        assert [(h["session_id"], h["content"]) for h in hits] == [("s1", "a quokka visited")], (
            "B's search misses B's own acknowledged ingest once A has updated the index"
        )


async def test_edit_not_served_stale_after_another_process_updated_the_index(store, mcp_server):
    async with mcp_server(store) as a, mcp_server(store) as b:
        w = await a.call("memory_write", {"category": "notes", "data": {"fruit": "kumquat"}})
        assert category_hits(await a.call("memory_search", {"query": "kumquat"}), "notes")
        assert category_hits(await b.call("memory_search", {"query": "kumquat"}), "notes")

        w2 = await a.call("memory_write", {"category": "notes", "data": {"fruit": "persimmon"}, "expected_hash": w["new_hash"]})
        assert not category_hits(await a.call("memory_search", {"query": "kumquat"}), "notes")
        stale = category_hits(await b.call("memory_search", {"query": "kumquat"}), "notes")
        assert not stale, f"B serves the replaced text of notes from a stale index: {stale}"
        hit = category_hits(await b.call("memory_search", {"query": "persimmon"}), "notes")
        assert hit and hit[0]["hash"] == w2["new_hash"]


async def test_delete_not_served_stale_after_another_process_updated_the_index(store, mcp_server):
    async with mcp_server(store) as a, mcp_server(store) as b:
        await a.call("memory_write", {"category": "notes", "data": {"fruit": "kumquat"}})
        assert category_hits(await a.call("memory_search", {"query": "kumquat"}), "notes")
        assert category_hits(await b.call("memory_search", {"query": "kumquat"}), "notes")

        await a.call("memory_delete", {"category": "notes"})
        assert not category_hits(await a.call("memory_search", {"query": "kumquat"}), "notes")
        stale = category_hits(await b.call("memory_search", {"query": "kumquat"}), "notes")
        assert not stale, f"B serves the deleted category notes from a stale index: {stale}"


async def _barrier_servers(store, mcp_server, n: int, work):
    """Starts n servers on one store; once all are initialized, runs work(i, srv) concurrently."""
    barrier = asyncio.Barrier(n)

    async def one(i: int):
        async with mcp_server(store) as srv:
            await barrier.wait()
            return await work(i, srv)

    return await asyncio.gather(*(one(i) for i in range(n)))


async def test_concurrent_ingest_from_four_processes(store, mcp_server):
    """4 processes x 25 single-chunk ingests into one session: positions are exactly 0..99.

    The store exists beforehand (first use of a fresh store by several processes at once is
    test_concurrent_first_use_of_a_fresh_store)."""
    n, per = 4, 25
    async with mcp_server(store) as srv:
        await srv.call("memory_ingest", {"session_id": "other", "content": "the store exists"})

    async def work(i, srv):
        out = []
        for j in range(per):
            r = await srv.call("memory_ingest", {"session_id": "shared", "content": f"worker {i} chunk {j}"})
            assert r["ok"] is True and r["session_id"] == "shared"
            out.append(r["position"])
        return out

    results = await _barrier_servers(store, mcp_server, n, work)
    every = sorted(p for ps in results for p in ps)
    assert every == list(range(n * per)), f"positions are not 0..{n * per - 1}: {every}"
    for ps in results:
        assert ps == sorted(ps), "one process's chunks got positions out of order"

    async with mcp_server(store) as srv:
        f = await srv.call("memory_fetch", {"session_id": "shared", "limit": 1000})
        assert f.get("total", n * per) == n * per
        assert [c["position"] for c in f["chunks"]] == list(range(n * per))
        contents = [c["content"] for c in f["chunks"]]
        assert sorted(contents) == sorted(f"worker {i} chunk {j}" for i in range(n) for j in range(per))
        for i in range(n):
            mine = [c for c in contents if c.startswith(f"worker {i} ")]
            assert mine == [f"worker {i} chunk {j}" for j in range(per)]
        by_content = {c["content"]: c["position"] for c in f["chunks"]}
        for i, ps in enumerate(results):
            assert [by_content[f"worker {i} chunk {j}"] for j in range(per)] == ps
        st = await srv.call("memory_status")
        assert (st["sessions"], st["chunks"]) == (2, n * per + 1)
        hits = chunk_hits(await srv.call("memory_search", {"query": '"worker 3 chunk 24"', "kind": "chunk"}))
        assert [h["content"] for h in hits] == ["worker 3 chunk 24"]


async def test_concurrent_first_use_of_a_fresh_store(tmp_path, mcp_server):
    """Several MCP clients start at once on a store that does not exist yet (the first launch
    after install): every first write succeeds, and every server keeps working.

    The race is timing-dependent, so it is run for several rounds on fresh stores."""
    rounds, n = 30, 5
    problems = []
    for r in range(rounds):
        store = tmp_path / f"store{r}"

        async def work(i, srv):
            res = await srv.raw("memory_ingest", {"session_id": "first", "content": f"hello from {i}"})
            after = await srv.raw("memory_status", {})
            return res, after

        results = await _barrier_servers(store, mcp_server, n, work)
        for i, (res, after) in enumerate(results):
            if res.is_error:
                problems.append(f"round {r} server {i}: first ingest failed: {content_agrees(res)['error']}")
            if after.is_error:
                problems.append(f"round {r} server {i}: next call failed too: {content_agrees(after)['error']}")
        async with mcp_server(store) as srv:
            f = await srv.raw("memory_fetch", {"session_id": "first"})
            ok = sum(1 for res, _ in results if not res.is_error)
            got = 0 if f.is_error else len(content_agrees(f)["chunks"])
            assert got == ok, f"round {r}: {ok} acknowledged ingests but {got} chunks stored"
    assert not problems, f"{len(problems)} failures in {rounds} rounds of {n} servers:\n" + "\n".join(problems)


async def test_transient_startup_failure_does_not_poison_the_server(store, mcp_server):
    """A server whose first call finds the store busy answers `busy`, and works once the store
    is free again (it must not keep failing for the rest of its life)."""
    import fcntl

    async with mcp_server(store) as srv:
        await srv.call("memory_write", {"category": "base", "data": {"a": 1}})
    # The ledger is derived state that may be deleted at any time; the next open rebuilds it
    # from the files, under the store's write lock.
    for p in (store / ".memdir").glob("ledger.db*"):
        p.unlink()
    lock_file = open(store / ".memdir" / "lock", "a+")
    try:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        async with mcp_server(store, env={"MEMDIR_LOCK_TIMEOUT_MS": "200"}) as srv:
            err = await srv.error("memory_read", {"category": "base"})
            busy_code = err["code"]
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)
            res = await srv.raw("memory_read", {"category": "base"})
            sc = content_agrees(res)
            assert not res.is_error, f"still failing after the lock was released: {sc}"
            assert read_data(sc) == {"a": 1}
        assert busy_code == "busy", f"a held write lock is reported as {busy_code!r}: {err}"
    finally:
        lock_file.close()


async def test_concurrent_merges_lose_no_key(store, mcp_server):
    """4 processes merge distinct keys into one category at once: no key is lost."""
    n, per = 4, 8
    async with mcp_server(store) as srv:  # the store exists beforehand (see the fresh-store test)
        await srv.call("memory_write", {"category": "other", "data": {"the store": "exists"}})

    async def work(i, srv):
        for j in range(per):
            await srv.call("memory_write", {"category": "shared", "data": {f"k{i}_{j}": j}, "merge": True})

    await _barrier_servers(store, mcp_server, n, work)
    async with mcp_server(store) as srv:
        data = read_data(await srv.call("memory_read", {"category": "shared"}))
        assert data == {f"k{i}_{j}": j for i in range(n) for j in range(per)}
        h = await srv.call("memory_history", {"category": "shared", "limit": 1000})
        assert len(h["versions"]) == n * per


async def test_concurrent_cas_has_one_winner(store, mcp_server):
    n = 4
    async with mcp_server(store) as srv:
        base = (await srv.call("memory_write", {"category": "race", "data": {"v": 0}}))["new_hash"]

    async def work(i, srv):
        res = await srv.raw("memory_write", {"category": "race", "data": {"v": i + 1}, "expected_hash": base})
        return res.is_error, content_agrees(res)

    results = await _barrier_servers(store, mcp_server, n, work)
    winners = [sc for is_err, sc in results if not is_err]
    losers = [sc["error"] for is_err, sc in results if is_err]
    assert len(winners) == 1, results
    assert all(e["code"] == "conflict" and e["current_hash"] == winners[0]["new_hash"] for e in losers), losers
    async with mcp_server(store) as srv:
        r = await srv.call("memory_read", {"category": "race"})
        assert r["meta"]["hash"] == winners[0]["new_hash"]
