"""Facts that change, through an independent MCP client: an agent searches, finds a stale fact,
and corrects it in one memory_ingest call naming the hit (`supersedes`); the correction then
ranks first and the stale hit says what superseded it, in search and in fetch."""

from __future__ import annotations

import pytest

from conftest import store_digest

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_an_agent_corrects_a_stale_fact_in_one_call(store, mcp_server):
    async with mcp_server(store) as srv:
        await srv.call("memory_ingest", {"session_id": "week-1", "content": "The deploy day is Friday; we deploy every Friday at noon."})
        await srv.call("memory_ingest", {"session_id": "notes", "content": "The coffee machine on floor 2 is broken."})
        found = await srv.call("memory_search", {"query": "deploy day", "limit": 3})
        stale = found["results"][0]
        assert "Friday" in stale["content"]
        assert "superseded_by" not in stale

        fix = await srv.call(
            "memory_ingest",
            {"session_id": "week-9", "content": "Deploys moved to Tuesday.", "supersedes": [stale["uri"]]},
        )
        fix_uri = f"memdir://sessions/week-9/{fix['position']}"

        after = await srv.call("memory_search", {"query": "deploy day", "limit": 3})
        uris = [h["uri"] for h in after["results"]]
        assert uris.index(fix_uri) < uris.index(stale["uri"]), uris
        marked = next(h for h in after["results"] if h["uri"] == stale["uri"])
        assert marked["superseded_by"] == [fix_uri]

        own = await srv.call("memory_search", {"query": "deploy day", "limit": 3, "include_superseded": True})
        assert own["results"][0]["uri"] == stale["uri"]
        assert own["results"][0]["superseded_by"] == [fix_uri]

        page = await srv.call("memory_fetch", {"session_id": "week-1"})
        assert page["chunks"][0]["superseded_by"] == [fix_uri]


async def test_a_correction_naming_nothing_is_refused_and_writes_nothing(store, mcp_server):
    async with mcp_server(store) as srv:
        await srv.call("memory_ingest", {"session_id": "s", "content": "kept"})
        before = store_digest(store)
        for bad in (["memdir://sessions/s/5"], ["no-such-key"], [], [""], "memdir://sessions/s/0", [7]):
            err = await srv.error("memory_ingest", {"session_id": "s", "content": "fix", "supersedes": bad})
            assert err["code"] == "invalid", (bad, err)
        assert store_digest(store) == before
