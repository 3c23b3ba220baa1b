"""Replication you can trust: what a peer or a remote sends can add, never rewrite or erase.

Each test reproduces, from outside and against the built binary, one way in which a git
remote or an HTTP peer can change or leak what a replica already holds, and asserts what the
replication gate (docs/design/replication.md) promises instead:

- a segment from outside is taken only as an extension of this replica's copy, and this
  replica's own segments are never taken from anyone;
- history files are write-once: a remote deletion or rewrite never changes a local one;
- text leaves a store only by a forget tombstone from a device allowed to forget;
- pushed records pass the checks of a local write (shape, limits, redaction, actor, ACL);
- files outside the layout (`.gitignore`, `memdir.json`, `..`, links) never come from a
  remote; one bad entry is reported and skipped, the rest is applied;
- a sync is bounded (pages, time, sizes).

Git remotes are bare repositories on local disk, changed with plain git (a clone, a commit, a
push) or with plumbing (`mktree`, `commit-tree`, `update-ref`) where plain git refuses. HTTP
peers are raw requests to the sync routes of a `memdir serve --transport http` on loopback
(`/api/v1/sync/manifest|diff|pull|push`, pages of `{path, from, prefix, hash, data}` with
BLAKE3 hashes), and fake servers are Python `http.server`s on loopback. Where the fixed
behaviour needs a choice the gate has not made yet (an error code, a report field), the
assertion is loose: the data is unchanged, and the refusal is visible (a non-zero exit or an
error status, or a non-empty `reported` entry naming the file).
"""

from __future__ import annotations

import calendar
import http.server
import json
import re
import os
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from conftest import MEMDIR_BIN, server_env
from test_http import HttpServer, start_server

pytestmark = [pytest.mark.timeout(300)]

# Assembled at run time so that the sources hold no secret.
AWS = "AKIA" + "QWERTYUIOP23ASDF"
GITHUB = "ghp_" + "Zx9Kq2Lm4Np6Rs8Tv0Wy1Ab3Cd5Ef7Gh9Ij1"
PRIVATE = "marmalade" + "-zeppelin-quokka"
SECRET_TEXT = f"key {AWS} token {GITHUB} <private>{PRIVATE}</private> done"

SYNC_FORMAT = "memdir-sync/1"
PHONE_TOKEN = "phone-token-0123456789abcdef"

# The hub's policy in the ACL tests: the phone may write notes_*, ingest into project
# "mobile" only, and may not delete (no `delete = true`).
HUB_POLICY = """
[acl]
admin_devices = ["hub"]

[[acl.rules]]
device = "phone"
write = ["notes_*"]
ingest = ["mobile"]

[[http.tokens]]
device = "phone"
token_env = "PHONE_TOKEN"
"""


# --------------------------------------------------------------------------------------------
# BLAKE3 (the sync plane's hash), pure Python: the test environment has no blake3 package.
# Checked against the reference test vectors and, in the tests, against the hashes memdir
# sends.
# --------------------------------------------------------------------------------------------

_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
_PERM = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT = 1, 2, 4, 8
_M32 = 0xFFFFFFFF


def _g(s: list[int], a: int, b: int, c: int, d: int, x: int, y: int) -> None:
    s[a] = (s[a] + s[b] + x) & _M32
    t = s[d] ^ s[a]
    s[d] = ((t >> 16) | (t << 16)) & _M32
    s[c] = (s[c] + s[d]) & _M32
    t = s[b] ^ s[c]
    s[b] = ((t >> 12) | (t << 20)) & _M32
    s[a] = (s[a] + s[b] + y) & _M32
    t = s[d] ^ s[a]
    s[d] = ((t >> 8) | (t << 24)) & _M32
    s[c] = (s[c] + s[d]) & _M32
    t = s[b] ^ s[c]
    s[b] = ((t >> 7) | (t << 25)) & _M32


def _compress(cv: Any, m: list[int], counter: int, block_len: int, flags: int) -> list[int]:
    s = list(cv) + list(_IV[:4]) + [counter & _M32, (counter >> 32) & _M32, block_len, flags]
    m = list(m)
    for r in range(7):
        _g(s, 0, 4, 8, 12, m[0], m[1])
        _g(s, 1, 5, 9, 13, m[2], m[3])
        _g(s, 2, 6, 10, 14, m[4], m[5])
        _g(s, 3, 7, 11, 15, m[6], m[7])
        _g(s, 0, 5, 10, 15, m[8], m[9])
        _g(s, 1, 6, 11, 12, m[10], m[11])
        _g(s, 2, 7, 8, 13, m[12], m[13])
        _g(s, 3, 4, 9, 14, m[14], m[15])
        if r < 6:
            m = [m[i] for i in _PERM]
    for i in range(8):
        s[i] ^= s[i + 8]
        s[i + 8] ^= cv[i]
    return s


def _words(block: bytes) -> list[int]:
    block = block.ljust(64, b"\0")
    return [int.from_bytes(block[i : i + 4], "little") for i in range(0, 64, 4)]


def _chunk_output(chunk: bytes, counter: int) -> tuple:
    cv: Any = _IV
    blocks = [chunk[i : i + 64] for i in range(0, len(chunk), 64)] or [b""]
    for i, b in enumerate(blocks[:-1]):
        cv = _compress(cv, _words(b), counter, 64, _CHUNK_START if i == 0 else 0)[:8]
    flags = _CHUNK_END | (_CHUNK_START if len(blocks) == 1 else 0)
    return (cv, _words(blocks[-1]), counter, len(blocks[-1]), flags)


def _chaining_value(out: tuple) -> list[int]:
    cv, m, counter, n, flags = out
    return _compress(cv, m, counter, n, flags)[:8]


def blake3(data: bytes) -> bytes:
    """BLAKE3 of `data`, 32 bytes."""
    chunks = [data[i : i + 1024] for i in range(0, len(data), 1024)] or [b""]
    stack: list[list[int]] = []
    for i, c in enumerate(chunks[:-1]):
        cv = _chaining_value(_chunk_output(c, i))
        total = i + 1
        while total & 1 == 0:
            cv = _chaining_value((_IV, stack.pop() + cv, 0, 64, _PARENT))
            total >>= 1
        stack.append(cv)
    out = _chunk_output(chunks[-1], len(chunks) - 1)
    while stack:
        out = (_IV, stack.pop() + _chaining_value(out), 0, 64, _PARENT)
    cv, m, _, n, flags = out
    return b"".join(w.to_bytes(4, "little") for w in _compress(cv, m, 0, n, flags | _ROOT)[:8])


def b3(data: bytes | str) -> str:
    return blake3(data.encode() if isinstance(data, str) else data).hex()


# From BLAKE3's test_vectors.json (input byte i is i % 251): checked when the module loads.
for _n, _want in {
    0: "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
    1: "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213",
    1024: "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7",
    1025: "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444",
    2048: "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a",
}.items():
    assert b3(bytes(i % 251 for i in range(_n))) == _want, f"the test's BLAKE3 is wrong for {_n} bytes"


# --------------------------------------------------------------------------------------------
# The CLI, git and HTTP helpers
# --------------------------------------------------------------------------------------------


def md(store: Path, *argv: str, device: str = "laptop", env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`memdir ARGV` on `store` as `device`; output captured as text."""
    e = server_env(store, MEMDIR_DEVICE=device, **(env or {}))
    return subprocess.run([str(MEMDIR_BIN), *argv], input=stdin, capture_output=True, text=True, env=e, timeout=timeout)


def ok(store: Path, *argv: str, **kw: Any) -> dict[str, Any]:
    """`memdir ARGV` that must succeed; its JSON answer."""
    p = md(store, *argv, **kw)
    assert p.returncode == 0, f"memdir {' '.join(argv)} exited {p.returncode}: {p.stderr}"
    return json.loads(p.stdout) if p.stdout.strip() else {}


def chunks(store: Path, session: str, **kw: Any) -> list[str]:
    """The contents of a session's chunks, in order."""
    return [c["content"] for c in ok(store, "fetch", session, "--limit", "1000", **kw)["chunks"]]


def verify(store: Path) -> dict[str, Any]:
    p = md(store, "verify-store")
    return {"rc": p.returncode, **(json.loads(p.stdout) if p.stdout.strip() else {"stderr": p.stderr})}


def replica_id(store: Path) -> str:
    return json.loads((store / ".memdir" / "replica").read_text())["id"]


def files_outside_meta(store: Path) -> dict[str, bytes]:
    """Every file of the store outside `.memdir/` and `.git/`, by relative path."""
    out = {}
    for p in sorted(store.rglob("*")):
        rel = p.relative_to(store)
        if rel.parts[0] in (".memdir", ".git") or not p.is_file() or p.is_symlink():
            continue
        out[str(rel)] = p.read_bytes()
    return out


def holders(root: Path, needles: list[bytes]) -> list[str]:
    """`file: needle` for every regular file under `root` that holds a needle (as is, or
    lower-cased: index terms)."""
    found = []
    for p in sorted(root.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        data = p.read_bytes()
        for n in needles:
            if n in data or n.lower() in data:
                found.append(f"{p.relative_to(root)}: {n[:40]!r}")
    return found


def named(problems: list[dict[str, Any]], fragment: str) -> list[dict[str, Any]]:
    """The reported problems whose path or message names `fragment`."""
    return [p for p in problems if fragment in p.get("path", "") or fragment in p.get("message", "")]


GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "someone",
    "GIT_AUTHOR_EMAIL": "someone@example.invalid",
    "GIT_COMMITTER_NAME": "someone",
    "GIT_COMMITTER_EMAIL": "someone@example.invalid",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(*argv: str, cwd: Path | None = None, git_dir: Path | None = None, stdin: bytes | None = None) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd or git_dir or "/nonexistent"), **GIT_ENV}
    pre = [f"--git-dir={git_dir}"] if git_dir is not None else []
    p = subprocess.run(["git", *pre, *argv], cwd=cwd, input=stdin, capture_output=True, env=env, timeout=60)
    assert p.returncode == 0, f"git {' '.join(argv)}: {p.stderr.decode()}"
    return p.stdout.decode()


