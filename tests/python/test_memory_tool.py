"""End-to-end tests of the memory-tool protocol: Anthropic's client-side memory tool (commands
view, create, str_replace, insert, delete and rename on paths under /memories), which memdir maps
onto its notes (Markdown files under notes/, every change versioned under note-history/).

The expected answers are a recorded session, tests/fixtures/memory_tool_session.json: a list of
steps `{"input": <the tool's arguments>, "result": <the protocol's string>, "is_error": bool}`,
recorded once from the binary and checked by hand against the strings Anthropic documents.
It is replayed, on a fresh store each time,
- over MCP (stdio, the official SDK) against `memdir serve --tools memory-tool` (and `full`,
  which offers the same `memory` tool): the result's one text block is the protocol string
  exactly, `isError` agrees, and a success carries `structuredContent {"result": <string>}`;
- over REST, `POST /api/v1/memory-tool`: a success is `{"result": <string>}`, an error memdir's
  usual `{"error": {code, message, hints}}` body with a 4xx status and the protocol string as
  the message.
After a replay the files under notes/ hold what the session's last views showed, and every
change is a version in the note's history (`memdir note history`). Two sessions editing the
same note: an edit of a file the session viewed fails once another session has changed it (the
view is the base of a compare-and-swap), and the other session's change survives.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import MEMDIR_BIN, REPO_ROOT, server_env
from test_http import start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "memory_tool_session.json"
SESSION: list[dict[str, Any]] = json.loads(FIXTURE.read_text())
ROOT = "/memories"
COMMANDS = {"view", "create", "str_replace", "insert", "delete", "rename"}
TOOL_PROPERTIES = {
    "command",
    "path",
    "view_range",
    "file_text",
    "old_str",
    "new_str",
    "insert_line",
    "insert_text",
    "old_path",
    "new_path",
}
DIR_HEADER = "Here're the files and directories up to 2 levels deep in {path}, excluding hidden items and node_modules:"
FILE_HEADER = "Here's the content of {path} with line numbers:"
NUMBERED_LINE = re.compile(r"^ {0,5}(\d{1,6})\t(.*)$", re.S)


def step_id(i: int, step: dict[str, Any]) -> str:
    return f"[{i}] {json.dumps(step['input'])}"


def tool_text(res: Any) -> str:
    """The protocol string of a `memory` tool result: its one text block. A success also carries
    it as structuredContent {"result": ...}; an error is its text only."""
    texts = [c for c in res.content if getattr(c, "type", None) == "text"]
    assert len(texts) == 1, f"exactly one text content block, got {res.content!r}"
    text = texts[0].text
    if res.is_error:
        assert res.structured_content is None, f"a tool error is its text only: {res.structured_content!r}"
    else:
        assert res.structured_content == {"result": text}, f"structuredContent {res.structured_content!r} != text {text!r}"
    return text


def note_path(path: str) -> str:
    """The note path below notes/ of a protocol path under /memories."""
    assert path == ROOT or path.startswith(ROOT + "/"), path
    return path[len(ROOT) :].strip("/")


def mismatch(i: int, step: dict[str, Any], got_text: str, got_error: bool) -> str | None:
    if got_text == step["result"] and got_error == step["is_error"]:
        return None
    return (
        f"{step_id(i, step)}\n"
        f"   expected is_error={step['is_error']} {step['result']!r}\n"
        f"   got      is_error={got_error} {got_text!r}"
    )


async def replay_mcp(srv) -> list[str]:
    """Replays the session through the `memory` tool; returns the mismatches."""
    problems = []
    for i, step in enumerate(SESSION):
        res = await srv.raw("memory", step["input"])
        p = mismatch(i, step, tool_text(res), bool(res.is_error))
        if p:
            problems.append(p)
    return problems


def replay_rest(srv) -> list[str]:
    """Replays the session through POST /api/v1/memory-tool; returns the mismatches."""
    problems = []
    for i, step in enumerate(SESSION):
        r = srv.request("POST", "/api/v1/memory-tool", step["input"], srv.auth)  # Resp.check: JSON, error shape
        body = r.json
        if r.status == 200:
            if set(body) != {"result"}:
                problems.append(f"{step_id(i, step)}: a success is {{result}} only, got {r.describe()}")
                continue
            p = mismatch(i, step, body["result"], False)
        else:
            if not 400 <= r.status < 500:
                problems.append(f"{step_id(i, step)}: a protocol error is a 4xx, got {r.describe()}")
                continue
            p = mismatch(i, step, body["error"]["message"], True)
        if p:
            problems.append(p)
    return problems


def memdir(store: Path, *argv: str) -> Any:
    """Runs a memdir command on `store` that must succeed; returns its JSON output."""
    p = subprocess.run([str(MEMDIR_BIN), *argv, "--json"], capture_output=True, text=True, timeout=30, env=server_env(store))
    assert p.returncode == 0, f"memdir {' '.join(argv)} -> {p.returncode}: {p.stdout} {p.stderr}"
    return json.loads(p.stdout)


# --------------------------------------------------------------------------------------------
# What the session's answers say
# --------------------------------------------------------------------------------------------


def parse_size(s: str) -> int | None:
    """Bytes of a size such as `101B`; None for a rounded one (`1.5K`)."""
    m = re.fullmatch(r"(\d+)B", s)
    return int(m[1]) if m else None


def parse_dir_view(path: str, text: str) -> list[tuple[str, str]]:
    """(size, path) rows of a directory view, the directory itself first."""
    lines = text.split("\n")
    assert lines[0] == DIR_HEADER.format(path=path), text
    rows = [tuple(line.split("\t", 1)) for line in lines[1:]]
    assert all(len(r) == 2 for r in rows), text
    return rows  # type: ignore[return-value]


def parse_file_view(path: str, text: str) -> list[tuple[int, str]]:
    """(number, line) rows of a file view."""
    head, _, body = text.partition("\n")
    assert head == FILE_HEADER.format(path=path), text
    rows = []
    for line in body.split("\n") if body else []:
        m = NUMBERED_LINE.match(line)
        assert m and len(line.split("\t", 1)[0]) == 6, f"not a `{{n:>6}}\\t{{line}}` row: {line!r}"
        rows.append((int(m[1]), m[2]))
    return rows


class Model:
    """The notes the session leaves behind and the versions every change should have made:
    create is a write, str_replace and insert are edits, a rename is a delete of the old path
    and a rename version of the new one (per file, for a folder), a delete is a delete (per file)."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.ops: dict[str, list[str]] = {}
        self.created_with: dict[str, str] = {}

    def _version(self, path: str, op: str) -> None:
        self.ops.setdefault(path, []).append(op)

    def _under(self, path: str) -> list[str]:
        if path in self.files:
            return [path]
        prefix = path + "/" if path else ""
        found = sorted(f for f in self.files if f.startswith(prefix))
        assert found, f"model: {path!r} is neither a note nor a folder of notes"
        return found

    def apply(self, args: dict[str, Any]) -> None:
        cmd = args["command"]
        if cmd == "create":
            p = note_path(args["path"])
            self.files.add(p)
            self.created_with.setdefault(p, args["file_text"])
            self._version(p, "write")
        elif cmd in ("str_replace", "insert"):
            self._version(note_path(args["path"]), "edit")
        elif cmd == "delete":
            for f in self._under(note_path(args["path"])):
                self.files.discard(f)
                self._version(f, "delete")
        elif cmd == "rename":
            old, new = note_path(args["old_path"]), note_path(args["new_path"])
            for f in self._under(old):
                moved = new + f[len(old) :]
                self.files.discard(f)
                self.files.add(moved)
                self._version(f, "delete")
                self._version(moved, "rename")


