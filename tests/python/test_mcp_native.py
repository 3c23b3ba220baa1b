"""MCP beyond tools, with the official Python SDK: typed results, memories as resources, prompts.

Typed results: every tool lists an object `outputSchema`, and every tool's examples from the
operation table (`memdir ops`), run on a seeded store, answer with `structuredContent` that
validates against it and equals the lean JSON text. Resources: the templates, `resources/list`
paged by its cursor (status, categories, sessions), `resources/read` of every kind of URI, and
the URI every search hit and fetch page carries. A device the ACL keeps from a category neither
sees it listed nor reads it. Prompts: list and get, with their arguments checked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client, MCPError, StdioServerParameters, types

from conftest import CALL_TIMEOUT_S, MEMDIR_BIN, content_agrees, open_server, server_env
from test_surfaces import CLOCK, TABLE, seed

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MCP_OPS = [op for op in TABLE if op["mcp"]]


@pytest.fixture
def seeded(tmp_path: Path, memdir_bin: Path) -> Path:
    """The store every example of the table can act on (test_surfaces.seed)."""
    store = tmp_path / "store"
    seed(store)
    return store


# --------------------------------------------------------------------------------------------
# Typed results
# --------------------------------------------------------------------------------------------


async def test_every_tool_has_an_object_output_schema(seeded):
    async with open_server(seeded, profile="full", env=CLOCK) as srv:
        tools = (await srv.session.list_tools()).tools
    assert {t.name for t in tools} == {op["mcp"]["tool"] for op in MCP_OPS}
    for t in tools:
        s = t.output_schema
        assert isinstance(s, dict), f"{t.name} has no outputSchema"
        assert s.get("type") == "object", f"{t.name}: MCP wants an object schema, got {s.get('type')}"
        jsonschema.Draft202012Validator.check_schema(s)
        assert "$ref" not in json.dumps(s), f"{t.name}: outputSchema is inline"


@pytest.mark.parametrize(
    ("op", "args"),
    [pytest.param(op, ex["args"], id=f"{op['mcp']['tool']}-{ex['name']}") for op in MCP_OPS for ex in op["examples"]],
)
async def test_every_example_answers_structured_content_valid_against_its_schema(seeded, tmp_path, op, args):
    # Each example on its own copy: a delete or forget must not change what the next one sees.
    store = tmp_path / "copy"
    shutil.copytree(seeded, store, symlinks=True)
    async with open_server(store, profile="full", env=CLOCK) as srv:
        schema = {t.name: t.output_schema for t in (await srv.session.list_tools()).tools}[op["mcp"]["tool"]]
        res = await srv.raw(op["mcp"]["tool"], args)
    answer = content_agrees(res)
    assert not res.is_error, f"{op['name']} {args}: {answer}"
    jsonschema.validate(res.structured_content, schema, cls=jsonschema.Draft202012Validator)
    # The text is the lean JSON (Python may spell a float longer than Rust, never shorter).
    text = res.content[0].text
    assert len(text) <= len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))


async def test_a_tool_error_keeps_its_code_and_hints_as_text_only(seeded):
    async with open_server(seeded) as srv:
        err = await srv.error("memory_read", {"category": "nope"})
        assert err["code"] == "not_found" and err["hints"]
        res = await srv.raw("memory_write", {"category": "base", "data": {"x": 1}, "expected_hash": "0" * 64})
        assert res.is_error and res.structured_content is None
        assert json.loads(res.content[0].text)["error"]["code"] == "conflict"


# --------------------------------------------------------------------------------------------
# Resources
# --------------------------------------------------------------------------------------------


async def list_all(session) -> tuple[list[types.Resource], int]:
    """Every resource, following the cursor; and how many pages it took."""
    out: list[types.Resource] = []
    cursor = None
    pages = 0
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_resources(params=params)
        pages += 1
        out.extend(page.resources)
        cursor = page.next_cursor
        if not cursor:
            return out, pages
        assert pages < 100, "the cursor never ends"


def body(result: types.ReadResourceResult) -> Any:
    assert len(result.contents) == 1
    c = result.contents[0]
    assert c.mime_type == "application/json"
    return json.loads(c.text)


async def test_resource_templates_name_every_kind_of_memory(seeded):
    async with open_server(seeded) as srv:
        assert srv.init.capabilities.resources is not None
        templates = (await srv.session.list_resource_templates()).resource_templates
    got = {t.uri_template: t for t in templates}
    assert set(got) == {
        "memdir://sessions/{session_id}",
        "memdir://sessions/{session_id}/{position}",
        "memdir://categories/{name}",
        "memdir://categories/{name}/versions/{n}",
    }
    for t in templates:
        assert t.name and t.title and t.description and t.mime_type == "application/json"


async def test_resources_list_pages_through_categories_and_sessions(seeded):
    # Enough sessions for more than one page (50 resources a page).
    from test_surfaces import memdir

    lines = "\n".join(json.dumps({"session_id": f"extra-{i:03}", "content": f"note {i}"}) for i in range(60))
    assert memdir(seeded, "ingest", "--jsonl", "-", stdin=lines.encode()).returncode == 0
    async with open_server(seeded) as srv:
        resources, pages = await list_all(srv.session)
    assert pages == 2
    uris = [r.uri for r in resources]
    assert len(uris) == len(set(uris)), "no resource twice across pages"
    assert uris[0] == "memdir://status"
    cats = {r.name: r for r in resources if r.uri.startswith("memdir://categories/")}
    assert set(cats) == {"base", "projects", "scratch", "journal"}
    sessions = [r for r in resources if r.uri.startswith("memdir://sessions/")]
    assert len(sessions) == 62
    assert uris[1] == "ui://memdir/viewer"
    for r in resources:
        mime = "text/html;profile=mcp-app" if r.uri.startswith("ui://") else "application/json"
        assert r.name and r.title and r.description and r.mime_type == mime, r
    # A category's listed size is the size of what a read returns: the document as stored.
    async with open_server(seeded) as srv:
        base = await srv.session.read_resource("memdir://categories/base")
    assert cats["base"].size == len(base.contents[0].text.encode())


async def test_bad_cursor_and_unknown_uri_are_errors(seeded):
    async with open_server(seeded) as srv:
        with pytest.raises(MCPError) as e:
            await srv.session.list_resources(params=types.PaginatedRequestParams(cursor="nope"))
        assert e.value.error.code == types.INVALID_PARAMS
        for uri in ["memdir://nowhere", "memdir://categories/missing", "memdir://sessions/s1/99", "memdir://sessions/gone"]:
            with pytest.raises(MCPError) as e:
                await srv.session.read_resource(uri)
            assert e.value.error.code == -32002, uri


async def test_every_kind_of_resource_reads(seeded):
    async with open_server(seeded) as srv:
        s = srv.session
        base = await s.read_resource("memdir://categories/base")
        assert body(base) == {"editor": "helix", "name": "Ada"}
        meta = base.contents[0].meta["memdir/meta"]
        assert meta["version"] == 2 and len(meta["hash"]) == 64
        v1 = await s.read_resource("memdir://categories/base/versions/1")
        assert body(v1) == {"editor": "vim", "name": "Ada"}
        page = body(await s.read_resource("memdir://sessions/demo-session"))
        assert [c["position"] for c in page["chunks"]] == [0, 1]
        assert page["uri"] == "memdir://sessions/demo-session"
        rest = body(await s.read_resource("memdir://sessions/demo-session?position=1"))
        assert [c["position"] for c in rest["chunks"]] == [1]
        chunk = body(await s.read_resource("memdir://sessions/demo-session/1"))
        assert chunk["content"] == "We raised the pool timeout to 60 seconds."
        status = body(await s.read_resource("memdir://status"))
        assert status["sessions"] == 2 and status["categories"] == 4


async def test_search_hits_and_fetch_pages_carry_the_uri_that_reads_them(seeded):
    async with open_server(seeded) as srv:
        hits = (await srv.call("memory_search", {"query": "helix"}))["results"]
        assert {h["kind"] for h in hits} == {"chunk", "category"}
        for h in hits:
            read = body(await srv.session.read_resource(h["uri"]))
            if h["kind"] == "chunk":
                assert h["uri"] == f"memdir://sessions/{h['session_id']}/{h['position']}"
                assert read["position"] == h["position"] and "helix" in read["content"]
            else:
                assert h["uri"] == f"memdir://categories/{h['category']}"
                assert "helix" in json.dumps(read)
        page = await srv.call("memory_fetch", {"session_id": "other-session"})
        assert page["uri"] == "memdir://sessions/other-session"


async def test_names_that_need_escaping_round_trip_through_their_uri(tmp_path, memdir_bin):
    store = tmp_path / "store"
    async with open_server(store) as srv:
        await srv.call("memory_write", {"category": "a b", "data": {"k": 1}})
        await srv.call("memory_ingest", {"session_id": "x/y z", "content": "escaped"})
        resources, _ = await list_all(srv.session)
        uris = {r.uri for r in resources}
        assert {"memdir://categories/a%20b", "memdir://sessions/x%2Fy%20z"} <= uris
        assert body(await srv.session.read_resource("memdir://categories/a%20b")) == {"k": 1}
        assert body(await srv.session.read_resource("memdir://sessions/x%2Fy%20z/0"))["content"] == "escaped"


ACL = """
[acl]
admin_devices = ["laptop"]