def bare_remote(tmp: Path, name: str = "remote.git") -> Path:
    bare = tmp / name
    git("init", "-q", "--bare", "--initial-branch=main", str(bare), cwd=tmp)
    return bare


def forge(bare: Path, tmp: Path, change: Callable[[Path], None], message: str = "a plain git commit") -> str:
    """Changes the remote's main with a plain commit made in a scratch clone; returns it."""
    work = tmp / f"forge-{time.monotonic_ns()}"
    git("clone", "-q", "--branch", "main", str(bare), str(work), cwd=tmp)
    change(work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "--no-verify", "-m", message, cwd=work)
    git("push", "-q", "origin", "HEAD:main", cwd=work)
    return git("rev-parse", "HEAD", cwd=work).strip()


def remote_paths(bare: Path) -> list[str]:
    return git("ls-tree", "-r", "--name-only", "main", git_dir=bare).split()


def sync(store: Path, *argv: str, **kw: Any) -> dict[str, Any]:
    """A `memdir sync` that must succeed and push."""
    r = ok(store, "sync", *argv, **kw)
    assert r.get("pushed") is True, f"sync did not push: {r}"
    return r


def started_git_replica(tmp: Path, bare: Path, name: str, device: str = "laptop") -> Path:
    store = tmp / name
    ok(store, "init", device=device)
    sync(store, "--init", str(bare), device=device)
    return store


@pytest.fixture
def hubs() -> Iterator[Callable[..., HttpServer]]:
    """Factory: `hub = hubs(store, env={...})` starts `memdir serve --transport http` on
    loopback as device `hub`; every hub is stopped at teardown."""
    started: list[HttpServer] = []

    def start(store: Path, env: dict[str, str] | None = None) -> HttpServer:
        srv = start_server(store, "http", env={"MEMDIR_DEVICE": "hub", **(env or {})})
        started.append(srv)
        return srv

    yield start
    for s in started:
        s.stop()


def policy_hub(tmp: Path, hubs: Callable[..., HttpServer], seed: Callable[[Path, dict[str, str]], None] = lambda s, e: None) -> tuple[HttpServer, Path, dict[str, str]]:
    """A hub store under HUB_POLICY, seeded by its admin, served; (server, store, env)."""
    store = tmp / "hub"
    cfg = tmp / "hub-config.toml"
    cfg.write_text(HUB_POLICY)
    env = {"MEMDIR_CONFIG": str(cfg), "PHONE_TOKEN": PHONE_TOKEN}
    ok(store, "init", device="hub", env=env)
    seed(store, env)
    return hubs(store, env=env), store, env


def call(srv: HttpServer, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    """One REST request; (status, JSON body)."""
    headers = [("Authorization", f"Bearer {token}")] if token else []
    r = srv.request(method, path, body, headers)
    return r.status, r.json


def item(path: str, data: str, frm: int = 0, prefix: str | None = None) -> dict[str, Any]:
    it: dict[str, Any] = {"path": path, "from": frm, "hash": b3(data), "data": data}
    if prefix is not None:
        it["prefix"] = prefix
    return it


def push(srv: HttpServer, items: list[dict[str, Any]], token: str | None = None) -> tuple[int, Any]:
    return call(srv, "POST", "/api/v1/sync/push", {"format": SYNC_FORMAT, "items": items}, token)


def pull_one(srv: HttpServer, path: str, token: str | None = None) -> str:
    """A whole file through `/api/v1/sync/pull`, its hash checked."""
    status, page = call(srv, "POST", "/api/v1/sync/pull", {"want": [{"path": path, "from": 0}]}, token)
    assert status == 200, page
    (it,) = page["items"]
    assert b3(it["data"]) == it["hash"], "the test's BLAKE3 disagrees with memdir's"
    return it["data"]


def refused_or_reported(status: int, body: Any, path: str) -> bool:
    """Whether a push was refused (an error status) or answered with a report naming `path`
    and nothing of it applied."""
    if status >= 400:
        return True
    return body.get("applied", 0) == 0 and bool(named(body.get("reported", []), path))


def pretty(v: Any) -> str:
    """memdir's canonical JSON (sorted keys, two-space indent, trailing newline)."""
    return json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def hlc_after(hlc: str, ms: int = 1000) -> str:
    """An HLC stamp `ms` after `hlc` (YYYYMMDDTHHMMSSmmmZ-CCCC)."""
    epoch_ms = calendar.timegm(time.strptime(hlc[:15], "%Y%m%dT%H%M%S")) * 1000 + int(hlc[15:18]) + ms
    s, milli = divmod(epoch_ms, 1000)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(s)) + f"{milli:03d}Z-0000"


def head_entry(store: Path, category: str) -> dict[str, Any]:
    """The newest history entry of a category, as on disk."""
    files = sorted((store / "history" / category).glob("*.json"))
    return json.loads(files[-1].read_text())


def history_entry(category: str, parent: dict[str, Any] | None, replica: str, actor: str, op: str, content: Any) -> tuple[str, str]:
    """A history entry another replica could have written: (path, bytes)."""
    base_hlc = parent["id"][:24] if parent else time.strftime("%Y%m%dT%H%M%S000Z-0000", time.gmtime())
    hlc = hlc_after(base_hlc)
    vv = dict(parent["vv"]) if parent else {}
    vv[replica] = vv.get(replica, 0) + 1
    e = {
        "actor": actor,
        "content": content,
        "hash": None if content is None else b3(pretty(content)),
        "id": f"{hlc}_{replica}",
        "op": op,
        "parents": [parent["id"]] if parent else [],
        "reason": None,
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "vv": vv,
    }
    return f"history/{category}/{e['id']}.json", pretty(e)


def chunk_line(session: str, replica: str, seq: int, content: str, project: str = "", **extra: Any) -> str:
    hlc = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{seq:03d}Z-0000"
    line = {"session_id": session, "replica": replica, "seq": seq, "hlc": hlc, "ts": "2026-01-01T00:00:00.000Z", "project": project, "metadata": {}, "content": content, **extra}
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n"


class FakeServer:
    """A loopback HTTP server whose answers a function decides: `answer(method, path, body)`
    returns (status, JSON). Records every request's headers."""

    def __init__(self, answer: Callable[[str, str, Any], tuple[int, Any]]):
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                outer.requests.append((self.command, self.path, dict(self.headers)))
                status, body = answer(self.command, self.path, json.loads(raw) if raw else None)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_servers() -> Iterator[Callable[..., FakeServer]]:
    made: list[FakeServer] = []

    def make(answer: Callable[[str, str, Any], tuple[int, Any]]) -> FakeServer:
        s = FakeServer(answer)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def run_bounded(argv: list[str], env: dict[str, str], seconds: float, stdin: bytes = b"") -> tuple[int | None, str]:
    """Runs a process for at most `seconds`; (exit code or None if it had to be killed,
    stderr)."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        _, err = p.communicate(stdin, timeout=seconds)
        return p.returncode, err.decode(errors="replace")
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        return None, err.decode(errors="replace")


# --------------------------------------------------------------------------------------------
# High
# --------------------------------------------------------------------------------------------


def test_an_http_peer_cannot_rewrite_another_devices_chunks(tmp_path, hubs):
    """Bug 1. A device that may only ingest into "mobile" (and may not delete) pushes a
    whole copy of the hub's own segment with one line more, every line's text and project
    changed. The hub's own segment is never taken from anyone: the push is refused or
    reported, and the hub's chunks read as before."""

    def seed(store: Path, env: dict[str, str]) -> None:
        for text in ["the hub's first fact", "the hub's second fact", "the hub's third fact"]:
            ok(store, "ingest", "--session-id", "s1", "--project", "work", "--text", text, device="hub", env=env)

    srv, hub, env = policy_hub(tmp_path, hubs, seed)
    path = f"sessions/s1/{replica_id(hub)}.jsonl"
    before = (hub / path).read_bytes()
    original = pull_one(srv, path, PHONE_TOKEN)
    assert original.encode() == before
    # The phone's forgery: the same lines (session, replica, seq, hlc) with its own words.
    lines = [json.loads(l) for l in original.splitlines()]
    for l in lines:
        l["content"] = "the phone rewrote this: " + l["content"]
        l["project"] = "mobile"
    extra = dict(lines[-1], seq=len(lines), hlc=hlc_after(lines[-1]["hlc"]), content="one line more")
    forged = "".join(json.dumps(l, separators=(",", ":")) + "\n" for l in [*lines, extra])
    status, body = push(srv, [item(path, forged)], PHONE_TOKEN)

    assert chunks(hub, "s1", device="hub", env=env) == [
        "the hub's first fact",
        "the hub's second fact",
        "the hub's third fact",
    ], f"the peer rewrote the hub's chunks (push answered {status}: {body})"
    assert (hub / path).read_bytes() == before
    assert refused_or_reported(status, body, path), f"the refusal is not visible: {status} {body}"
    v = verify(hub)
    assert v["rc"] == 0 and v.get("ok") is True, v


