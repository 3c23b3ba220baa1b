"""Access control on every surface, from one table of expectations.

The config file's `[acl]` section is evaluated in one place (`ops::call`) for every surface:
the CLI and MCP over stdio act as the configured device (`MEMDIR_DEVICE`), REST and MCP over
HTTP as the device their bearer token maps to (`[[http.tokens]]`). Each row of `MATRIX` says
what one device asking for one operation gets: `ok`, or a `forbidden` error naming the rule.
Every row runs on every surface that has the operation (CLI, MCP stdio with the official
Python SDK, REST, MCP over streamable HTTP), each surface on its own copy of the same seeded
store; a denied row must leave every file byte-identical. Then what a device may not read must
be absent from its lists, searches and context reads, on every surface.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import MEMDIR_BIN, open_server, server_env
from test_http import mcp_session, run_refused, start_server, tool_sc
from test_surfaces import TABLE, cli_argv

pytestmark = [pytest.mark.timeout(300), pytest.mark.anyio]

TOKENS = {
    "laptop": "laptop-token-0123456789abcdef",
    "phone": "phone-token-0123456789abcdef",
    "stranger": "stranger-token-0123456789abcdef",
    "cleaner": "cleaner-token-0123456789abcdef",
}

POLICY = """
[acl]
admin_devices = ["laptop"]
device_categories = ["laptop", "phone"]

[[acl.rules]]
device = "phone"
read = ["notes_*", "phone", "journal"]
write = ["notes_*", "workflow_{device}"]
ingest = ["mobile"]

[[acl.rules]]
device = "cleaner"
write = ["scratch_*"]
delete = true
""" + "".join(
    f'\n[[http.tokens]]\ndevice = "{d}"\ntoken_env = "TOKEN_{d.upper()}"\n' for d in TOKENS
)

OPS = {op["name"]: op for op in TABLE}

# (device, operation, arguments, expected: "ok" or the rule a forbidden error names)
MATRIX: list[tuple[str, str, dict, str]] = [
    ("phone", "write", {"category": "notes_new", "data": {"a": 1}}, "ok"),
    ("phone", "write", {"category": "workflow_phone", "data": {"a": 1}}, "ok"),
    ("phone", "write", {"category": "phone", "data": {"a": 1}}, "ok"),
    ("phone", "write", {"category": "base", "data": {"a": 1}}, "acl.admin_devices"),
    ("phone", "write", {"category": "meta", "data": {"a": 1}}, "acl.reserved"),
    ("phone", "write", {"category": "secret_plans", "data": {"a": 1}}, "acl.rules.write"),
    ("phone", "append", {"category": "journal", "data": {"e": 1}}, "acl.rules.write"),
    ("phone", "read", {"category": "notes_trip"}, "ok"),
    ("phone", "read", {"category": "secret_plans"}, "acl.rules.read"),
    ("phone", "history", {"category": "secret_plans"}, "acl.rules.read"),
    ("phone", "diff", {"category": "secret_plans"}, "acl.rules.read"),
    ("phone", "delta", {"category": "secret_plans", "since_hash": "x"}, "acl.rules.read"),
    ("phone", "delete", {"category": "notes_trip"}, "acl.rules.delete"),
    ("phone", "restore", {"category": "notes_trip", "version": 1}, "acl.rules.delete"),
    ("phone", "compact", {}, "acl.rules.delete"),
    ("phone", "verify_store", {}, "acl.rules.read"),
    ("phone", "doctor", {}, "acl.rules.read"),
    ("phone", "ingest", {"session_id": "p1", "content": "x", "project": "work"}, "acl.rules.ingest"),
    ("phone", "ingest", {"session_id": "p1", "content": "from the phone", "project": "mobile"}, "ok"),
    ("phone", "fetch", {"session_id": "s1"}, "ok"),
    ("stranger", "write", {"category": "stranger", "data": {}}, "acl.rules.write"),
    ("stranger", "ingest", {"session_id": "x1", "content": "x"}, "acl.rules.ingest"),
    ("stranger", "read", {"category": "base"}, "ok"),
    ("cleaner", "delete", {"category": "scratch_a"}, "ok"),
    ("cleaner", "delete", {"category": "base"}, "acl.admin_devices"),
    ("cleaner", "compact", {}, "acl.admin_devices"),
    ("laptop", "write", {"category": "base", "data": {"b": 2}}, "ok"),
    ("laptop", "compact", {"keep_versions": 3}, "ok"),
]

SURFACES = ["cli", "mcp-stdio", "rest", "mcp-http"]


def memdir(store: Path, device: str, *argv: str, stdin: bytes = b"", config: Path | None = None) -> subprocess.CompletedProcess:
    env = server_env(store, MEMDIR_DEVICE=device)
    if config is not None:
        env["MEMDIR_CONFIG"] = str(config)
    return subprocess.run([str(MEMDIR_BIN), *argv], input=stdin, capture_output=True, env=env, timeout=60)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store seeded by the admin before the policy is in force."""
    root = tmp_path_factory.mktemp("acl-template")
    store = root / "store"
    steps = [
        ["write", "base", "--data", json.dumps({"text": "the admin's base facts about aurora"})],
        ["write", "notes_trip", "--data", json.dumps({"text": "packing list for the aurora trip"})],
        ["write", "secret_plans", "--data", json.dumps({"text": "aurora launch date is classified"})],
        ["write", "scratch_a", "--data", json.dumps({"text": "scratch aurora"})],
        ["append", "journal", "--data", json.dumps({"event": "aurora deployed"})],
        ["ingest", "--session-id", "s1", "--project", "work", "--text", "aurora in a session"],
    ]
    for argv in steps:
        p = memdir(store, "laptop", *argv)
        assert p.returncode == 0, (argv, p.stderr)
    return store