[[acl.rules]]
device = "phone"
read = ["base", "journal"]
"""


async def test_a_category_hidden_by_the_acl_is_neither_listed_nor_read(seeded, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(ACL)
    env = {"MEMDIR_CONFIG": str(config), "MEMDIR_DEVICE": "phone"}
    async with open_server(seeded, env=env) as srv:
        resources, _ = await list_all(srv.session)
        names = {r.name for r in resources if r.uri.startswith("memdir://categories/")}
        assert names == {"base", "journal"}
        for uri in ["memdir://categories/projects", "memdir://categories/projects/versions/1"]:
            with pytest.raises(MCPError) as e:
                await srv.session.read_resource(uri)
            assert e.value.error.data["code"] == "forbidden", uri
        assert body(await srv.session.read_resource("memdir://categories/base"))["name"] == "Ada"
    # The admin device sees them all: the rule, not the resource code, hides them.
    async with open_server(seeded, env={**env, "MEMDIR_DEVICE": "laptop"}) as srv:
        resources, _ = await list_all(srv.session)
        names = {r.name for r in resources if r.uri.startswith("memdir://categories/")}
        assert names == {"base", "journal", "projects", "scratch"}


# --------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------


async def test_prompts_are_listed_with_their_arguments(seeded):
    async with open_server(seeded) as srv:
        assert srv.init.capabilities.prompts is not None
        prompts = {p.name: p for p in (await srv.session.list_prompts()).prompts}
    assert {"recall", "remember"} <= set(prompts)
    assert {(a.name, bool(a.required)) for a in prompts["recall"].arguments} == {("topic", True), ("project", False)}
    assert {(a.name, bool(a.required)) for a in prompts["remember"].arguments} == {("summary", False)}
    for p in prompts.values():
        assert p.title and p.description


async def test_prompts_get_puts_the_arguments_in_a_short_message(seeded):
    async with open_server(seeded) as srv:
        tools = {t.name for t in (await srv.session.list_tools()).tools}
        r = await srv.session.get_prompt("recall", {"topic": "pool timeout", "project": "web"})
        text = r.messages[0].content.text
        assert r.messages[0].role == "user"
        assert '"query": "pool timeout"' in text and '"project": "web"' in text
        assert "memory_search" in text and "memory_read" in text
        r = await srv.session.get_prompt("remember", {"summary": "the pool settings"})
        assert "memory_ingest" in r.messages[0].content.text and "the pool settings" in r.messages[0].content.text
        for p in (await srv.session.list_prompts()).prompts:
            args = {a.name: "x" for a in p.arguments or []}
            text = (await srv.session.get_prompt(p.name, args)).messages[0].content.text
            assert len(text) < 600, f"{p.name}: {len(text)} chars"
            named = {w for w in text.replace("{", " ").replace(",", " ").split() if w.startswith("memory_")}
            assert named <= tools, f"{p.name} names tools the default profile lacks: {named - tools}"
        with pytest.raises(MCPError) as e:
            await srv.session.get_prompt("recall", {})
        assert e.value.error.code == types.INVALID_PARAMS
        with pytest.raises(MCPError):
            await srv.session.get_prompt("nope", {})


# --------------------------------------------------------------------------------------------
# Completion and caching hints
# --------------------------------------------------------------------------------------------


async def test_template_and_prompt_arguments_complete_to_what_the_caller_may_see(seeded, tmp_path):
    async with open_server(seeded) as srv:
        s = srv.session
        assert srv.init.capabilities.completions is not None

        def ref(uri: str) -> types.ResourceTemplateReference:
            return types.ResourceTemplateReference(uri=uri)

        got = (await s.complete(ref("memdir://sessions/{session_id}"), {"name": "session_id", "value": "DEMO"})).completion
        assert (got.values, got.total, got.has_more) == (["demo-session"], 1, False)
        got = (await s.complete(ref("memdir://sessions/{session_id}/{position}"), {"name": "session_id", "value": ""})).completion
        assert sorted(got.values) == ["demo-session", "other-session"]
        got = (await s.complete(ref("memdir://categories/{name}"), {"name": "name", "value": "s"})).completion
        assert got.values == ["scratch"]
        got = (await s.complete(ref("memdir://categories/{name}/versions/{n}"), {"name": "n", "value": ""}, {"name": "base"})).completion
        assert sorted(got.values) == ["1", "2"]
        # Without the category in the context there is nothing to offer for n.
        got = (await s.complete(ref("memdir://categories/{name}/versions/{n}"), {"name": "n", "value": ""})).completion
        assert got.values == []
        got = (await s.complete(types.PromptReference(name="recall"), {"name": "project", "value": "w"})).completion
        assert got.values == ["web"]
        # An argument memdir has no values for completes to nothing, not an error.
        got = (await s.complete(types.PromptReference(name="recall"), {"name": "topic", "value": "x"})).completion
        assert got.values == []
        # A prompt or template memdir does not have is invalid params.
        for bad in [types.PromptReference(name="nope"), ref("memdir://nowhere/{x}")]:
            with pytest.raises(MCPError) as e:
                await s.complete(bad, {"name": "x", "value": ""})
            assert e.value.error.code == types.INVALID_PARAMS
    # The access list applies: a hidden category is not offered.
    config = tmp_path / "config.toml"
    config.write_text(ACL)
    async with open_server(seeded, env={"MEMDIR_CONFIG": str(config), "MEMDIR_DEVICE": "phone"}) as srv:
        got = (await srv.session.complete(types.ResourceTemplateReference(uri="memdir://categories/{name}"), {"name": "name", "value": ""})).completion
        assert sorted(got.values) == ["base", "journal"]


async def test_fixed_lists_carry_a_ttl_and_the_resource_list_does_not(seeded):
    """Caching hints are 2026-07-28's: a client on that version may keep the tool, prompt and
    template lists for an hour, and never the resource list."""
    params = StdioServerParameters(command=str(MEMDIR_BIN), args=["serve"], env=server_env(seeded))
    async with Client(params, mode="2026-07-28", read_timeout_seconds=CALL_TIMEOUT_S) as client:
        s = client.session
        assert s.protocol_version == "2026-07-28"
        for result in [await s.list_tools(), await s.list_prompts(), await s.list_resource_templates()]:
            assert (result.ttl_ms, result.cache_scope) == (3_600_000, "public"), type(result).__name__
        # What a write or the access list changes is never cached.
        resources = await s.list_resources()
        assert (resources.ttl_ms, resources.cache_scope) == (0, "private")


async def test_logging_is_not_advertised_and_set_level_is_refused(seeded):
    """memdir sends no log notifications: the capability is absent on every version, and a
    client that asks for a level anyway gets method-not-found, not a silent success."""
    async with open_server(seeded) as srv:
        assert srv.init.capabilities.logging is None
        with pytest.raises(MCPError) as e:
            await srv.session.set_logging_level("info")
        assert e.value.error.code == -32601, e.value.error
