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


def test_unquoted_words_after_search_are_the_query(tmp_path: Path):
    store = tmp_path / "store"
    assert run(store, "ingest", "--session-id", "s", "--text", "redis eviction policy is allkeys-lru").returncode == 0
    p = run(store, "search", "redis", "eviction", "--limit", "3")
    assert p.returncode == 0, p.stderr
    v = json.loads(p.stdout)
    assert v["query"] == "redis eviction" and v["count"] == 1, v


@pytest.mark.parametrize("since", ["7d", "12h", "30m", "2w", "yesterday", "today"])
def test_since_takes_a_time_ago_and_day_names(tmp_path: Path, since: str):
    store = tmp_path / "store"
    assert run(store, "ingest", "--session-id", "s", "--text", "the walrus swam today").returncode == 0
    # An old chunk, outside every window but the broadest.
    assert run(store, "ingest", "--session-id", "old", "--text", "an old walrus", "--ts", "2020-01-01").returncode == 0
    p = run(store, "search", "walrus", "--since", since)
    assert p.returncode == 0, p.stderr
    assert [r["session_id"] for r in json.loads(p.stdout)["results"]] == ["s"], p.stdout
    p = run(store, "search", "walrus", "--until", "yesterday")
    assert [r["session_id"] for r in json.loads(p.stdout)["results"]] == ["old"], p.stdout
    p = run(store, "search", "walrus", "--since", "7 days")
    assert p.returncode == 3 and b"a time ago (30m, 12h, 7d, 2w)" in p.stderr, p.stderr


def test_a_dir_that_is_a_file_is_refused(tmp_path: Path):
    f = tmp_path / "notes.txt"
    f.write_text("not a store")
    p = subprocess.run([str(MEMDIR_BIN), "--dir", str(f), "search", "x"], capture_output=True, timeout=60)
    assert p.returncode == 3, p
    assert "is a file, not a directory" in p.stderr.decode()
    assert f.read_text() == "not a store"


def test_writing_nothing_from_stdin_says_the_data_is_empty(tmp_path: Path):
    store = tmp_path / "store"
    p = run(store, "write", "base", input=b"")
    assert p.returncode == 3
    err = json.loads(p.stderr)["error"]
    assert "data is empty" in err["message"] and "EOF" not in err["message"], err
    assert not (store / "categories").exists() or not list((store / "categories").iterdir())


def test_an_import_with_nothing_at_its_default_place_names_the_place_and_the_variable(tmp_path: Path):
    store = tmp_path / "store"
    env = server_env(store, HOME=str(tmp_path / "home"))
    env.pop("MEMORY_DB_PATH", None)
    p = subprocess.run([str(MEMDIR_BIN), "import", "local-memory"], capture_output=True, env=env, timeout=60)
    assert p.returncode == 3
    err = json.loads(p.stderr)["error"]
    assert "local-memory/memory.db" in err["message"], err
    assert any("MEMORY_DB_PATH" in h for h in err["hints"]), err


def test_a_relative_dir_of_one_name_works(tmp_path: Path):
    """`memdir --dir store ...` in the directory that is to hold it: the parent of a one-name
    relative path is the working directory."""
    env = server_env(tmp_path / "unused")
    env.pop("MEMDIR_DIR", None)
    for argv in (["init"], ["ingest", "--session-id", "s", "--text", "relative walrus"], ["search", "walrus"]):
        p = subprocess.run([str(MEMDIR_BIN), "--dir", "store", *argv], capture_output=True, env=env, cwd=tmp_path, timeout=60)
        assert p.returncode == 0, (argv, p.stderr)
    assert (tmp_path / "store" / "sessions").is_dir()


def test_forget_by_query_takes_only_chunks_with_every_word_and_a_dry_run_lists_them(tmp_path: Path):
    """`forget --query "pool timeout"` takes the turn saying both, not one that only says
    "pool"; a dry run on a terminal lists each chunk with its id; a forgotten chunk reads as
    [forgotten] in fetch."""
    store = tmp_path / "store"
    for t in ["the pool timeout was raised to 30s", "pool password on staging is hunter2", "timeout of the cache"]:
        assert run(store, "ingest", "--session-id", "s", "--text", t).returncode == 0
    code, out = on_tty(store, "forget", "--query", "pool timeout", "--dry-run", NO_COLOR="1")
    assert code == 0, out
    assert "would forget 1 chunk and 0 versions" in out, out
    assert "s#0" in out and "pool timeout was raised" in out and "hunter2" not in out, out
    assert "--chunk-id" in out, out
    p = run(store, "forget", "--query", "pool timeout", "--yes")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["count"] == 1
    code, out = on_tty(store, "fetch", "s", NO_COLOR="1")
    assert code == 0, out
    assert "[forgotten]" in out and "hunter2" in out and "timeout of the cache" in out, out