def fresh(template: Path, tmp: Path, name: str) -> tuple[Path, Path]:
    """A copy of the seeded store and the policy file beside it."""
    store = tmp / name / "store"
    shutil.copytree(template, store)
    config = tmp / name / "config.toml"
    config.write_text(POLICY)
    return store, config


def files(store: Path) -> dict[str, bytes]:
    """Every file of the store outside `.memdir/` (the derived and local part)."""
    out = {}
    for p in sorted(store.rglob("*")):
        rel = p.relative_to(store)
        if p.is_file() and rel.parts[0] != ".memdir":
            out[str(rel)] = p.read_bytes()
    return out


def outcome(body: dict) -> str:
    if "error" in body:
        err = body["error"]
        if err["code"] != "forbidden":
            return f"{err['code']}: {err['message']}"
        return err["rule"]
    return "ok"


def token_env() -> dict[str, str]:
    return {f"TOKEN_{d.upper()}": t for d, t in TOKENS.items()}


class Surface:
    """Runs operations as a device on one surface."""

    def __init__(self, kind: str, store: Path, config: Path):
        self.kind, self.store, self.config = kind, store, config
        self.http = None
        if kind in ("rest", "mcp-http"):
            transport = "http" if kind == "rest" else "mcp-http"
            args = ["--tools", "full"] if kind == "mcp-http" else []
            self.http = start_server(store, transport, args=args, env={"MEMDIR_CONFIG": str(config), **token_env()})

    def stop(self) -> None:
        if self.http is not None:
            self.http.stop()

    async def run(self, device: str, name: str, args: dict) -> dict | None:
        """The result or `{"error": ...}`; None when this surface lacks the operation."""
        op = OPS[name]
        if self.kind == "cli":
            if op["cli"] is None:
                return None
            argv, stdin = cli_argv(op, args)
            p = memdir(self.store, device, *argv, stdin=stdin, config=self.config)
            if p.returncode not in (0, 1):
                err = json.loads(p.stderr)
                if err["error"]["code"] == "forbidden":
                    assert p.returncode == 12, p
                return err
            return json.loads(p.stdout)
        if self.kind == "mcp-stdio":
            if op["mcp"] is None:
                return None
            env = {"MEMDIR_CONFIG": str(self.config), "MEMDIR_DEVICE": device}
            async with open_server(self.store, profile="full", env=env) as srv:
                return tool_sc(await srv.raw(op["mcp"]["tool"], args))
        auth = [("Authorization", f"Bearer {TOKENS[device]}")]
        if self.kind == "rest":
            rest = op["rest"]
            if rest is None:
                return None
            if rest["method"] == "GET":
                from urllib.parse import urlencode

                r = self.http.request("GET", rest["path"] + ("?" + urlencode(args) if args else ""), headers=auth)
            else:
                r = self.http.request("POST", rest["path"], args, headers=auth)
            if r.json.get("error", {}).get("code") == "forbidden":
                assert r.status == 403, r.describe()
            return r.json
        if op["mcp"] is None:
            return None
        async with mcp_session(self.http.mcp_url, dict(auth)) as session:
            return tool_sc(await session.call_tool(op["mcp"]["tool"], args))