def test_a_plain_commit_on_the_remote_cannot_truncate_a_replicas_segment_or_remove_its_history(tmp_path):
    """Bug 2. A plain git commit on the remote truncates this replica's own segment to one
    line with other text and removes one of its history files. The next sync takes none of
    it: the replica's chunks and versions stay, the refusal is reported, verify-store stays
    clean, and a replica that syncs afterwards gets the original chunks too."""
    bare = bare_remote(tmp_path)
    a = tmp_path / "a"
    ok(a, "init")
    texts = ["alpha fact one", "alpha fact two", "alpha fact three"]
    for t in texts:
        ok(a, "ingest", "--session-id", "s1", "--text", t)
    ok(a, "write", "plan", "--data", json.dumps({"step": "one"}))
    ok(a, "write", "plan", "--data", json.dumps({"step": "two"}))
    sync(a, "--init", str(bare))
    seg = f"sessions/s1/{replica_id(a)}.jsonl"
    versions = sorted(p.name for p in (a / "history" / "plan").glob("*.json"))
    assert len(versions) == 2

    def rewrite(w: Path) -> None:
        first = json.loads((w / seg).read_text().splitlines()[0])
        first["content"] = "the remote's text"
        (w / seg).write_text(json.dumps(first, separators=(",", ":")) + "\n")
        (w / "history" / "plan" / versions[0]).unlink()

    forge(bare, tmp_path, rewrite)
    r = ok(a, "sync")

    assert chunks(a, "s1") == texts, f"the remote's commit changed this replica's chunks: {r}"
    assert sorted(p.name for p in (a / "history" / "plan").glob("*.json")) == versions, "a history file was removed"
    assert ok(a, "history", "plan")["total"] == 2
    assert named(r["reported"], seg), f"the refused rewrite of {seg} is not reported: {r['reported']}"
    assert named(r["reported"], versions[0]), f"the refused removal of {versions[0]} is not reported: {r['reported']}"
    v = verify(a)
    assert v["rc"] == 0 and v.get("ok") is True, v
    # Every replica that syncs later holds the original chunks and versions.
    b = started_git_replica(tmp_path, bare, "b", device="desk")
    assert chunks(b, "s1", device="desk") == texts
    assert ok(b, "history", "plan", device="desk")["total"] == 2


def test_a_forgotten_category_version_reaches_an_http_hub_and_the_replicas_it_serves(tmp_path, hubs):
    """Bug 3. A version forgotten on a replica after it reached the hub: the next sync takes
    the forget to the hub (whose copy is the same version, content and all), so the hub and
    every replica that syncs from it afterwards no longer hold the text."""
    forgotten = "the launch code is " + "tangerine-walrus-42"
    hub = tmp_path / "hub"
    ok(hub, "init", device="hub")
    srv = hubs(hub)
    url = f"http://{srv.host_header}"
    a = tmp_path / "a"
    ok(a, "write", "plan", "--data", json.dumps({"note": forgotten}))
    ok(a, "write", "plan", "--data", json.dumps({"note": "nothing secret"}))
    sync(a, "--remote", url)
    assert holders(hub, [forgotten.encode()]), "setup: the version did not reach the hub"
    ok(a, "forget", "--category", "plan", "--version", "1", "--yes")
    assert not holders(a, [forgotten.encode()]), "setup: a local forget leaves the text"
    r = ok(a, "sync", "--remote", url)

    assert not holders(hub, [forgotten.encode()]), f"the hub keeps the forgotten text ({r['reported']}): {holders(hub, [forgotten.encode()])}"
    c = tmp_path / "c"
    sync(c, "--remote", url, device="desk")
    assert ok(c, "history", "plan", device="desk")["total"] == 2
    assert not holders(c, [forgotten.encode()]), "a new replica got the forgotten text from the hub"


# --------------------------------------------------------------------------------------------
# First sight: a segment a replica has never held (found by bench/replication.sh)
# --------------------------------------------------------------------------------------------


def rewrite_every_line(w: Path, seg: str, words: str) -> None:
    lines = [json.loads(l) for l in (w / seg).read_text().splitlines()]
    for l in lines:
        l["content"] = f"{words} {l['content']}"
    (w / seg).write_text("".join(json.dumps(l, separators=(",", ":")) + "\n" for l in lines))


def seal_of(seg: str) -> str:
    return seg.removesuffix(".jsonl") + ".head"


def planted(store: Path, word: bytes) -> list[str]:
    return [rel for rel, data in files_outside_meta(store).items() if word in data]


FIRST_TEXTS = ["the deploy runs on Fridays", "the staging database is db-7", "ask Ana before merging"]


def replica_with_a_session(tmp: Path, bare: Path) -> tuple[Path, str]:
    a = tmp / "a"
    ok(a, "init")
    for t in FIRST_TEXTS:
        ok(a, "ingest", "--session-id", "s1", "--text", t)
    sync(a, "--init", str(bare))
    seg = f"sessions/s1/{replica_id(a)}.jsonl"
    assert (a / seal_of(seg)).is_file() and seal_of(seg) in remote_paths(bare), "the seal travels with its segment"
    return a, seg


def test_a_remote_cannot_plant_a_rewrite_of_a_segment_a_replica_has_never_held(tmp_path):
    """A's segment reached the remote with its seal; a plain commit rewrites every line. B,
    which holds neither the segment nor any seal of A, takes none of it: those are not the
    lines A sealed. Before seals B took the rewrite, and then refused A's own copy for good."""
    bare = bare_remote(tmp_path)
    a, seg = replica_with_a_session(tmp_path, bare)
    forge(bare, tmp_path, lambda w: rewrite_every_line(w, seg, "PLANTED"))
    b = tmp_path / "b"
    ok(b, "init", device="desk")
    r = sync(b, "--init", str(bare), device="desk")
    assert not (b / seg).exists(), "the rewrite was taken"
    assert [p["kind"] for p in named(r["reported"], seg)] == ["unsealed"], r["reported"]
    assert planted(b, b"PLANTED") == []
    # A syncs: its own lines go back to the remote, and B takes them.
    sync(a)
    sync(b, device="desk")
    assert chunks(b, "s1", device="desk") == FIRST_TEXTS
    for rel in (seg, seal_of(seg)):
        assert (b / rel).read_bytes() == (a / rel).read_bytes(), rel
    v = verify(b)
    assert v["rc"] == 0 and v.get("ok") is True, v


def test_a_copy_taken_before_its_seal_gives_way_to_the_copy_the_seal_vouches_for(tmp_path):
    """B holds a rewritten copy of A's segment (taken from a remote before memdir sealed
    segments). When A's seal arrives it contradicts B's copy, and A's copy, which the seal
    vouches for line by line, replaces it: B's chunks, files and index hold A's text and
    nothing of the rewrite."""
    bare = bare_remote(tmp_path)
    a, seg = replica_with_a_session(tmp_path, bare)
    b = tmp_path / "b"
    ok(b, "init", device="desk")
    (b / seg).parent.mkdir(parents=True)
    (b / seg).write_bytes((a / seg).read_bytes())
    rewrite_every_line(b, seg, "PLANTED")
    assert ok(b, "search", "PLANTED", device="desk")["results"], "the rewrite is B's memory before the sync"
    sync(b, "--init", str(bare), device="desk")
    assert chunks(b, "s1", device="desk") == FIRST_TEXTS
    assert planted(b, b"PLANTED") == []
    assert ok(b, "search", "PLANTED", device="desk")["results"] == [], "the rewrite is still in the index"
    assert (b / seg).read_bytes() == (a / seg).read_bytes()
    # B's own commit of its copy never changed A's.
    sync(a)
    assert chunks(a, "s1") == FIRST_TEXTS
    v = verify(b)
    assert v["rc"] == 0 and v.get("ok") is True, v