def session_model() -> Model:
    m = Model()
    for step in SESSION:
        if not step["is_error"] and step["input"]["command"] != "view":
            m.apply(step["input"])
    return m


def check_store_after_replay(store: Path) -> None:
    """notes/ holds what the session's last views showed; every change is a version."""
    model = session_model()
    notes = store / "notes"
    on_disk = {str(p.relative_to(notes)): p for p in notes.rglob("*") if p.is_file()}
    assert set(on_disk) == model.files

    # The last view of the whole tree lists exactly these files, with their sizes in bytes.
    last_root = max(i for i, s in enumerate(SESSION) if s["input"] == {"command": "view", "path": ROOT} and not s["is_error"])
    rows = parse_dir_view(ROOT, SESSION[last_root]["result"])
    assert rows[0][1] == ROOT
    assert parse_size(rows[0][0]) == sum(p.stat().st_size for p in on_disk.values())
    listed_files = {note_path(p): size for size, p in rows[1:] if not p.endswith("/")}
    assert set(listed_files) == model.files, "the last root view lists every note (all within 2 levels)"
    for rel, size in listed_files.items():
        assert parse_size(size) == on_disk[rel].stat().st_size, rel
    for size, p in rows[1:]:
        if p.endswith("/"):
            folder = note_path(p.rstrip("/"))
            assert parse_size(size) == sum(q.stat().st_size for r, q in on_disk.items() if r.startswith(folder + "/")), p

    # Each file holds the lines of its last whole-file view, made after the last root view.
    for rel, p in on_disk.items():
        views = [
            i
            for i, s in enumerate(SESSION)
            if s["input"] == {"command": "view", "path": f"{ROOT}/{rel}"} and not s["is_error"]
        ]
        assert views and views[-1] > last_root, f"the session ends without a view of {rel}"
        shown = [line for _, line in parse_file_view(f"{ROOT}/{rel}", SESSION[views[-1]]["result"])]
        text = p.read_text()
        assert text.endswith("\n"), rel
        assert text[:-1].split("\n") == shown, f"notes/{rel} is {text!r}, the last view showed {shown!r}"
        assert [n for n, _ in parse_file_view(f"{ROOT}/{rel}", SESSION[views[-1]]["result"])] == list(range(1, len(shown) + 1))

    # Every change is a version, of the path it changed, in order; deleted notes keep theirs.
    for rel, ops in model.ops.items():
        h = memdir(store, "note", "history", rel, "--limit", "1000")
        assert h["path"] == rel
        assert h["exists"] == (rel in model.files), (rel, h)
        got = [v["op"] for v in reversed(h["versions"])]
        assert got == ops, f"history of {rel}: {got}, expected {ops}"
        assert h["total"] == len(ops)
        assert [v["version"] for v in reversed(h["versions"])] == list(range(1, len(ops) + 1))
        assert all(v["actor"] == "test" for v in h["versions"])
        if rel in model.files:
            r = memdir(store, "note", "read", rel)
            assert r["text"] == on_disk[rel].read_text()
            assert r["hash"] == h["versions"][0]["hash"] and r["version"] == len(ops)
        if ops[0] == "write":
            first = memdir(store, "note", "read", rel, "--version", "1")
            assert first["text"] == model.created_with[rel], rel

    # Nothing was written outside notes/ by the paths that try to escape.
    for escaped in (store / "x.md", store.parent / "x.md", store / "x", store.parent / "x"):
        assert not escaped.exists(), escaped