@pytest.mark.parametrize("kind", SURFACES)
async def test_every_device_gets_what_the_table_says_on_every_surface(template: Path, tmp_path: Path, kind: str):
    store, config = fresh(template, tmp_path, kind)
    surface = Surface(kind, store, config)
    failures = []
    ran = 0
    try:
        for device, name, args, expected in MATRIX:
            before = files(store)
            body = await surface.run(device, name, args)
            if body is None:
                continue
            ran += 1
            got = outcome(body)
            if got != expected:
                failures.append(f"{device} {name} {args}: expected {expected}, got {got} ({body})")
                continue
            if expected != "ok":
                err = body["error"]
                assert err["device"] == device, err
                assert device in err["message"], err
                if files(store) != before:
                    failures.append(f"{device} {name} {args}: denied, but a file changed")
            elif name in ("write", "ingest") and device != "laptop":
                # The caller's device is the actor of its write.
                if name == "write":
                    read = await surface.run("laptop", "read", {"category": args["category"]})
                    if read["meta"]["updated_by"] != device:
                        failures.append(f"{device} wrote {args['category']} as {read['meta']['updated_by']}")
    finally:
        surface.stop()
    assert ran >= 20, ran
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kind", SURFACES)
async def test_what_a_device_may_not_read_is_absent_from_lists_searches_and_context(template: Path, tmp_path: Path, kind: str):
    store, config = fresh(template, tmp_path, kind)
    surface = Surface(kind, store, config)
    try:
        listed = await surface.run("phone", "list", {})
        assert sorted(c["name"] for c in listed["categories"]) == ["journal", "notes_trip"], listed
        assert listed["count"] == 2

        hits = await surface.run("phone", "search", {"query": "aurora", "limit": 20})
        cats = {h["category"] for h in hits["results"] if h["kind"] == "category"}
        assert cats == {"notes_trip", "journal"}, hits
        assert any(h["kind"] == "chunk" for h in hits["results"]), "sessions stay readable"
        one = await surface.run("phone", "search", {"query": "aurora", "kind": "category", "limit": 1})
        assert one["count"] == 1 and one["results"][0]["category"] in ("notes_trip", "journal"), one
        exact = await surface.run("phone", "search", {"query": '"launch date is classified"', "mode": "exact"})
        assert exact["count"] == 0, exact

        ctx = await surface.run("phone", "context", {"categories": ["notes_trip", "secret_plans", "base"]})
        if ctx is not None:
            assert sorted(ctx["categories"]) == ["notes_trip"], ctx
            assert sorted(ctx["missing"]) == ["base", "secret_plans"], ctx

        status = await surface.run("phone", "status", {})
        assert status["access"] == {
            "enabled": True,
            "device": "phone",
            "role": "registered",
            "summary": status["access"]["summary"],
        }, status
        admin = await surface.run("laptop", "list", {})
        assert admin["count"] == 5, admin
        doctor = await surface.run("laptop", "doctor", {})
        if doctor is not None:
            assert doctor["status"]["access"]["role"] == "admin", doctor
    finally:
        surface.stop()


