"""Facts that change, through an independent MCP client: an agent searches, finds a stale fact,
and corrects it in one memory_ingest call naming the hit (`supersedes`); the correction then
ranks first and the stale hit says what superseded it, in search and in fetch. Asked as of a
date between a fact's first statement and its correction, search answers with the old value
(a small version of bench/facts.py's past-value questions)."""

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


# (first statement, correction, question, old value, new value)
CHANGING = [
    ("We deploy orion on Fridays at noon.", "Heads up: orion deploys moved to Tuesdays from now on.", "which day do we deploy orion", "Fridays", "Tuesdays"),
    ("Maria owns the lumen billing service.", "Billing for lumen is owned by Kenji now after the reorg.", "who owns the lumen billing service", "Maria", "Kenji"),
    ("The quill API rate limit is 500 requests per minute.", "We raised the quill API rate limit to 800 requests per minute.", "what is the quill API rate limit", "500", "800"),
]
WORK_TALK = [
    "Can you look at the flaky test in the auth module? It fails about once in ten runs.",
    "I refactored the config loader so it reads the file once and caches it.",
    "The dashboard query is slow; an index on created_at should help.",
]


async def test_as_of_a_date_between_statement_and_correction_the_old_value_answers(store, mcp_server):
    # Each session saved by its own server with the store's clock at the session's date.
    sessions = [
        ("2026-01-05T10:00:00Z", "jan", [(t, None, None) for t in WORK_TALK] + [(first, f"fact-{i}", None) for i, (first, *_) in enumerate(CHANGING)]),
        ("2026-01-20T10:00:00Z", "mid-jan", [(t, None, None) for t in WORK_TALK]),
        ("2026-02-05T10:00:00Z", "feb", [(fix, f"fact-{i}-fix", f"fact-{i}") for i, (_, fix, *_) in enumerate(CHANGING)] + [(WORK_TALK[0], None, None)]),
    ]
    for clock, sid, turns in sessions:
        chunks = []
        for content, key, corrects in turns:
            chunk = {"session_id": sid, "content": content, "ts": clock}
            if key:
                chunk["source_id"] = key
            if corrects:
                chunk["supersedes"] = [corrects]
            chunks.append(chunk)
        async with mcp_server(store, env={"MEMDIR_CLOCK": clock}) as srv:
            await srv.call("memory_ingest", {"chunks": chunks})

    async with mcp_server(store, env={"MEMDIR_CLOCK": "2026-03-01T10:00:00Z"}) as srv:
        for _, _, question, old, new in CHANGING:
            now = await srv.call("memory_search", {"query": question, "limit": 5, "context": 0})
            hits = [h for h in now["results"] if h["kind"] == "chunk"]
            assert new in hits[0]["content"], (question, hits)

            # A date (the whole of that day) and a time, both before the correction was saved.
            for as_of in ("2026-01-25", "2026-02-05T09:59:59Z"):
                then = await srv.call("memory_search", {"query": question, "limit": 5, "context": 0, "as_of": as_of})
                hits = [h for h in then["results"] if h["kind"] == "chunk"]
                assert hits and old in hits[0]["content"], (question, as_of, hits)
                assert "superseded_by" not in hits[0], (question, as_of, hits[0])
                assert not [h for h in hits if new in h["content"]], (question, as_of, hits)
                assert not [h for h in hits if h["session_id"] == "feb"], (question, as_of, hits)


async def test_a_server_asked_again_as_of_a_date_sees_what_was_forgotten_since(store, mcp_server):
    """A server keeps the categories as they stood at a time between searches; forgetting the
    version current then (a change of history only) must not leave its text findable."""
    async with mcp_server(store, env={"MEMDIR_CLOCK": "2026-01-05T10:00:00Z"}, profile="full") as srv:
        await srv.call("memory_write", {"category": "plan", "data": {"deploy": "Friday zeppelin"}})
    async with mcp_server(store, env={"MEMDIR_CLOCK": "2026-02-05T10:00:00Z"}, profile="full") as srv:
        await srv.call("memory_write", {"category": "plan", "data": {"deploy": "Tuesday"}, "merge": True})
        ask = {"query": "zeppelin", "as_of": "2026-01-20", "kind": "category"}
        then = await srv.call("memory_search", ask)
        assert [h["category"] for h in then["results"]] == ["plan"], then
        assert (await srv.call("memory_search", {"query": "zeppelin", "kind": "category"}))["count"] == 0

        await srv.call("memory_forget", {"category": "plan", "version": "1"})
        again = await srv.call("memory_search", ask)
        assert again["count"] == 0, again
        # Written since, at the same time asked about: what stood then is unchanged.
        await srv.call("memory_write", {"category": "other", "data": {"x": "zeppelin too"}})
        assert (await srv.call("memory_search", ask))["count"] == 0