def test_compact_has_a_dry_run_and_declining_is_not_an_error(tmp_path: Path):
    store = tmp_path / "store"
    for i in range(7):
        assert run(store, "write", "base", "--data", json.dumps({"v": i})).returncode == 0
    p = run(store, "compact", "--keep", "2", "--dry-run")
    assert p.returncode == 0, p.stderr
    v = json.loads(p.stdout)
    assert v["dry_run"] is True and v["removed"] == 5, v
    assert len(json.loads(run(store, "history", "base").stdout)["versions"]) == 7
    code, out = on_tty(store, "compact", "--keep", "2", answer=b"n\n", NO_COLOR="1")
    assert code == 0, out
    assert "not confirmed: nothing was compacted" in out and "error" not in out, out
    assert len(json.loads(run(store, "history", "base").stdout)["versions"]) == 7
    code, out = on_tty(store, "compact", "--keep", "2", "--dry-run", NO_COLOR="1")
    assert "would remove 5 old versions, keeping 2 per category" in out, out


def test_status_for_people_counts_in_words_and_sizes_in_units(tmp_path: Path):
    store = tmp_path / "store"
    assert run(store, "init").returncode == 0
    code, out = on_tty(store, "status", NO_COLOR="1")
    assert code == 0, out
    assert "replica (named by the first write)" in out, out
    assert "bytes" not in out.split("·")[-1] or "KiB" in out, out
    assert run(store, "ingest", "--session-id", "s", "--text", "one").returncode == 0
    code, out = on_tty(store, "status", NO_COLOR="1")
    assert "1 session, 1 chunk · 0 categories (0 logs) · " in out and "KiB" in out, out


@pytest.mark.parametrize("argv, expect", [
    (["config", "show"], "setting"),
    (["models"], "configured:"),
])
def test_reports_that_were_json_are_text_on_a_terminal(tmp_path: Path, argv: list[str], expect: str):
    code, out = on_tty(tmp_path / "store", *argv, NO_COLOR="1")
    assert code == 0, out
    assert expect in out and not out.lstrip().startswith("{"), out


def test_export_to_a_file_says_what_it_wrote(tmp_path: Path):
    store = tmp_path / "store"
    assert run(store, "ingest", "--session-id", "s", "--text", "one").returncode == 0
    dest = tmp_path / "all.jsonl"
    code, out = on_tty(store, "export", "--output", str(dest), NO_COLOR="1")
    assert code == 0, out
    assert f"exported 1 chunk and 0 categories to {dest}" in out, out


def test_overview_rows_name_the_session_once_as_the_spec_says(tmp_path: Path):
    store = tmp_path / "store"
    assert run(store, "ingest", "--session-id", "s1", "--text", "hello").returncode == 0
    row = json.loads(run(store, "overview").stdout)["sessions"][0]
    assert row["id"] == "s1" and "session_id" not in row, row
    assert {"id", "title", "message_count", "start_time", "last_active"} <= set(row), row


def test_a_semantic_search_that_keywords_answered_says_why_on_a_terminal(tmp_path: Path):
    store = tmp_path / "store"
    assert run(store, "ingest", "--session-id", "s", "--text", "the walrus swam").returncode == 0
    v = json.loads(run(store, "search", "walrus", "--mode", "semantic").stdout)
    assert v["engine"] == "keyword-fallback" and v.get("note"), v
    code, out = on_tty(store, "search", "walrus", "--mode", "semantic", NO_COLOR="1")
    assert code == 0, out
    assert f"keyword-fallback: {v['note']}" in out, out


def test_a_usage_error_into_a_pipe_is_json_on_stderr_as_help_promises(tmp_path: Path):
    p = run(tmp_path / "store", "serch", "pool")
    assert p.returncode == 2
    err = json.loads(p.stderr)["error"]
    assert err["code"] == "usage" and "serch" in err["message"], err
    assert any("search" in h for h in err["hints"]), err
    # On a terminal, clap's own text for a person.
    code, out = on_tty(tmp_path / "store", "serch", NO_COLOR="1")
    assert code == 2 and "unrecognized subcommand" in out and '"error"' not in out, out