def test_http_tokens_map_to_devices_and_the_single_token_is_an_admin(template: Path, tmp_path: Path):
    store, config = fresh(template, tmp_path, "tokens")
    admin_token = "the-single-admin-token-0123456789"
    env = {"MEMDIR_CONFIG": str(config), "MEMDIR_DEVICE": "server", **token_env()}
    srv = start_server(store, "http", token=admin_token, env=env)
    try:
        # With tokens configured, a request without one, or with an unknown one, is 401.
        assert srv.request("GET", "/status").status == 401
        bad = srv.request("GET", "/status", headers=[("Authorization", "Bearer nope-nope-nope-nope")])
        assert bad.status == 401
        # The single token acts as an admin, under the server's own device name.
        r = srv.request("POST", "/api/v1/write", {"category": "base", "data": {"z": 1}}, headers=[("X-Token", admin_token)])
        assert r.status == 200, r.describe()
        st = srv.request("GET", "/status", headers=[("X-Token", admin_token)]).json
        assert st["access"]["role"] == "admin" and st["access"]["device"] == "server", st
        # A device token acts as its device.
        st = srv.request("GET", "/status", headers=[("X-Token", TOKENS["stranger"])]).json
        assert st["access"]["role"] == "unregistered" and st["actor"] == "stranger", st
        r = srv.request("POST", "/api/v1/write", {"category": "stranger", "data": {}}, headers=[("X-Token", TOKENS["stranger"])])
        assert r.status == 403 and r.json["error"]["code"] == "forbidden", r.describe()
    finally:
        srv.stop()


def test_a_server_refuses_to_start_when_a_device_token_cannot_be_read(template: Path, tmp_path: Path):
    store, config = fresh(template, tmp_path, "refuse")
    argv = ["serve", "--transport", "http", "--port", "0"]
    # An unset variable: the error names the key and the variable.
    env = {"MEMDIR_CONFIG": str(config), **{k: v for k, v in token_env().items() if k != "TOKEN_PHONE"}}
    rc, err = run_refused(store, argv, env)
    assert rc == 3, err
    assert "http.tokens[1]" in err and "TOKEN_PHONE" in err, err
    # A token file others may read.
    secret = tmp_path / "phone.token"
    secret.write_text("phone-token-from-a-file-0123456789\n")
    os.chmod(secret, 0o644)
    config.write_text(POLICY.split("[[http.tokens]]")[0] + f'\n[[http.tokens]]\ndevice = "phone"\ntoken_file = "{secret}"\n')
    rc, err = run_refused(store, argv, {"MEMDIR_CONFIG": str(config)})
    assert rc == 3 and "chmod 600" in err, err
    # Two devices with one token.
    config.write_text(
        POLICY.split("[[http.tokens]]")[0]
        + '\n[[http.tokens]]\ndevice = "a"\ntoken_env = "T"\n\n[[http.tokens]]\ndevice = "b"\ntoken_env = "T"\n'
    )
    rc, err = run_refused(store, argv, {"MEMDIR_CONFIG": str(config), "T": "same-token-for-two-0123456789"})
    assert rc == 3 and "each device needs its own" in err, err
    # A weak device token on a public bind.
    config.write_text(POLICY.split("[[http.tokens]]")[0] + '\n[[http.tokens]]\ndevice = "a"\ntoken_env = "T"\n')
    rc, err = run_refused(store, ["serve", "--transport", "http", "--port", "0", "--host", "0.0.0.0"], {"MEMDIR_CONFIG": str(config), "T": "short"})
    assert rc == 11 and json.loads(err)["error"]["device"] == "a", err
    # With the file readable only by its owner, the server starts and the token works.
    os.chmod(secret, 0o600)
    config.write_text(POLICY.split("[[http.tokens]]")[0] + f'\n[[http.tokens]]\ndevice = "phone"\ntoken_file = "{secret}"\n')
    srv = start_server(store, "http", env={"MEMDIR_CONFIG": str(config)})
    try:
        st = srv.request("GET", "/status", headers=[("X-Token", "phone-token-from-a-file-0123456789")]).json
        assert st["access"]["device"] == "phone", st
    finally:
        srv.stop()