def test_a_seal_not_made_by_its_replica_is_refused_and_so_are_the_lines_it_vouches_for(tmp_path):
    """Two forgeries of A's next session on the remote, each with a rewrite of its lines:
    a seal whose leaves were edited (its signature fails), and a seal made by another store
    that took A's replica id (a valid signature under another key). B holds a seal of A from
    an earlier sync, so it knows A's key: it refuses both seals and both rewrites."""
    bare = bare_remote(tmp_path)
    a, _ = replica_with_a_session(tmp_path, bare)
    b = started_git_replica(tmp_path, bare, "b", device="desk")
    ok(a, "ingest", "--session-id", "s2", "--text", "the second session's fact")
    ok(a, "ingest", "--session-id", "s3", "--text", "the third session's fact")
    sync(a)
    seg2 = f"sessions/s2/{replica_id(a)}.jsonl"
    seg3 = f"sessions/s3/{replica_id(a)}.jsonl"

    # Another store that calls itself A (its replica file names A's id) writes s3 and seals it.
    mallory = tmp_path / "mallory"
    ok(mallory, "init", device="laptop")
    ok(mallory, "ingest", "--session-id", "warmup", "--text", "x", device="laptop")
    rec = json.loads((mallory / ".memdir" / "replica").read_text())
    rec["id"] = replica_id(a)
    (mallory / ".memdir" / "replica").write_text(json.dumps(rec))
    ok(mallory, "ingest", "--session-id", "s3", "--text", "PLANTED by another key", device="laptop")
    msync = bare_remote(tmp_path, "mallory.git")
    sync(mallory, "--init", str(msync), device="laptop")  # seals s3 under mallory's key
    assert (mallory / seal_of(seg3)).is_file()

    def forge_both(w: Path) -> None:
        rewrite_every_line(w, seg2, "PLANTED")
        seal = json.loads((w / seal_of(seg2)).read_text())
        seal["leaves"] = seal["leaves"][::-1]
        (w / seal_of(seg2)).write_text(json.dumps(seal) + "\n")
        for rel in (seg3, seal_of(seg3)):
            (w / rel).write_bytes((mallory / rel).read_bytes())

    forge(bare, tmp_path, forge_both)
    r = sync(b, device="desk")
    kinds = {p["path"]: p["kind"] for p in r["reported"]}
    assert kinds.get(seal_of(seg2)) == "forged" and kinds.get(seal_of(seg3)) == "forged", r["reported"]
    assert kinds.get(seg2) == "unsealed" and kinds.get(seg3) == "unsealed", r["reported"]
    assert planted(b, b"PLANTED") == []
    # A's own copies come back to the remote with A's next sync; B then takes A's lines.
    sync(a)
    sync(b, device="desk")
    assert chunks(b, "s2", device="desk") == ["the second session's fact"]
    assert chunks(b, "s3", device="desk") == ["the third session's fact"]
    assert planted(b, b"PLANTED") == []
    v = verify(b)
    assert v["rc"] == 0 and v.get("ok") is True, v
    # verify-store checks seals: one edited by hand, and a segment rewritten under its seal.
    seal = json.loads((b / seal_of(seg2)).read_text())
    seal["leaves"] = seal["leaves"][::-1]
    (b / seal_of(seg2)).write_text(json.dumps(seal) + "\n")
    rewrite_every_line(b, seg3, "edited")
    v = verify(b)
    found = {(q["kind"], q["path"]) for q in v["problems"]}
    assert v["rc"] == 1 and {("seal", seal_of(seg2)), ("seal", seal_of(seg3))} <= found, v


def test_a_line_written_before_a_forget_of_an_older_one_is_sealed_and_travels(tmp_path):
    """Found by bench/replication.sh: a forget rewrites the seal (the forgotten line's salt
    goes), which made the seal look newer than its segment, and the next sync did not seal the
    line ingested before the forget; every other replica refused it as unsealed."""
    bare = bare_remote(tmp_path)
    a = tmp_path / "a"
    ok(a, "init")
    ok(a, "ingest", "--session-id", "s1", "--text", "the old fact")
    sync(a, "--init", str(bare))
    ok(a, "ingest", "--session-id", "s1", "--text", "the new fact")
    seq = ok(a, "fetch", "s1")["chunks"][0]["chunk_id"].split(":")[1]
    ok(a, "forget", "--session-id", "s1", "--chunk-id", f"{replica_id(a)}:{seq}", "--yes")
    r = sync(a)
    assert r["reported"] == [], r
    b = started_git_replica(tmp_path, bare, "b", device="desk")
    assert chunks(b, "s1", device="desk") == ["", "the new fact"]
    v = verify(b)
    assert v["rc"] == 0 and v.get("ok") is True, v


def test_a_seal_under_another_key_is_refused_on_first_sight(tmp_path):
    """A replica id ends in its key's id, so a replica that has never seen a seal of A still
    knows A's key: another store that took A's id seals a planted session under its own key,
    and a new replica refuses the seal and the lines on its very first sync."""
    bare = bare_remote(tmp_path)
    a, _ = replica_with_a_session(tmp_path, bare)
    rid = replica_id(a)
    assert re.fullmatch(r"[a-z0-9-]+-[a-z2-7]{16}", rid), rid
    mallory = tmp_path / "mallory"
    ok(mallory, "init", device="laptop")
    ok(mallory, "ingest", "--session-id", "warmup", "--text", "x", device="laptop")
    rec = json.loads((mallory / ".memdir" / "replica").read_text())
    rec["id"] = rid
    (mallory / ".memdir" / "replica").write_text(json.dumps(rec))
    # Session s0 sorts before A's s1: the forged seal is the first seal of A that B meets.
    ok(mallory, "ingest", "--session-id", "s0", "--text", "PLANTED under another key", device="laptop")
    sync(mallory, "--init", str(bare_remote(tmp_path, "mallory.git")), device="laptop")
    seg = f"sessions/s0/{rid}.jsonl"

    def plant(w: Path) -> None:
        (w / seg).parent.mkdir(parents=True, exist_ok=True)
        for rel in (seg, seal_of(seg)):
            (w / rel).write_bytes((mallory / rel).read_bytes())

    forge(bare, tmp_path, plant)
    b = tmp_path / "b"
    ok(b, "init", device="desk")
    r = sync(b, "--init", str(bare), device="desk")
    kinds = {p["path"]: p["kind"] for p in r["reported"]}
    assert kinds.get(seal_of(seg)) == "forged" and kinds.get(seg) == "unsealed", r["reported"]
    assert planted(b, b"PLANTED") == []
    assert chunks(b, "s1", device="desk") == FIRST_TEXTS, "A's own lines still travel"


def test_an_own_seal_removed_by_hand_is_written_again_by_the_next_sync(tmp_path):
    """The note of what was sealed watches the seal too: a seal removed by hand is made again
    (the same bytes: salts come from the secret), and other replicas keep taking lines."""
    bare = bare_remote(tmp_path)
    a, seg = replica_with_a_session(tmp_path, bare)
    before = (a / seal_of(seg)).read_bytes()
    (a / seal_of(seg)).unlink()
    sync(a)
    assert (a / seal_of(seg)).read_bytes() == before
    b = started_git_replica(tmp_path, bare, "b", device="desk")
    assert chunks(b, "s1", device="desk") == FIRST_TEXTS


def test_a_store_copied_elsewhere_still_seals_the_lines_it_wrote_before(tmp_path):
    """A store copied to another path mints a new replica id (and key) for what it writes
    next; the segments of its old id are still sealed with the old key, which the copy keeps,
    so other replicas take them."""
    a = tmp_path / "a"
    ok(a, "init")
    for t in FIRST_TEXTS:
        ok(a, "ingest", "--session-id", "s1", "--text", t)
    old_id = replica_id(a)
    moved = tmp_path / "moved"
    shutil.copytree(a, moved)
    ok(moved, "ingest", "--session-id", "s1", "--text", "written after the move")
    assert replica_id(moved) != old_id
    bare = bare_remote(tmp_path)
    r = sync(moved, "--init", str(bare))
    assert r["reported"] == [], r
    assert (moved / f"sessions/s1/{old_id}.head").is_file()
    b = started_git_replica(tmp_path, bare, "b", device="desk")
    assert sorted(chunks(b, "s1", device="desk")) == sorted([*FIRST_TEXTS, "written after the move"])
    v = verify(b)
    assert v["rc"] == 0 and v.get("ok") is True, v


def with_legacy_id(store: Path, rid: str, keep_key: bool) -> None:
    """Gives a store a replica id from before keys (its segments from now on are `rid`'s)."""
    rec = json.loads((store / ".memdir" / "replica").read_text())
    rec["id"] = rid
    if not keep_key:
        rec.pop("key", None)
    (store / ".memdir" / "replica").write_text(json.dumps(rec))


def test_a_replica_id_from_before_keys_trusts_the_first_key_seen(tmp_path):
    """An id minted before keys (`laptop-abcd`) names no key: a replica trusts the key of the
    first seal of it it takes, and refuses a seal under another key from then on."""
    bare = bare_remote(tmp_path)
    a = tmp_path / "a"
    ok(a, "init")
    ok(a, "ingest", "--session-id", "warmup", "--text", "x")
    with_legacy_id(a, "laptop-abcd", keep_key=False)
    ok(a, "ingest", "--session-id", "s1", "--text", "the legacy replica's fact")
    sync(a, "--init", str(bare))
    b = started_git_replica(tmp_path, bare, "b", device="desk")
    assert chunks(b, "s1", device="desk") == ["the legacy replica's fact"]

    mallory = tmp_path / "mallory"
    ok(mallory, "init", device="laptop")
    ok(mallory, "ingest", "--session-id", "warmup", "--text", "x", device="laptop")
    with_legacy_id(mallory, "laptop-abcd", keep_key=True)
    ok(mallory, "ingest", "--session-id", "s0", "--text", "PLANTED under another key", device="laptop")
    sync(mallory, "--init", str(bare_remote(tmp_path, "mallory.git")), device="laptop")
    seg = "sessions/s0/laptop-abcd.jsonl"

    def plant(w: Path) -> None:
        (w / seg).parent.mkdir(parents=True, exist_ok=True)
        for rel in (seg, seal_of(seg)):
            (w / rel).write_bytes((mallory / rel).read_bytes())

    forge(bare, tmp_path, plant)
    r = sync(b, device="desk")
    kinds = {p["path"]: p["kind"] for p in r["reported"]}
    assert kinds.get(seal_of(seg)) == "forged" and kinds.get(seg) == "unsealed", r["reported"]
    assert planted(b, b"PLANTED") == []