# --------------------------------------------------------------------------------------------
# The fixture itself
# --------------------------------------------------------------------------------------------


def test_fixture_covers_the_protocol():
    """The recorded session exercises what it is meant to (so an edit of it cannot quietly drop
    a case), and its strings have the documented shapes."""
    assert 20 <= len(SESSION) <= 60
    for step in SESSION:
        assert set(step) == {"input", "result", "is_error"}, step
        assert set(step["input"]) <= TOOL_PROPERTIES, step
        assert isinstance(step["result"], str) and isinstance(step["is_error"], bool), step
    ok = [s for s in SESSION if not s["is_error"]]
    failed = [s for s in SESSION if s["is_error"]]
    assert {s["input"]["command"] for s in ok} == COMMANDS
    results = [s["result"] for s in SESSION]

    def has(pred) -> bool:
        return any(pred(s["input"], s["result"], s["is_error"]) for s in SESSION)

    assert has(lambda a, r, e: a == {"command": "view", "path": ROOT} and not e)
    assert has(lambda a, r, e: a["command"] == "view" and a["path"] != ROOT and r.startswith("Here're") and not e)
    assert has(lambda a, r, e: a.get("view_range", [0, 0])[1] == -1 and not e)
    assert has(lambda a, r, e: a.get("view_range", [0, -1])[1] > 0 and not e)
    assert has(lambda a, r, e: a["command"] == "str_replace" and "did not appear verbatim" in r and e)
    assert has(lambda a, r, e: a["command"] == "str_replace" and "Multiple occurrences" in r and e)
    assert has(lambda a, r, e: a["command"] == "str_replace" and a.get("new_str") == "" and not e)
    assert has(lambda a, r, e: a["command"] == "insert" and a["insert_line"] == 0 and not e)
    assert has(lambda a, r, e: a["command"] == "insert" and "Invalid `insert_line`" in r and e)
    assert has(lambda a, r, e: a["command"] == "rename" and "already exists" in r and e)
    assert has(lambda a, r, e: a["command"] == "create" and "already exists" in r and e)
    assert has(lambda a, r, e: a.get("path") == ROOT and a["command"] == "delete" and e)
    for outside in ("/etc/passwd", "/memories/../", "/memories/%2e%2e/"):
        assert has(lambda a, r, e: str(a.get("path", "")).startswith(outside) and r.startswith("Error: ") and e), outside
    # An insert at the end: insert_line equal to the file's line count, per the view before it.
    assert has(lambda a, r, e: a["command"] == "insert" and a["insert_line"] > 0 and not e)
    # A rename and a delete of a folder (a path the model sees as holding several notes or one
    # below it, not a note itself).
    model = Model()
    folder_ops = set()
    for s in SESSION:
        a = s["input"]
        if not s["is_error"] and a["command"] in ("rename", "delete"):
            p = note_path(a["path"] if a["command"] == "delete" else a["old_path"])
            if p not in model.files:
                folder_ops.add(a["command"])
        if not s["is_error"] and a["command"] != "view":
            model.apply(a)
    assert folder_ops == {"rename", "delete"}
    # The documented shapes.
    for s in ok:
        a, r = s["input"], s["result"]
        if a["command"] == "view":
            assert r.startswith((DIR_HEADER.format(path=a["path"]), FILE_HEADER.format(path=a["path"]))), r
        elif a["command"] == "create":
            assert r == f"File created successfully at: {a['path']}"
        elif a["command"] == "str_replace":
            assert r.startswith("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n")
        elif a["command"] == "insert":
            assert r == f"The file {a['path']} has been edited."
        elif a["command"] == "delete":
            assert r == f"Successfully deleted {a['path']}"
        elif a["command"] == "rename":
            assert r == f"Successfully renamed {a['old_path']} to {a['new_path']}"
    assert all(r for r in results)
    assert len(failed) >= 10


