"""Files memdir writes validate against the JSON Schemas in schema/.

The store is built through the CLI (writes, merges, logs with retention, deletes, restores,
batch and single ingests with metadata, hostile names), then every file is checked.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import MEMDIR_BIN, REPO_ROOT

SCHEMAS = REPO_ROOT / "schema"


def load(name: str) -> dict:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def run(store: Path, *args: str, stdin: str | None = None) -> dict:
    env = {"MEMDIR_DIR": str(store), "MEMDIR_DEVICE": "schema-test", "HOME": str(store.parent), "PATH": os.environ["PATH"]}
    p = subprocess.run([str(MEMDIR_BIN), *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, f"memdir {' '.join(args)} exited {p.returncode}: {p.stderr}"
    return json.loads(p.stdout) if p.stdout.strip() else {}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    s = tmp_path_factory.mktemp("schema") / "store"
    run(s, "init")
    run(s, "write", "base", "--data", json.dumps({"name": "Ada", "nested": {"a": [1, 2, {"b": None}]}, "n": 1.5}), "--reason", "first")
    run(s, "write", "base", "--merge", "--data", json.dumps({"n": None, "editor": "helix"}))
    run(s, "write", "Weird Name ü/../x".replace("/", "-"), "--data", json.dumps({"k": "v"}))
    for i in range(5):
        run(s, "append", "journal", "--data", json.dumps({"event": i}), "--max-entries", "3", "--max-age-days", "30")
    run(s, "write", "gone", "--data", json.dumps({"x": 1}))
    run(s, "delete", "gone")
    run(s, "restore", "gone", "--version", "1")
    run(s, "delete", "gone")
    # A merge of one key into a large category is recorded as a patch (store format 2); a
    # forgotten version keeps its place without content.
    run(s, "write", "big", "--data", json.dumps({f"key{i:03}": f"value {i} with a few words" for i in range(100)}))
    run(s, "write", "big", "--merge", "--data", json.dumps({"key007": "changed", "key008": None}))
    run(s, "write", "big", "--merge", "--data", json.dumps({"key009": "changed"}))
    run(s, "forget", "--category", "big", "--version", "1", "--yes")
    run(s, "ingest", "--session-id", "alpha", "--project", "web", "--metadata", json.dumps({"role": "user", "z": [1]}), "--text", "hello\nworld")
    batch = "\n".join(json.dumps({"session_id": sid, "content": f"chunk {i} of {sid}"}) for i, sid in enumerate(["alpha", "Beta:2", "ünïcode id"] * 3))
    run(s, "ingest", "--jsonl", "-", stdin=batch)
    return s


def test_schemas_are_valid_draft_2020_12():
    for f in SCHEMAS.glob("*.json"):
        load(f.name)


def test_category_files_validate(store: Path):
    schema = load("category.schema.json")
    files = list((store / "categories").glob("*.json"))
    assert len(files) == 4  # base, the weird name, journal, big ("gone" is deleted)
    for f in files:
        jsonschema.validate(json.loads(f.read_text()), schema)


def test_category_files_are_canonical_text(store: Path):
    for f in (store / "categories").glob("*.json"):
        raw = f.read_bytes()
        assert raw.endswith(b"\n") and b"\r" not in raw
        value = json.loads(raw)
        assert raw.decode() == json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_history_entries_validate(store: Path):
    schema = load("history-entry.schema.json")
    entries = list((store / "history").glob("*/*.json"))
    ops = set()
    kinds = set()
    for f in entries:
        v = json.loads(f.read_text())
        jsonschema.validate(v, schema)
        assert f.stem == v["id"]
        ops.add(v["op"])
        kinds.add("patch" if "patch" in v else "forgotten" if "forgotten" in v else "whole")
    assert {"write", "merge", "append", "delete", "restore"} <= ops
    assert kinds == {"patch", "forgotten", "whole"}


def test_chunk_lines_validate(store: Path):
    schema = load("chunk.schema.json")
    lines = 0
    for f in (store / "sessions").glob("*/*.jsonl"):
        raw = f.read_bytes()
        assert raw.endswith(b"\n") and b"\r" not in raw
        seqs = []
        for line in raw.decode().splitlines():
            v = json.loads(line)
            jsonschema.validate(v, schema)
            assert list(v.keys()) == ["session_id", "replica", "seq", "hlc", "ts", "project", "metadata", "content"]
            assert f.stem == v["replica"]
            seqs.append(v["seq"])
            lines += 1
        assert seqs == list(range(len(seqs)))
    assert lines == 10


def test_replica_file_validates(store: Path):
    jsonschema.validate(json.loads((store / ".memdir" / "replica").read_text()), load("replica.schema.json"))


def test_format_file_validates(store: Path):
    raw = (store / "memdir.json").read_text()
    jsonschema.validate(json.loads(raw), load("format.schema.json"))
    # Raised from 1 by the first patch entry.
    assert raw == '{\n  "format": 2\n}\n'