def tamper_proofs(w: Path, seg: str) -> None:
    """Withdraws every salt of a seal and makes up its inner hashes: the signature still holds
    (proofs are not signed), the proofs prove nothing."""
    seal = json.loads((w / seal_of(seg)).read_text())
    seal["salts"] = "0" * len(seal["salts"])
    seal["inners"] = "7" * len(seal["inners"])
    (w / seal_of(seg)).write_text(json.dumps(seal) + "\n")


def test_proofs_withdrawn_on_the_remote_neither_block_nor_erase_lines(tmp_path):
    """A plain commit withdraws every proof of A's seal (a valid signature over the same
    leaves). B, which holds A's lines, keeps them and its own proofs, and keeps taking A's new
    lines; its seal still proves every line it holds, and its next commit puts the proofs
    back on the remote for replicas that have none of A's lines yet."""
    bare = bare_remote(tmp_path)
    a, seg = replica_with_a_session(tmp_path, bare)
    b = started_git_replica(tmp_path, bare, "b", device="desk")
    assert chunks(b, "s1", device="desk") == FIRST_TEXTS
    held_seal = (b / seal_of(seg)).read_bytes()
    forge(bare, tmp_path, lambda w: tamper_proofs(w, seg))
    sync(b, device="desk")
    assert chunks(b, "s1", device="desk") == FIRST_TEXTS
    assert (b / seal_of(seg)).read_bytes() == held_seal, "B took proofs that prove nothing"
    # B's merge commit carried its proofs back to the remote: a new replica takes A's lines.
    c = started_git_replica(tmp_path, bare, "c", device="tablet")
    assert chunks(c, "s1", device="tablet") == FIRST_TEXTS
    ok(a, "ingest", "--session-id", "s1", "--text", "a fact after the forgery")
    sync(a)
    for store, device in ((b, "desk"), (c, "tablet")):
        sync(store, device=device)
        assert chunks(store, "s1", device=device) == [*FIRST_TEXTS, "a fact after the forgery"], store
        assert (store / seal_of(seg)).read_bytes() == (a / seal_of(seg)).read_bytes(), store
        v = verify(store)
        assert v["rc"] == 0 and v.get("ok") is True, v


def test_a_forged_forget_of_a_line_not_yet_written_does_not_block_it(tmp_path):
    """A plain commit appends to A's segment the tombstone of its next line (seq one more, a
    later hlc), before A writes it. No seal covers that line: B does not take it, and takes
    A's real line when it comes. Before, B took the tombstone and then refused A's line
    for good."""
    bare = bare_remote(tmp_path)
    a, seg = replica_with_a_session(tmp_path, bare)
    b = started_git_replica(tmp_path, bare, "b", device="desk")

    def forget_ahead(w: Path) -> None:
        last = json.loads((w / seg).read_text().splitlines()[-1])
        tomb = dict(last, seq=last["seq"] + 1, hlc="29991231T235959999Z-0000", ts="2999-12-31T23:59:59.999Z",
                    content="", project="", metadata={"forgotten": "2999-12-31T23:59:59.999Z"})
        with open(w / seg, "a") as f:
            f.write(json.dumps(tomb, separators=(",", ":")) + "\n")

    forge(bare, tmp_path, forget_ahead)
    sync(b, device="desk")
    assert chunks(b, "s1", device="desk") == FIRST_TEXTS
    ok(a, "ingest", "--session-id", "s1", "--text", "the line the forgery named")
    sync(a)
    sync(b, device="desk")
    assert chunks(b, "s1", device="desk") == [*FIRST_TEXTS, "the line the forgery named"]
    assert (b / seg).read_bytes() == (a / seg).read_bytes()


def test_an_unreadable_signing_key_is_never_replaced(tmp_path):
    """A replica whose signing key was damaged refuses to seal (corrupt, naming the file)
    rather than minting a new key, which would make every other replica refuse its seals."""
    bare = bare_remote(tmp_path)
    a, _ = replica_with_a_session(tmp_path, bare)
    rec_path = a / ".memdir" / "replica"
    for damaged in ["zz" * 32, "é" * 32, 7]:
        rec = json.loads(rec_path.read_text())
        rec["key"] = damaged
        rec_path.write_text(json.dumps(rec))
        ok(a, "ingest", "--session-id", "s1", "--text", f"after the damage {damaged!r}")
        p = md(a, "sync")
        assert p.returncode == 7, (p.returncode, p.stderr)
        assert "signing key" in p.stderr and "replica" in p.stderr, p.stderr
        assert json.loads(rec_path.read_text())["key"] == damaged


# --------------------------------------------------------------------------------------------
# Medium
# --------------------------------------------------------------------------------------------


def test_a_gitignore_committed_on_the_remote_does_not_stop_sessions_and_history_from_syncing(tmp_path):
    """Bug 4. A `.gitignore` committed on the remote (`*.jsonl`, `history/*`) is a file
    outside the layout: it never comes into the replica, and what the replica writes
    afterwards reaches the remote."""
    bare = bare_remote(tmp_path)
    a = started_git_replica(tmp_path, bare, "a")
    ok(a, "write", "plan", "--data", json.dumps({"step": "one"}))
    sync(a)
    ours = (a / ".gitignore").read_bytes()

    def ignore(w: Path) -> None:
        (w / ".gitignore").write_text(".memdir/\n*.jsonl\nhistory/*\n")

    forge(bare, tmp_path, ignore)
    first = ok(a, "sync")
    ok(a, "ingest", "--session-id", "later", "--text", "written after the remote's commit")
    ok(a, "write", "later", "--data", json.dumps({"k": 1}))
    r = sync(a)

    on_remote = remote_paths(bare)
    seg = f"sessions/later/{replica_id(a)}.jsonl"
    assert seg in on_remote, f"the new session never reached the remote ({r}); the remote holds {on_remote}"
    assert any(p.startswith("history/later/") for p in on_remote), f"the new history never reached the remote: {on_remote}"
    assert (a / ".gitignore").read_bytes() == ours, "the remote's .gitignore was taken"
    assert named(first["reported"], ".gitignore"), f"the refused .gitignore is not reported: {first['reported']}"


def _add_tree_entry(bare: Path, directory: str, mode: str, name: str, sha: str, kind: str) -> None:
    """Adds an entry to `directory` (a top-level tree) of the remote's main with plumbing
    (plain git refuses such names), as a new commit."""
    head = git("rev-parse", "main", git_dir=bare).strip()
    root = git("ls-tree", "main", git_dir=bare)
    sub_sha = next(l.split()[2] for l in root.splitlines() if l.split("\t")[1] == directory)
    sub = git("ls-tree", sub_sha, git_dir=bare) + f"{mode} {kind} {sha}\t{name}\n"
    new_sub = git("mktree", git_dir=bare, stdin=sub.encode()).strip()
    new_root_lines = [
        (f"040000 tree {new_sub}\t{directory}" if l.split("\t")[1] == directory else l) for l in root.splitlines()
    ]
    new_root = git("mktree", git_dir=bare, stdin=("\n".join(new_root_lines) + "\n").encode()).strip()
    commit = git("commit-tree", new_root, "-p", head, "-m", f"an entry named {name!r} in {directory}/", git_dir=bare).strip()
    git("update-ref", "refs/heads/main", commit, head, git_dir=bare)


def test_a_tree_entry_named_dotdot_on_the_remote_is_reported_and_every_replica_keeps_syncing(tmp_path):
    """Bug 5. A tree entry named `..` under `sessions/` on the remote: nothing escapes, and
    replication goes on. Each replica's sync reports the entry and skips it, takes the rest,
    pushes, and leaves no staged transaction; later syncs work too."""
    bare = bare_remote(tmp_path)
    a = started_git_replica(tmp_path, bare, "a")
    ok(a, "ingest", "--session-id", "s1", "--text", "from a")
    sync(a)
    b = started_git_replica(tmp_path, bare, "b", device="desk")
    assert chunks(b, "s1", device="desk") == ["from a"]
    blob = git("hash-object", "-w", "--stdin", git_dir=bare, stdin=b'{"x":1}\n').strip()
    _add_tree_entry(bare, "sessions", "100644", "..", blob, "blob")

    ok(b, "write", "from_b", "--data", json.dumps({"b": 1}), device="desk")
    p = md(b, "sync", device="desk")
    assert p.returncode == 0, f"a `..` entry on the remote stops replica b's sync (exit {p.returncode}): {p.stderr}"
    rb = json.loads(p.stdout)
    assert rb["pushed"] is True, rb
    assert named(rb["reported"], ".."), f"the `..` entry is not reported: {rb['reported']}"
    for _ in range(2):
        p = md(a, "sync")
        assert p.returncode == 0, f"replica a's sync fails (exit {p.returncode}): {p.stderr}"
    assert ok(a, "read", "from_b")["data"] == {"b": 1}
    for store, device in ((a, "laptop"), (b, "desk")):
        st = ok(store, "status", device=device)
        assert st["pending_staging"] == [], f"{store.name} keeps a staged transaction: {st['pending_staging']}"
    escaped = [str(f) for f in tmp_path.rglob("*") if f.is_file() and not f.is_symlink() and f.read_bytes() == b'{"x":1}\n']
    assert escaped == [], f"the entry's bytes were written: {escaped}"