# --------------------------------------------------------------------------------------------
# MCP
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", [{"profile": "memory-tool"}, {"env": {"MEMDIR_TOOLS": "memory-tool"}}], ids=["--tools", "MEMDIR_TOOLS"])
async def test_memory_tool_profile_lists_only_memory(store, mcp_server, how):
    async with mcp_server(store, **how) as srv:
        tools = (await srv.session.list_tools()).tools
    assert [t.name for t in tools] == ["memory"]
    schema = tools[0].input_schema
    assert schema["type"] == "object"
    assert set(schema["properties"]) == TOOL_PROPERTIES
    assert schema.get("required") == ["command"]
    assert tools[0].annotations is not None and tools[0].annotations.read_only_hint is not True
    assert not store.exists(), "listing tools creates no store"


async def test_full_profile_offers_memory_too(store, mcp_server):
    async with mcp_server(store, profile="full") as srv:
        names = [t.name for t in (await srv.session.list_tools()).tools]
    assert "memory" in names and len(names) == len(set(names))


@pytest.mark.parametrize("profile", ["memory-tool", "full"])
async def test_replay_over_mcp(store, mcp_server, profile):
    async with mcp_server(store, profile=profile) as srv:
        problems = await replay_mcp(srv)
    assert not problems, f"{len(problems)} of {len(SESSION)} steps differ:\n" + "\n".join(problems)