def readme_block(after_heading: str, lang: str) -> str:
    """The first ```lang block after the README heading `after_heading`."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rest = text.split(f"\n{after_heading}\n", 1)[1]
    return rest.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_every_shell_line_of_the_readme_quickstart_runs_as_written(tmp_path: Path):
    """The Quickstart pasted into a shell line by line, on a fresh HOME with `memdir` on the
    PATH: every line exits 0. The one placeholder, the 12-digit hash after --expected-hash, is
    the hash `memdir read base` shows at that point, as the comment beside it says."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "memdir").symlink_to(MEMDIR_BIN)
    env = server_env(tmp_path / "store", HOME=str(tmp_path / "home"), PATH=f"{bindir}:/usr/bin:/bin")
    (tmp_path / "home").mkdir()
    # The JSONL example beside the Quickstart, as chunks.jsonl.
    (tmp_path / "chunks.jsonl").write_text(readme_block("## Quickstart", "json"))
    lines = [l.split("  #")[0].strip() for l in readme_block("## Quickstart", "sh").splitlines()]
    lines = [l for l in lines if l and not l.startswith("#")]
    lines.append("memdir ingest --jsonl chunks.jsonl")
    assert len(lines) >= 10, lines
    for line in lines:
        if "--expected-hash" in line:
            head = json.loads(subprocess.run(["memdir", "read", "base", "--json"], capture_output=True, env=env, cwd=tmp_path).stdout)
            line = line.replace("1a2b3c4d5e6f", head["meta"]["hash"][:12])
        p = subprocess.run(["bash", "-c", line], capture_output=True, env=env, cwd=tmp_path, timeout=120)
        assert p.returncode == 0, (line, p.stdout[-2000:], p.stderr[-2000:])
    v = json.loads(subprocess.run(["memdir", "fetch", "demo", "--json"], capture_output=True, env=env, cwd=tmp_path).stdout)
    assert v["total"] == 2, v


def test_forget_by_query_never_widens_past_the_words_typed(tmp_path: Path):
    """A quoted phrase must occur as written (no fallback to its words in any order), and a
    stop word the index drops still has to be in the text."""
    store = tmp_path / "store"
    for t in ["the password for the pool is kept in vault", "production is down again", "this is not production"]:
        assert run(store, "ingest", "--session-id", "s", "--text", t).returncode == 0
    v = json.loads(run(store, "forget", "--query", '"pool password"', "--dry-run").stdout)
    assert v["count"] == 0, v
    v = json.loads(run(store, "forget", "--query", "not production", "--dry-run").stdout)
    assert [c["position"] for c in v["chunks"]] == [2], v


def test_a_long_file_with_a_private_span_stays_whole_and_the_secret_is_not_stored(tmp_path: Path):
    store = tmp_path / "store"
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\n" + "intro words. " * 400 + "\n\n<private>\n## Credentials\nbank: hunter2\n</private>\n\n" + "tail words. " * 400)
    assert run(store, "ingest", "--session-id", "n", "--file", str(doc)).returncode == 0
    chunks = json.loads(run(store, "fetch", "n").stdout)["chunks"]
    assert len(chunks) == 1, [c["content"][:40] for c in chunks]
    for f in (store / "sessions").rglob("*.jsonl"):
        assert "hunter2" not in f.read_text()


def test_a_version_restored_to_an_older_content_is_found_by_its_hash(tmp_path: Path):
    store = tmp_path / "store"
    assert run(store, "write", "base", "--data", json.dumps({"v": 1})).returncode == 0
    assert run(store, "write", "base", "--data", json.dumps({"v": 2})).returncode == 0
    assert run(store, "restore", "base", "--version", "1").returncode == 0
    first = json.loads(run(store, "read", "base", "--version", "1").stdout)["meta"]["hash"]
    p = run(store, "read", "base", "--version", first[:12])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["data"] == {"v": 1}


def test_a_sessions_directory_that_is_a_link_breaks_only_session_memory(tmp_path: Path):
    store = tmp_path / "store"
    assert run(store, "write", "base", "--data", json.dumps({"k": "walrus"})).returncode == 0
    outside = tmp_path / "elsewhere"
    (outside / "x").mkdir(parents=True)
    (outside / "x" / "r.jsonl").write_text("not read\n")
    if (store / "sessions").exists():
        (store / "sessions").rmdir()
    (store / "sessions").symlink_to(outside, target_is_directory=True)
    p = run(store, "search", "walrus")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["count"] == 1
    assert run(store, "status").returncode == 0