def test_a_sync_server_whose_pages_never_end_cannot_keep_a_sync_running(tmp_path, fake_servers):
    """Bug 6. A server whose every page asks for one more (each page brings one small, valid
    file the diff never announced, and names another one as still to come): the sync's page
    budget, counted from what the diff announced, ends it with a clear error well within a
    minute (today it loops for good)."""
    pages = {"n": 0}

    def seg(n: int) -> str:
        return f"sessions/s{n}/peer-aaaa.jsonl"

    def answer(method: str, path: str, body: Any) -> tuple[int, Any]:
        if path == "/api/v1/sync/manifest":
            return 200, {"format": SYNC_FORMAT, "root": "f" * 64, "buckets": {"sessions/s0": "e" * 64}, "files": 1}
        if path == "/api/v1/sync/diff":
            return 200, {"push": [], "pull": [{"path": seg(0), "from": 0}], "diverged": []}
        if path == "/api/v1/sync/pull":
            n = pages["n"] = pages["n"] + 1
            data = chunk_line(f"s{n}", "peer-aaaa", 0, f"page {n}")
            return 200, {"format": SYNC_FORMAT, "items": [item(seg(n), data)], "rest": [{"path": seg(n + 1), "from": 0}]}
        return 404, {"error": {"code": "not_found", "message": path, "hints": []}}

    srv = fake_servers(answer)
    a = tmp_path / "a"
    ok(a, "write", "plan", "--data", json.dumps({"k": 1}))
    rc, err = run_bounded([str(MEMDIR_BIN), "sync", "--remote", srv.url], server_env(a, MEMDIR_DEVICE="laptop"), 60)
    assert rc is not None, f"memdir sync still running after 60 s and {pages['n']} pages"
    assert rc != 0 and "error" in err, f"an endless sync must end with an error, got exit {rc}: {err}"
    assert ok(a, "read", "plan")["data"] == {"k": 1}


def _seed_notes(store: Path, env: dict[str, str]) -> None:
    ok(store, "write", "notes_trip", "--data", json.dumps({"text": "packing list"}), device="hub", env=env)


def test_a_pushed_history_entry_cannot_name_another_device_as_its_actor(tmp_path, hubs):
    """Bug 7. The phone pushes a version of a category it may write, naming device "laptop"
    as its actor. The actor of a pushed record is the pushing device: the hub's history never
    shows "laptop" (the entry is refused, or recorded as the phone's)."""
    srv, hub, env = policy_hub(tmp_path, hubs, _seed_notes)
    path, data = history_entry("notes_trip", head_entry(hub, "notes_trip"), "phone-abcd", "laptop", "write", {"text": "the phone's words"})
    status, body = push(srv, [item(path, data)], PHONE_TOKEN)

    versions = ok(hub, "history", "notes_trip", device="hub", env=env)["versions"]
    actors = [v["actor"] for v in versions]
    assert "laptop" not in actors, f"history shows a version by laptop that the phone pushed ({status}: {body}): {actors}"
    assert status >= 400 or actors[0] == "phone", (status, body, actors)
    assert ok(hub, "list", device="hub", env=env)["categories"][0].get("updated_by") != "laptop"


def test_a_sync_push_cannot_bypass_the_hubs_redaction(tmp_path, hubs):
    """Bug 8. An AWS key, a GitHub token and a `<private>` span pushed in a segment line and
    in a history entry: pushed records pass the redaction of a local write, so no file of the
    hub (ledger and index included) holds them, whether the push is redacted or refused."""
    hub = tmp_path / "hub"
    ok(hub, "init", device="hub")
    srv = hubs(hub)
    seg = "sessions/s9/peer-abcd.jsonl"
    hpath, hdata = history_entry("notes_x", None, "peer-abcd", "peer", "write", {"k": SECRET_TEXT})
    status, body = push(srv, [item(seg, chunk_line("s9", "peer-abcd", 0, SECRET_TEXT)), item(hpath, hdata)])
    ok(hub, "reindex", device="hub")
    leaks = holders(hub, [s.encode() for s in (AWS, GITHUB, PRIVATE)])
    assert leaks == [], f"the push ({status}: {body}) stored secrets verbatim: {leaks}"


def test_redaction_covers_json_object_keys_in_category_data_and_chunk_metadata(tmp_path):
    """Bug 9. A secret used as a JSON object key (category data, chunk metadata) is a
    secret like any other: no file of the store (history, segments, ledger, both indexes)
    holds it, whether the write is redacted or refused."""
    store = tmp_path / "store"
    key = AWS
    md(store, "write", "keys", "--data", json.dumps({key: 1, "nested": {key: "v"}}))
    md(store, "ingest", "--session-id", "s1", "--text", "a plain chunk", "--metadata", json.dumps({key: 1}))
    ok(store, "init")
    ok(store, "reindex")
    leaks = holders(store, [key.encode()])
    assert leaks == [], f"a secret as an object key is stored verbatim: {leaks}"


def test_a_remote_memdir_json_with_a_newer_format_is_refused_and_the_replica_keeps_working(tmp_path):
    """Bug 10. A remote `memdir.json` saying `{"format": 99}` never overwrites the replica's
    own: the sync says so (a non-zero exit naming the file, or a report naming it), and every
    command on the replica, sync included, still runs."""
    bare = bare_remote(tmp_path)
    a = started_git_replica(tmp_path, bare, "a")
    ok(a, "write", "plan", "--data", json.dumps({"k": 1}))
    sync(a)
    ours = (a / "memdir.json").read_bytes()

    forge(bare, tmp_path, lambda w: (w / "memdir.json").write_text('{\n  "format": 99\n}\n'))
    p = md(a, "sync")
    said = p.returncode != 0 and "memdir.json" in p.stderr or p.returncode == 0 and named(json.loads(p.stdout)["reported"], "memdir.json")
    assert said, f"the remote's memdir.json was merged without a word (exit {p.returncode}): {p.stdout}{p.stderr}"
    assert (a / "memdir.json").read_bytes() == ours, f"the replica's memdir.json now says {(a / 'memdir.json').read_text()!r}"
    for argv in (["status"], ["read", "plan"], ["write", "plan", "--data", json.dumps({"k": 2})]):
        q = md(a, *argv)
        assert q.returncode == 0, f"memdir {' '.join(argv)} refuses to run after the sync: {q.stderr}"


def test_a_device_without_delete_rights_cannot_delete_a_category_by_pushing_a_tombstone(tmp_path, hubs):
    """Bug 11. The phone may write notes_* but may not delete: REST `/api/v1/delete` refuses
    it (403), and so does the sync plane when it pushes an `op: delete` history entry (the ACL
    applies per op), leaving the category as it was."""
    srv, hub, env = policy_hub(tmp_path, hubs, _seed_notes)
    status, body = call(srv, "POST", "/api/v1/delete", {"category": "notes_trip"}, PHONE_TOKEN)
    assert status == 403, f"setup: REST delete should refuse the phone: {status} {body}"
    before = files_outside_meta(hub)

    path, data = history_entry("notes_trip", head_entry(hub, "notes_trip"), "phone-abcd", "phone", "delete", None)
    status, body = push(srv, [item(path, data)], PHONE_TOKEN)

    r = md(hub, "read", "notes_trip", device="hub", env=env)
    assert r.returncode == 0, f"the phone deleted notes_trip through sync_push ({status}: {body}): {r.stderr}"
    assert json.loads(r.stdout)["data"] == {"text": "packing list"}
    assert files_outside_meta(hub) == before
    assert refused_or_reported(status, body, path), (status, body)
    if status >= 400:
        assert status == 403 and body["error"]["code"] == "forbidden", body


def test_a_session_directory_that_is_a_link_is_not_read_through_by_fetch_or_sync(tmp_path, hubs):
    """Bug 12. `sessions/<id>` is a link to a directory outside the store that holds a
    well-formed segment. Writes never follow links; reads must not either: CLI fetch, REST
    fetch and a sync pull return nothing of the outside file."""
    store = tmp_path / "store"
    ok(store, "ingest", "--session-id", "inside", "--text", "a chunk inside the store")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = "outside the store: " + "the diary of someone else"
    (outside / "peer-zzzz.jsonl").write_text(chunk_line("linked", "peer-zzzz", 0, secret))
    (store / "sessions" / "linked").symlink_to(outside, target_is_directory=True)
    srv = hubs(store)

    p = md(store, "fetch", "linked")
    assert secret not in p.stdout, "CLI fetch read a segment through a linked session directory"
    r = srv.request("POST", "/fetch", {"session_id": "linked"})
    assert secret not in r.body.decode(), "REST fetch read a segment through a linked session directory"
    r = srv.request("POST", "/api/v1/sync/pull", {"want": [{"path": "sessions/linked/peer-zzzz.jsonl", "from": 0}]})
    assert secret not in r.body.decode(), "a sync pull read a segment through a linked session directory"
    _, manifest = call(srv, "GET", "/api/v1/sync/manifest")
    assert "sessions/linked" not in manifest["buckets"]