async def test_store_after_mcp_replay(store, mcp_server):
    async with mcp_server(store, profile="memory-tool") as srv:
        assert not await replay_mcp(srv)
    check_store_after_replay(store)


# --------------------------------------------------------------------------------------------
# REST
# --------------------------------------------------------------------------------------------


def test_replay_over_rest(tmp_path, memdir_bin):
    srv = start_server(tmp_path / "store", "http")
    try:
        problems = replay_rest(srv)
        assert not problems, f"{len(problems)} of {len(SESSION)} steps differ:\n" + "\n".join(problems)
        check_store_after_replay(srv.store)
    finally:
        assert srv.stop() == 0, srv.stderr


async def test_mcp_and_rest_replays_leave_the_same_notes(tmp_path, mcp_server):
    a, b = tmp_path / "mcp", tmp_path / "rest"
    async with mcp_server(a, profile="memory-tool") as srv:
        assert not await replay_mcp(srv)
    srv = start_server(b, "http")
    try:
        assert not replay_rest(srv)
    finally:
        srv.stop()

    def notes(store: Path) -> dict[str, bytes]:
        return {str(p.relative_to(store / "notes")): p.read_bytes() for p in (store / "notes").rglob("*") if p.is_file()}

    assert notes(a) == notes(b)


# --------------------------------------------------------------------------------------------
# Two sessions on one store
# --------------------------------------------------------------------------------------------

PLAN = "/memories/plan.md"
PLAN_TEXT = "# Plan\n\nDeploys go through staging first.\n"


CHANGED = "Error: The file {path} has been changed by another writer since you last viewed it; nothing was changed. View it again, then retry the edit on what it holds now."


async def test_stale_str_replace_fails_and_the_other_change_survives(store, mcp_server):
    """A views, B replaces the text A saw, A's str_replace of that text then fails: the file
    changed since A's view; viewed again, the text is not there (the protocol's not-found
    string). B's change is what the note holds, and both views agree."""
    async with mcp_server(store, profile="memory-tool") as a, mcp_server(store, profile="memory-tool") as b:
        res = await a.raw("memory", {"command": "create", "path": PLAN, "file_text": PLAN_TEXT})
        assert tool_text(res) == f"File created successfully at: {PLAN}"
        seen = tool_text(await a.raw("memory", {"command": "view", "path": PLAN}))
        assert seen == f"Here's the content of {PLAN} with line numbers:\n     1\t# Plan\n     2\t\n     3\tDeploys go through staging first."

        res = await b.raw("memory", {"command": "str_replace", "path": PLAN, "old_str": "staging first", "new_str": "staging-2 first"})
        assert not res.is_error, tool_text(res)

        res = await a.raw("memory", {"command": "str_replace", "path": PLAN, "old_str": "staging first", "new_str": "production first"})
        assert res.is_error is True
        assert tool_text(res) == CHANGED.format(path=PLAN)
        assert not (await a.raw("memory", {"command": "view", "path": PLAN})).is_error
        res = await a.raw("memory", {"command": "str_replace", "path": PLAN, "old_str": "staging first", "new_str": "production first"})
        assert res.is_error is True
        assert tool_text(res) == f"No replacement was performed, old_str `staging first` did not appear verbatim in {PLAN}."

        want = f"Here's the content of {PLAN} with line numbers:\n     1\t# Plan\n     2\t\n     3\tDeploys go through staging-2 first."
        assert tool_text(await a.raw("memory", {"command": "view", "path": PLAN})) == want
        assert tool_text(await b.raw("memory", {"command": "view", "path": PLAN})) == want
    assert (store / "notes" / "plan.md").read_text() == "# Plan\n\nDeploys go through staging-2 first.\n"
    h = memdir(store, "note", "history", "plan.md")
    assert [v["op"] for v in reversed(h["versions"])] == ["write", "edit"]