# --------------------------------------------------------------------------------------------
# Low
# --------------------------------------------------------------------------------------------


def test_a_push_cannot_store_lines_that_are_not_chunk_lines_of_their_segment(tmp_path, hubs):
    """Bug 13. A pushed segment whose lines name another session and replica, start at seq 7
    and carry an unknown field: pushed records are checked like local writes, so the push is
    refused (or the item reported and skipped) and the hub's verify-store stays ok."""
    hub = tmp_path / "hub"
    ok(hub, "ingest", "--session-id", "s1", "--text", "the hub's own chunk", device="hub")
    srv = hubs(hub)
    # Each defect alone, in a segment of its own (sessions/<s>/peer-abcd.jsonl).
    forged = {
        "another session id": ("s5a", chunk_line("another-session", "peer-abcd", 0, "x")),
        "another replica": ("s5b", chunk_line("s5b", "zzzz-0000", 0, "x")),
        "seq 7 first": ("s5c", chunk_line("s5c", "peer-abcd", 7, "x")),
        "an unknown field": ("s5d", chunk_line("s5d", "peer-abcd", 0, "x", smuggled=True)),
    }
    answers = {what: push(srv, [item(f"sessions/{s}/peer-abcd.jsonl", data)]) for what, (s, data) in forged.items()}

    v = verify(hub)
    assert v["rc"] == 0 and v.get("ok") is True, f"the pushes ({answers}) left the hub not ok: {v.get('problems')}"
    for what, (status, body) in answers.items():
        s = forged[what][0]
        assert refused_or_reported(status, body, f"sessions/{s}/"), (what, status, body)
        assert not (hub / "sessions" / s).exists(), what


def test_a_config_path_naming_a_fifo_never_hangs_a_command_or_the_hook(tmp_path):
    """Bug 14. `MEMDIR_CONFIG` naming a FIFO (nobody writes to it): every command ends
    promptly (an error naming the file is fine), and `memdir hook` still exits 0 at once: the
    hook must never hold an agent up."""
    store = tmp_path / "store"
    ok(store, "init")
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    env = server_env(store, MEMDIR_DEVICE="laptop", MEMDIR_CONFIG=str(fifo))
    rc, err = run_bounded([str(MEMDIR_BIN), "status"], env, 15)
    assert rc is not None, "memdir status hangs on a config path that is a FIFO"
    assert rc == 0 or "config.fifo" in err, f"exit {rc}: {err}"
    event = json.dumps({"hook_event_name": "Stop", "transcript_path": str(tmp_path / "none.jsonl")}).encode()
    rc, err = run_bounded([str(MEMDIR_BIN), "hook", "claude-code", "--timeout-ms", "2000"], env, 15, stdin=event)
    assert rc is not None, "memdir hook hangs on a config path that is a FIFO"
    assert rc == 0, f"the hook must exit 0, got {rc}: {err}"


def _fake_embeddings(fake_servers: Callable[..., FakeServer]) -> FakeServer:
    """An OpenAI-compatible /v1/embeddings answering 8-dimensional vectors derived from
    each text."""
    import hashlib

    def answer(method: str, path: str, body: Any) -> tuple[int, Any]:
        if not path.endswith("/embeddings"):
            return 404, {"error": {"message": path}}
        data = []
        for i, text in enumerate(body["input"]):
            h = hashlib.sha256(text.encode()).digest()
            data.append({"index": i, "object": "embedding", "embedding": [(b - 127.5) / 128 for b in h[:8]]})
        return 200, {"object": "list", "model": body["model"], "data": data}

    return fake_servers(answer)


def test_a_forget_removes_the_forgotten_texts_hash_and_vector_from_the_vector_cache(tmp_path, fake_servers):
    """Bug 15. After a forget, no file of the store keeps the forgotten text's BLAKE3 hash
    (the vector cache's key) or its vector, so a guessed text cannot be confirmed offline."""
    srv = _fake_embeddings(fake_servers)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[embeddings]\nprovider = "openai"\nurl = "{srv.url}/v1"\nmodel = "fake-embedder"\ndimensions = 8\n')
    env = {"MEMDIR_CONFIG": str(cfg)}
    store = tmp_path / "store"
    text = "my bank pin is " + "4711 and the safe code 0815"
    ok(store, "ingest", "--session-id", "s1", "--text", "an ordinary remark", env=env)
    cid = ok(store, "ingest", "--session-id", "s1", "--text", text, env=env)["chunk_id"]
    ok(store, "embed", env=env)
    key = blake3(text.encode())
    cache = store / ".memdir"
    assert holders(cache, [key]), "setup: the vector cache does not hold the text's hash"
    ok(store, "forget", "--session-id", "s1", "--chunk-id", cid, "--yes", env=env)
    assert not holders(store, [text.encode()]), "setup: the forget left the text itself"

    assert holders(store, [key]) == [], f"the forgotten text's BLAKE3 hash stays: {holders(store, [key])}"


# --------------------------------------------------------------------------------------------
# Risks of the same kind
# --------------------------------------------------------------------------------------------


def test_a_remote_file_over_memdirs_own_limits_is_refused_and_reported_and_the_rest_is_taken(tmp_path):
    """Risk: sync took files over memdir's own limits. On the remote, another replica's
    segment holds a chunk line of 1 MiB (a chunk is at most 256 KiB) and a history entry holds
    2 MiB of content (a category is at most 1 MiB), beside a history entry that is fine. The
    sync refuses and reports the two, takes the third, and pushes. (A segment written by hand
    is refused whatever its size: no seal vouches for its lines.)"""
    bare = bare_remote(tmp_path)
    a = started_git_replica(tmp_path, bare, "a")
    ok(a, "write", "plan", "--data", json.dumps({"k": 1}))
    sync(a)
    big_seg = "sessions/big/peer-zzzz.jsonl"
    fine_seg = "sessions/fine/peer-zzzz.jsonl"
    big_hist, big_bytes = history_entry("huge", None, "peer-zzzz", "peer", "write", {"blob": "x" * (2 << 20)})
    fine_hist, fine_bytes = history_entry("fine", None, "peer-zzzz", "peer", "write", {"k": "ordinary"})

    def add(w: Path) -> None:
        for rel, data in (
            (big_seg, chunk_line("big", "peer-zzzz", 0, "y" * (1 << 20))),
            (fine_seg, chunk_line("fine", "peer-zzzz", 0, "a chunk of ordinary size")),
            (big_hist, big_bytes),
            (fine_hist, fine_bytes),
        ):
            (w / rel).parent.mkdir(parents=True, exist_ok=True)
            (w / rel).write_text(data)

    forge(bare, tmp_path, add)
    p = md(a, "sync")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert ok(a, "read", "fine")["data"] == {"k": "ordinary"}, "the file within the limits was not taken"
    assert not (a / fine_seg).exists() and [p["kind"] for p in r["reported"] if p["path"] == fine_seg] == ["unsealed"], r["reported"]
    assert not (a / big_seg).exists(), f"a 1 MiB chunk line was taken: {r}"
    assert not (a / big_hist).exists() and md(a, "read", "huge").returncode != 0, f"a 2 MiB category version was taken: {r}"
    assert named(r["reported"], big_seg) and named(r["reported"], big_hist), r["reported"]
    v = verify(a)
    assert v["rc"] == 0 and v.get("ok") is True, v


def test_one_link_in_the_store_is_reported_and_skipped_by_sync_and_snapshot(tmp_path):
    """Risk: one link in the store blocked sync and snapshot whole (and a link named like a
    segment was committed to the remote as a link). Links are never followed, never
    committed, never copied: sync and snapshot report them, skip them and do the rest."""
    bare = bare_remote(tmp_path)
    a = started_git_replica(tmp_path, bare, "a")
    ok(a, "ingest", "--session-id", "s1", "--text", "before the links")
    ok(a, "write", "plan", "--data", json.dumps({"k": 1}))
    sync(a)
    outside = tmp_path / "outside.txt"
    outside.write_text("a file outside the store\n")
    links = ["sessions/s1/zz-link.jsonl", "history/plan/link.json"]
    for rel in links:
        (a / rel).symlink_to(outside)
    ok(a, "ingest", "--session-id", "s2", "--text", "after the links")

    p = md(a, "sync")
    assert p.returncode == 0, f"one link stops the sync (exit {p.returncode}): {p.stderr}"
    r = json.loads(p.stdout)
    assert r["pushed"] is True, r
    assert f"sessions/s2/{replica_id(a)}.jsonl" in remote_paths(bare)
    modes = git("ls-tree", "-r", "main", git_dir=bare)
    assert " 120000 " not in f" {modes}" and "link" not in modes, f"a link reached the remote:\n{modes}"
    for rel in links:
        assert named(r["reported"], rel), f"{rel} is not reported: {r['reported']}"
    snap = tmp_path / "snap"
    p = md(a, "snapshot", str(snap))
    assert p.returncode == 0, f"one link stops the snapshot (exit {p.returncode}): {p.stderr}"
    assert not any((snap / rel).exists() or (snap / rel).is_symlink() for rel in links)
    assert (snap / "sessions" / "s2").is_dir()