async def test_simultaneous_str_replace_of_the_same_text_has_one_winner(store, mcp_server):
    """Both sessions replace the same text at the same moment: exactly one succeeds, the other
    learns the file changed since its view, and the note holds the winner's text (no lost
    update, no mix)."""
    rounds = 8
    async with mcp_server(store, profile="memory-tool") as a, mcp_server(store, profile="memory-tool") as b:
        for r in range(rounds):
            path = f"/memories/race{r}.md"
            assert not (await a.raw("memory", {"command": "create", "path": path, "file_text": PLAN_TEXT})).is_error
            # B has seen the note too (its server has read the store) before the race.
            assert not (await b.raw("memory", {"command": "view", "path": path})).is_error

            async def replace(srv, to: str):
                return await srv.raw("memory", {"command": "str_replace", "path": path, "old_str": "staging first", "new_str": to})

            ra, rb = await asyncio.gather(replace(a, "A first"), replace(b, "B first"))
            outcomes = {"A": ra, "B": rb}
            winners = [k for k, res in outcomes.items() if not res.is_error]
            assert len(winners) == 1, f"round {r}: {[(k, res.is_error, tool_text(res)) for k, res in outcomes.items()]}"
            loser = outcomes["B" if winners == ["A"] else "A"]
            assert tool_text(loser) == CHANGED.format(path=path)
            text = (store / "notes" / f"race{r}.md").read_text()
            assert text == f"# Plan\n\nDeploys go through {winners[0]} first.\n", f"round {r}"
            h = memdir(store, "note", "history", f"race{r}.md")
            assert [v["op"] for v in reversed(h["versions"])] == ["write", "edit"], f"round {r}"


async def test_an_edit_after_another_writers_change_fails_until_viewed_again(store, mcp_server):
    """A views; B inserts a line at the top; A's insert by the line number it saw would land on
    a shifted line, so it fails, as do its str_replace and delete, and the note keeps B's change
    alone. Viewed again, A's insert lands where A means. A session's own edits never trip it,
    and a session that never viewed the file edits it as it is."""
    path = "/memories/steps.md"
    async with mcp_server(store, profile="memory-tool") as a, mcp_server(store, profile="memory-tool") as b:
        assert not (await a.raw("memory", {"command": "create", "path": path, "file_text": "one\ntwo\nthree\n"})).is_error
        # A's own edits, one after another, each on what A knows.
        for cmd in (
            {"command": "insert", "path": path, "insert_line": 1, "insert_text": "one and a half"},
            {"command": "str_replace", "path": path, "old_str": "three", "new_str": "three!"},
            {"command": "insert", "path": path, "insert_line": 4, "insert_text": "four"},
        ):
            res = await a.raw("memory", cmd)
            assert not res.is_error, tool_text(res)
        before = "one\none and a half\ntwo\nthree!\nfour\n"
        assert (store / "notes" / "steps.md").read_text() == before
        assert not (await a.raw("memory", {"command": "view", "path": path})).is_error

        res = await b.raw("memory", {"command": "insert", "path": path, "insert_line": 0, "insert_text": "zero"})
        assert not res.is_error, tool_text(res)
        after_b = "zero\n" + before
        for cmd in (
            {"command": "insert", "path": path, "insert_line": 2, "insert_text": "A's line"},
            {"command": "str_replace", "path": path, "old_str": "four", "new_str": "4"},
            {"command": "delete", "path": path},
        ):
            res = await a.raw("memory", cmd)
            assert res.is_error is True, cmd
            assert tool_text(res) == CHANGED.format(path=path), cmd
        assert (store / "notes" / "steps.md").read_text() == after_b

        view = tool_text(await a.raw("memory", {"command": "view", "path": path}))
        assert view.endswith("     1\tzero\n     2\tone\n     3\tone and a half\n     4\ttwo\n     5\tthree!\n     6\tfour")
        res = await a.raw("memory", {"command": "insert", "path": path, "insert_line": 3, "insert_text": "A's line"})
        assert not res.is_error, tool_text(res)
        assert (store / "notes" / "steps.md").read_text() == "zero\none\none and a half\nA's line\ntwo\nthree!\nfour\n"

    # A fresh session has viewed nothing: its edit applies to the note as it is.
    async with mcp_server(store, profile="memory-tool") as c:
        res = await c.raw("memory", {"command": "str_replace", "path": path, "old_str": "four", "new_str": "4"})
        assert not res.is_error, tool_text(res)
        res = await c.raw("memory", {"command": "rename", "old_path": path, "new_path": "/memories/done/steps.md"})
        assert not res.is_error, tool_text(res)
        # A renamed file keeps what the session knew of it.
        res = await c.raw("memory", {"command": "delete", "path": "/memories/done/steps.md"})
        assert not res.is_error, tool_text(res)
    h = memdir(store, "note", "history", "steps.md")
    assert [v["op"] for v in reversed(h["versions"])] == ["write", "edit", "edit", "edit", "edit", "edit", "edit", "delete"]