def test_a_rest_sync_cannot_send_an_arbitrary_environment_variable_as_a_bearer_token(tmp_path, hubs, fake_servers):
    """Risk: `token_env` of `POST /api/v1/sync` let a REST caller have the server send any
    variable of its environment as a bearer token to any URL. A request may name only the
    variable the server's config names for sync (`[sync] token_env`); any other is refused
    and nothing of the variable leaves the server."""
    leaked = "do-not-send-" + "0123456789abcdef"

    def answer(method: str, path: str, body: Any) -> tuple[int, Any]:
        return 200, {"format": SYNC_FORMAT, "root": "0" * 64, "buckets": {}, "files": 0}

    catcher = fake_servers(answer)
    store = tmp_path / "server"
    ok(store, "init", device="hub")
    srv = hubs(store, env={"SOME_SERVICE_PASSWORD": leaked})
    status, body = call(srv, "POST", "/api/v1/sync", {"remote": catcher.url, "token_env": "SOME_SERVICE_PASSWORD"})
    sent = [h for _, _, h in catcher.requests if leaked in json.dumps(h)]
    assert sent == [], f"the server sent SOME_SERVICE_PASSWORD to {catcher.url} ({status}: {body})"
    assert status >= 400, f"a sync naming an unconfigured token variable should be refused: {status} {body}"


def test_status_counts_only_the_categories_a_device_may_read(tmp_path, hubs):
    """Risk: `/status` counted categories a device may not read. The phone reads notes_* only
    (a `read` rule): its status counts the one note, not the admin's other categories."""
    cfg_text = HUB_POLICY.replace('write = ["notes_*"]', 'read = ["notes_*"]\nwrite = ["notes_*"]')

    store = tmp_path / "hub"
    cfg = tmp_path / "hub-config.toml"
    cfg.write_text(cfg_text)
    env = {"MEMDIR_CONFIG": str(cfg), "PHONE_TOKEN": PHONE_TOKEN}
    for name in ["notes_trip", "secret_plans", "base"]:
        ok(store, "write", name, "--data", json.dumps({"n": name}), device="hub", env=env)
    ok(store, "append", "audit_log", "--data", json.dumps({"e": 1}), device="hub", env=env)
    srv = hubs(store, env=env)
    status, st = call(srv, "GET", "/status", token=PHONE_TOKEN)
    assert status == 200, st
    assert (st["categories"], st["logs"]) == (1, 0), f"the phone's status counts categories it may not read: {st['categories']} categories, {st['logs']} logs"


def test_an_importer_says_which_links_and_special_files_it_skipped(tmp_path):
    """Risk: importers skipped links and FIFOs without saying so. A Claude Code projects
    directory holds one transcript, a link to another and a FIFO named like a transcript: the
    import takes the real one and says what it left out (counted under `skipped`, or named)."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "importers" / "claude-code-session.jsonl"
    plain = tmp_path / "plain" / "-home-dev-acme"
    plain.mkdir(parents=True)
    shutil.copy(fixture, plain / "a.jsonl")
    store = tmp_path / "store"
    base = ok(store, "import", "claude-code", str(plain.parent), "--dry-run")
    assert base["files"] == 1 and base["chunks"] > 0, base

    mixed = tmp_path / "mixed" / "-home-dev-acme"
    mixed.mkdir(parents=True)
    shutil.copy(fixture, mixed / "a.jsonl")
    elsewhere = tmp_path / "elsewhere.jsonl"
    shutil.copy(fixture, elsewhere)
    (mixed / "b.jsonl").symlink_to(elsewhere)
    os.mkfifo(mixed / "c.jsonl")
    r = ok(store, "import", "claude-code", str(mixed.parent), "--dry-run")
    assert r["chunks"] == base["chunks"], "the link or the FIFO was read"
    extra = sum(r["skipped"].values()) - sum(base["skipped"].values())
    said = json.dumps({k: v for k, v in r.items() if k != "path"})
    assert extra >= 2 or ("b.jsonl" in said and "c.jsonl" in said), f"the link and the FIFO were skipped without a word: {r}"


def test_private_spans_with_spaces_in_the_tag_or_nested_spans_leak_nothing(tmp_path):
    """Risk: `<private >` and nested private spans leaked text. A tag with whitespace before
    its `>` opens (and closes) a span like `<private>`, and a nested span ends at its own
    closing tag, not at the inner one: nothing inside reaches a file."""
    store = tmp_path / "store"
    one, two, three = "saffron" + "-gondola-17", "umber" + "-trombone-29", "cobalt" + "-lantern-83"
    texts = [
        f"before <private >{one}</private > after",
        f"before <private>outer <private>inner</private> {two} </private> after",
        f"before <PRIVATE\t>{three}</PRIVATE> after",
    ]
    for t in texts:
        ok(store, "ingest", "--session-id", "s1", "--text", t)
    ok(store, "reindex")
    leaks = holders(store, [s.encode() for s in (one, two, three)])
    assert leaks == [], f"private text was stored: {leaks}; chunks: {chunks(store, 's1')}"


def test_ledger_and_index_files_are_private_to_their_owner(tmp_path):
    """Risk: ledger and index files were 0644 while SECURITY.md promises 0600 files and 0700
    directories for what memdir creates. Under the usual umask 022, after writes and a search,
    nothing under `.memdir/` (ledger, index, locks) is readable by others."""
    store = tmp_path / "store"
    old = os.umask(0o022)
    try:
        ok(store, "ingest", "--session-id", "s1", "--text", "a chunk to index")
        ok(store, "write", "plan", "--data", json.dumps({"k": 1}))
        ok(store, "search", "chunk")
    finally:
        os.umask(old)
    loose = []
    for p in [store / ".memdir", *sorted((store / ".memdir").rglob("*"))]:
        if p.is_symlink():
            continue
        mode = stat.S_IMODE(p.lstat().st_mode)
        if mode & 0o077:
            loose.append(f"{p.relative_to(store)} {mode:04o}")
    assert loose == [], f"readable by others: {loose}"


def test_restore_snapshot_refuses_files_its_manifest_does_not_list(tmp_path):
    """Risk: restore-snapshot accepted unlisted files outside the layout. A snapshot is every
    file its manifest lists and nothing else: one extra file anywhere in it (here a script at
    its top and a `.memdir/` planted in it) makes restore refuse and change nothing."""
    store = tmp_path / "store"
    ok(store, "write", "plan", "--data", json.dumps({"k": 1}))
    snap = tmp_path / "snap"
    ok(store, "snapshot", str(snap))
    ok(store, "write", "plan", "--data", json.dumps({"k": 2}))
    before = files_outside_meta(store)
    (snap / "run-me.sh").write_text("#!/bin/sh\necho planted\n")
    (snap / ".memdir").mkdir()
    (snap / ".memdir" / "replica").write_text('{"id": "someone-else-0000"}')

    p = md(store, "restore-snapshot", str(snap))
    assert p.returncode != 0, f"a snapshot with unlisted files was restored: {p.stdout}"
    assert "run-me.sh" in p.stderr or ".memdir" in p.stderr, p.stderr
    assert files_outside_meta(store) == before
    assert ok(store, "read", "plan")["data"] == {"k": 2}


def test_an_http_sync_under_steady_writes_on_both_sides_ends_pushed(tmp_path, hubs):
    """Risk: under steady writes on both sides every HTTP sync ended `push_pending` after 5
    rounds (it waits for both trees to be equal, which steady writers never allow). A sync
    ends pushed once everything this replica held when it started is on the hub; what was
    written meanwhile is the next sync's."""
    hub = tmp_path / "hub"
    ok(hub, "ingest", "--session-id", "hub-side", "--text", "hub 0", device="hub")
    srv = hubs(hub)
    url = f"http://{srv.host_header}"
    a = tmp_path / "a"
    ok(a, "ingest", "--session-id", "a-side", "--text", "a 0")
    sync(a, "--remote", url)
    for i in range(1, 4):
        ok(a, "ingest", "--session-id", "a-side", "--text", f"a {i}")
        ok(a, "write", f"plan{i}", "--data", json.dumps({"i": i}))
    # Segments and history files only: a seal (`.head`) is written whole again as its segment
    # grows, so it is no prefix of its later self.
    held = {rel: data for rel, data in files_outside_meta(a).items() if rel.startswith(("sessions/", "history/")) and not rel.endswith(".head")}

    stop = threading.Event()
    written = {"hub": 0}

    def hub_writer(k: int) -> None:
        # Through the hub's REST API: a write every few milliseconds, so that the hub's tree
        # is never the same at two manifests.
        for i in range(20000):
            if stop.is_set():
                return
            srv.request("POST", "/ingest", {"session_id": f"hub-steady-{k}", "content": f"hub steady {k} {i}"})
            written["hub"] += 1

    def client_writer() -> None:
        for i in range(2000):
            if stop.is_set():
                return
            md(a, "ingest", "--session-id", "a-steady", "--text", f"a steady {i}")

    threads = [threading.Thread(target=hub_writer, args=(k,)) for k in range(3)] + [threading.Thread(target=client_writer)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while written["hub"] < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        r = ok(a, "sync", "--remote", url)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert r["push_pending"] is False and r["pushed"] is True, f"the sync gave up under steady writes: {r.get('offline')} after {r['rounds']} rounds"
    for rel, data in held.items():
        assert (hub / rel).is_file() and (hub / rel).read_bytes()[: len(data)] == data, f"{rel} did not reach the hub"