async def test_what_a_session_saw_follows_folders_and_renames(store, mcp_server):
    """A file the session viewed that became a folder does not block deleting that folder; a
    folder renamed by the session keeps what it saw of its files, so another writer's change
    to a moved file still fails the session's edit."""
    async with mcp_server(store, profile="memory-tool") as a, mcp_server(store, profile="memory-tool") as b:
        assert not (await a.raw("memory", {"command": "create", "path": "/memories/x", "file_text": "x\n"})).is_error
        assert not (await a.raw("memory", {"command": "view", "path": "/memories/x"})).is_error
        assert not (await b.raw("memory", {"command": "delete", "path": "/memories/x"})).is_error
        assert not (await b.raw("memory", {"command": "create", "path": "/memories/x/y.md", "file_text": "y\n"})).is_error
        res = await a.raw("memory", {"command": "delete", "path": "/memories/x"})
        assert tool_text(res) == "Successfully deleted /memories/x"

        assert not (await a.raw("memory", {"command": "create", "path": "/memories/f/g.md", "file_text": "one\n"})).is_error
        assert not (await a.raw("memory", {"command": "view", "path": "/memories/f/g.md"})).is_error
        res = await a.raw("memory", {"command": "rename", "old_path": "/memories/f", "new_path": "/memories/h"})
        assert tool_text(res) == "Successfully renamed /memories/f to /memories/h"
        res = await b.raw("memory", {"command": "str_replace", "path": "/memories/h/g.md", "old_str": "one", "new_str": "two"})
        assert not res.is_error, tool_text(res)
        res = await a.raw("memory", {"command": "insert", "path": "/memories/h/g.md", "insert_line": 1, "insert_text": "A"})
        assert tool_text(res) == CHANGED.format(path="/memories/h/g.md")
    assert (store / "notes" / "h" / "g.md").read_text() == "two\n"


async def test_a_note_hit_names_a_resource_that_reads_the_note(store, mcp_server):
    """The `uri` of a note's search hit is a resource: its text as Markdown, with its meta."""
    async with mcp_server(store, profile="full") as srv:
        text = "# Runbook\n\n## Deploys\nShip on Tuesdays after the freeze.\n"
        r = await srv.session.call_tool("memory", {"command": "create", "path": "/memories/ops/run book.md", "file_text": text})
        assert not r.is_error, r
        hits = await srv.session.call_tool("memory_search", {"query": "tuesdays freeze", "kind": "note"})
        hit = hits.structured_content["results"][0]
        assert hit["kind"] == "note" and hit["path"] == "ops/run book.md" and hit["heading"] == "Runbook > Deploys"
        assert hit["uri"] == "memdir://notes/ops/run%20book.md"
        read = await srv.session.read_resource(hit["uri"])
        c = read.contents[0]
        assert c.text == text
        assert c.mime_type == "text/markdown"
        assert c.meta["memdir/meta"]["hash"] == hit["hash"]
        with pytest.raises(Exception):
            await srv.session.read_resource("memdir://notes/ops/missing.md")
