"""schema/openapi.json describes the REST API (`memdir serve --transport http`) truly.

(a) The file is a structurally valid OpenAPI 3.1 document; every schema in it is valid JSON
    Schema 2020-12 and every example matches its schema.
(b) Spec and router cannot drift: a real server answers every path and method of the spec
    (with the spec's own examples, 200), any other method on those paths with 405 and an
    `Allow` header naming exactly the spec's methods, and other paths with 404; the routes in
    src/http/ are the spec's; the argument names the server accepts (it names them when it
    rejects an unknown one) are the spec's properties, and agree with the MCP tool schemas.
(c) Responses validate against the spec's response schemas, for happy paths and for every
    error status the tests provoke (the status must be declared on the operation).

Each test runs its own server on a fresh store in a temp directory, on a free port.
"""

from __future__ import annotations

import http.client
import json
import queue
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlencode

import jsonschema
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from conftest import MEMDIR_BIN, REPO_ROOT, server_env

pytestmark = pytest.mark.timeout(120)

SPEC_FILE = REPO_ROOT / "schema" / "openapi.json"
SPEC: dict = json.loads(SPEC_FILE.read_text())
SPEC_URI = "urn:memdir:openapi"
REGISTRY = Registry().with_resource(SPEC_URI, DRAFT202012.create_resource(SPEC))

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
OPERATIONS: list[tuple[str, str, dict]] = [
    (path, method, op) for path, item in SPEC["paths"].items() for method, op in item.items() if method in HTTP_METHODS
]
# Body fields the router consumes itself before calling the tool.
ROUTER_FIELDS = {"semantic"}
UNKNOWN = "zz_unknown_argument"


# ---------------------------------------------------------------------------------------------
# Spec helpers
# ---------------------------------------------------------------------------------------------


def pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def at(ptr: str) -> Any:
    """The value at a JSON pointer (`/a/b`) in the spec."""
    node: Any = SPEC
    for raw in ptr.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def deref(obj: Any) -> Any:
    """Follows a Reference Object (`{"$ref": "#/..."}`) outside schemas."""
    while isinstance(obj, dict) and "$ref" in obj:
        ref = obj["$ref"]
        assert ref.startswith("#/"), f"only local references are used, got {ref}"
        obj = at(ref[1:])
    return obj


def validator(ptr: str) -> Draft202012Validator:
    """A validator for the schema at `ptr`, its `$ref`s resolved inside the spec."""
    return Draft202012Validator({"$ref": f"{SPEC_URI}#{ptr}"}, registry=REGISTRY)


def resolve_schema(schema: dict) -> dict:
    """A schema with its own top-level `$ref` (to components) followed."""
    while "$ref" in schema:
        schema = at(schema["$ref"][1:])
    return schema


def assert_valid(ptr: str, value: Any, what: str) -> None:
    errors = sorted(validator(ptr).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"- at {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:10]]
        pytest.fail(f"{what} does not match {ptr}:\n" + "\n".join(lines) + f"\nvalue: {json.dumps(value)[:2000]}")


def operation(path: str, method: str) -> dict:
    op = SPEC["paths"].get(path, {}).get(method.lower())
    assert op is not None, f"{method} {path} is not in the spec"
    return op


def spec_methods(path: str) -> set[str]:
    return {m.upper() for m in SPEC["paths"][path] if m in HTTP_METHODS}


def body_media(op: dict) -> dict | None:
    body = deref(op.get("requestBody"))
    return None if body is None else body["content"]["application/json"]


def body_examples(op: dict) -> list[tuple[str, Any]]:
    """The request body examples of an operation, by name."""
    media = body_media(op)
    if media is None:
        return []
    if "example" in media:
        return [("example", media["example"])]
    return [(name, deref(ex)["value"]) for name, ex in media.get("examples", {}).items()]


def body_variants(op: dict) -> list[dict]:
    """The object schemas a request body may take (the branches of a top-level oneOf)."""
    schema = resolve_schema(body_media(op)["schema"])
    return [resolve_schema(s) for s in schema["oneOf"]] if "oneOf" in schema else [schema]


def variant_of(op: dict, value: Any) -> dict:
    """The one body variant `value` validates against."""
    matches = [v for v in body_variants(op) if _valid_in_spec(v, value)]
    assert len(matches) == 1, f"{value!r} matches {len(matches)} body variants"
    return matches[0]


def _valid_in_spec(schema: dict, value: Any) -> bool:
    # Variants may hold local $refs into the spec: validate them with the spec as their base.
    wrapper = {"$id": f"{SPEC_URI}-variant", "allOf": [_rebase(schema)]}
    return Draft202012Validator(wrapper, registry=REGISTRY).is_valid(value)


def _rebase(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (f"{SPEC_URI}{v}" if k == "$ref" and isinstance(v, str) and v.startswith("#") else _rebase(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node


def query_example(op: dict) -> str:
    params = [deref(p) for p in op.get("parameters", [])]
    values = {p["name"]: p.get("example", p["schema"].get("default")) for p in params if p["in"] == "query"}
    values = {k: v for k, v in values.items() if v is not None}
    return "?" + urlencode(values) if values else ""


def tool_of(op: dict, variant: dict | None = None) -> str | None:
    if variant is not None and "x-memdir-tool" in variant:
        return variant["x-memdir-tool"]
    return op.get("x-memdir-tool")


# ---------------------------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)


class Rest:
    """One running `memdir serve --transport http` and a tiny client for it."""

    def __init__(self, store: Path, args: list[str]):
        self.store = store
        self.stderr: list[str] = []
        self.proc = subprocess.Popen(
            [str(MEMDIR_BIN), "serve", "--transport", "http", "--port", "0", *args],
            env=server_env(store),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 30
        while True:
            try:
                line = lines.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                pytest.fail(f"memdir did not report its address within 30 s; stderr: {''.join(self.stderr)}")
            if line is None:
                rc = self.proc.wait()
                pytest.fail(f"memdir serve exited with {rc} before listening; stderr: {''.join(self.stderr)}")
            self.stderr.append(line)
            m = re.search(r"memdir: listening on http://(\S+)", line)
            if m:
                host, port = m.group(1).rsplit(":", 1)
                self.host, self.port = host.strip("[]"), int(port)
                break

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None, headers: dict[str, str] | None = None) -> Reply:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            hdrs = dict(headers or {})
            if data is not None:
                hdrs.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            text = resp.read().decode()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, text)
        finally:
            conn.close()

    def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        """A call that must answer 200 with a body matching the spec; returns the body."""
        r = self.request(method, path, body, **kw)
        assert r.status == 200, f"{method} {path} {json.dumps(body)} answered {r.status}: {r.text}"
        check_response(path.split("?")[0], method, r)
        return r.json


@pytest.fixture
def launch(tmp_path: Path, memdir_bin: Path) -> Iterator[Callable[..., Rest]]:
    """Factory: `launch(*args)` starts a server on a fresh store; all stop at teardown."""
    servers: list[Rest] = []

    def start(*args: str) -> Rest:
        srv = Rest(tmp_path / f"store{len(servers)}", list(args))
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.close()


@pytest.fixture
def server(launch) -> Rest:
    return launch()


def check_response(path: str, method: str, r: Reply) -> Any:
    """The status is declared on the operation and the body matches that response's schema."""
    op = operation(path, method)
    declared = op["responses"]
    assert str(r.status) in declared, f"{method} {path} answered {r.status}, which the spec does not declare ({sorted(declared)}): {r.text}"
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    resp_ptr = pointer("paths", path, method.lower(), "responses", str(r.status))
    resp = at(resp_ptr)
    if "$ref" in resp:
        resp_ptr = resp["$ref"][1:]
        resp = deref(resp)
    assert_valid(resp_ptr + pointer("content", "application/json", "schema"), r.json, f"{method} {path} → {r.status}")
    for name in resp.get("headers", {}):
        if name.lower() in ("retry-after", "www-authenticate", "allow"):
            assert name.lower() in r.headers, f"{method} {path} → {r.status} lacks the {name} header the spec declares"
    return r.json


def check_component_response(name: str, r: Reply) -> None:
    ptr = pointer("components", "responses", name, "content", "application/json", "schema")
    assert_valid(ptr, r.json, f"{name} response")


def seed(srv: Rest) -> None:
    """Data every example of the spec can act on: sessions, a category with two versions, a
    log, and a category to delete."""
    for _, ex in body_examples(operation("/ingest", "post")):
        srv.ok("POST", "/ingest", ex)
    srv.ok("POST", "/api/v1/write", {"category": "base", "data": {"name": "Ada", "pool": "connection pool timeout 30s"}})
    for _, ex in body_examples(operation("/api/v1/write", "post")):
        srv.ok("POST", "/api/v1/write", ex)
    for _, ex in body_examples(operation("/api/v1/append", "post")):
        srv.ok("POST", "/api/v1/append", ex)
    srv.ok("POST", "/api/v1/write", {"category": "scratch", "data": {"tmp": True}})
    # Notes every note example can act on (two versions of MEMORY.md, a note to move, one to
    # delete).
    for path, text in [
        ("MEMORY.md", "# Memory\n- first\n"),
        ("projects/orbital.md", "# Orbital\n\nDeploys go through staging first.\n"),
        ("scratch/todo.md", "- tidy up\n"),
        ("todo.md", "- call Ada\n"),
    ]:
        srv.ok("POST", "/api/v1/notes/write", {"path": path, "text": text})
    srv.ok("POST", "/api/v1/notes/append", {"path": "MEMORY.md", "text": "- second"})


# ---------------------------------------------------------------------------------------------
# (a) The document
# ---------------------------------------------------------------------------------------------


OBJECT_KEYS = {
    "root": {"openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks", "components", "security", "tags", "externalDocs"},
    "info": {"title", "summary", "description", "termsOfService", "contact", "license", "version"},
    "operation": {"tags", "summary", "description", "externalDocs", "operationId", "parameters", "requestBody", "responses", "callbacks", "deprecated", "security", "servers"},
    "parameter": {"name", "in", "description", "required", "deprecated", "allowEmptyValue", "schema", "content", "style", "explode", "allowReserved", "example", "examples"},
    "requestBody": {"description", "content", "required"},
    "mediaType": {"schema", "example", "examples", "encoding"},
    "response": {"description", "headers", "content", "links"},
    "header": {"description", "required", "deprecated", "schema", "content", "style", "explode", "example", "examples"},
    "components": {"schemas", "responses", "parameters", "examples", "requestBodies", "headers", "securitySchemes", "links", "callbacks", "pathItems"},
}


def check_keys(kind: str, obj: dict, where: str) -> None:
    assert isinstance(obj, dict), f"{where} must be an object"
    extra = {k for k in obj if not k.startswith("x-")} - OBJECT_KEYS[kind]
    assert not extra, f"{where}: fields not allowed in an OpenAPI 3.1 {kind} object: {sorted(extra)}"


def all_schemas() -> Iterator[tuple[str, Any]]:
    """(pointer, schema) of every Schema Object in the document."""
    for name, s in SPEC["components"].get("schemas", {}).items():
        yield pointer("components", "schemas", name), s
    for name, h in SPEC["components"].get("headers", {}).items():
        yield pointer("components", "headers", name, "schema"), h["schema"]
    for name, resp in SPEC["components"].get("responses", {}).items():
        for mt, media in resp.get("content", {}).items():
            yield pointer("components", "responses", name, "content", mt, "schema"), media["schema"]
        for hn, h in resp.get("headers", {}).items():
            if "schema" in h:
                yield pointer("components", "responses", name, "headers", hn, "schema"), h["schema"]
    for path, method, op in OPERATIONS:
        base = ("paths", path, method)
        for i, p in enumerate(op.get("parameters", [])):
            if "schema" in p:
                yield pointer(*base, "parameters", str(i), "schema"), p["schema"]
        if "requestBody" in op and "content" in op["requestBody"]:
            for mt, media in op["requestBody"]["content"].items():
                yield pointer(*base, "requestBody", "content", mt, "schema"), media["schema"]
        for code, resp in op["responses"].items():
            for mt, media in resp.get("content", {}).items():
                yield pointer(*base, "responses", code, "content", mt, "schema"), media["schema"]


def test_top_level_fields_and_security_schemes():
    check_keys("root", SPEC, "document")
    for key in ("openapi", "info", "paths", "components", "servers"):
        assert key in SPEC, f"missing top-level {key}"
    assert SPEC["openapi"] == "3.1.0"
    check_keys("info", SPEC["info"], "info")
    assert SPEC["info"]["title"] == "memdir REST API"
    assert isinstance(SPEC["info"]["version"], str) and SPEC["info"]["version"]
    assert SPEC["servers"][0]["url"] == "http://127.0.0.1:8787"
    check_keys("components", SPEC["components"], "components")
    schemes = SPEC["components"]["securitySchemes"]
    assert schemes["bearer"]["type"] == "http" and schemes["bearer"]["scheme"].lower() == "bearer"
    assert schemes["xToken"] == {**schemes["xToken"], "type": "apiKey", "in": "header", "name": "X-Token"}
    for name in SPEC["components"]:
        for key in SPEC["components"][name]:
            assert re.fullmatch(r"[a-zA-Z0-9._-]+", key), f"components/{name}/{key}: bad component name"
    # Every security requirement names a declared scheme with no scopes (neither is OAuth).
    reqs = list(SPEC.get("security", [])) + [r for _, _, op in OPERATIONS for r in op.get("security", [])]
    for req in reqs:
        for name, scopes in req.items():
            assert name in schemes and scopes == [], req
    # The error shape is {"error": {code, message, hints, ...}}.
    err = SPEC["components"]["schemas"]["Error"]
    assert err["required"] == ["error"]
    body = resolve_schema(err["properties"]["error"])
    assert {"code", "message", "hints"} <= set(body["required"])


def test_operations_are_well_formed():
    ids = []
    for path, item in SPEC["paths"].items():
        assert path.startswith("/"), path
        assert set(item) <= set(HTTP_METHODS) | {"summary", "description", "servers", "parameters"}, f"{path}: {sorted(item)}"
        for method, op in item.items():
            if method not in HTTP_METHODS:
                continue
            where = f"{method.upper()} {path}"
            check_keys("operation", op, where)
            ids.append(op["operationId"])
            assert op["responses"], f"{where} has no responses"
            assert "200" in op["responses"], f"{where} has no 200 response"
            for code, resp in op["responses"].items():
                assert re.fullmatch(r"[1-5](\d\d|XX)|default", code), f"{where}: bad response code {code}"
                resp = deref(resp)
                check_keys("response", resp, f"{where} {code}")
                assert isinstance(resp.get("description"), str), f"{where} {code} needs a description"
                assert set(resp.get("content", {})) == {"application/json"}, f"{where} {code}: every response is JSON"
                for media in resp["content"].values():
                    check_keys("mediaType", media, f"{where} {code} content")
                for hn, h in resp.get("headers", {}).items():
                    check_keys("header", deref(h), f"{where} {code} header {hn}")
                if code != "200":
                    assert resp["content"]["application/json"]["schema"], where
            for p in op.get("parameters", []):
                p = deref(p)
                check_keys("parameter", p, f"{where} parameter")
                assert p["in"] in ("query", "header", "path", "cookie") and p["name"]
                assert ("schema" in p) != ("content" in p), f"{where}: a parameter has schema or content"
            if "requestBody" in op:
                body = deref(op["requestBody"])
                check_keys("requestBody", body, f"{where} requestBody")
                assert set(body["content"]) == {"application/json"}
                check_keys("mediaType", body["content"]["application/json"], f"{where} requestBody content")
                assert method == "post", f"{where}: only POST takes a body"
                assert body_examples(op), f"{where}: the request body needs an example (the tests send it)"
            # Every non-health operation declares the guard's errors.
            if path != "/health":
                for code in ("401", "403", "503"):
                    assert code in op["responses"], f"{where} must declare {code}"
            if method == "post":
                for code in ("400", "413"):
                    assert code in op["responses"], f"{where} must declare {code} (the body is parsed)"
    assert len(ids) == len(set(ids)), "operationIds must be unique"
    assert SPEC["paths"]["/health"]["get"]["security"] == [], "GET /health needs no token"


def test_schemas_are_valid_json_schema_2020_12():
    count = 0
    for ptr, schema in all_schemas():
        try:
            Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            pytest.fail(f"{ptr} is not a valid JSON Schema: {e.message}")
        count += 1
    assert count > 40


def test_every_reference_resolves():
    def walk(node: Any, where: str) -> Iterator[tuple[str, str]]:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str):
                    yield where, v
                else:
                    yield from walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, f"{where}/{i}")

    refs = list(walk(SPEC, ""))
    assert refs
    for where, ref in refs:
        assert ref.startswith("#/"), f"{where}: only local references, got {ref}"
        try:
            at(ref[1:])
        except (KeyError, IndexError, ValueError):
            pytest.fail(f"{where}: {ref} does not resolve")
    # Every schema compiles with its references resolved.
    for ptr, _ in all_schemas():
        validator(ptr).is_valid(None)


def test_examples_match_their_schemas():
    for path, method, op in OPERATIONS:
        base = ("paths", path, method)
        if "requestBody" in op:
            for name, ex in body_examples(op):
                assert_valid(pointer(*base, "requestBody", "content", "application/json", "schema"), ex, f"example {name} of {method.upper()} {path}")
        for i, p in enumerate(op.get("parameters", [])):
            if "example" in p:
                assert_valid(pointer(*base, "parameters", str(i), "schema"), p["example"], f"example of parameter {p['name']}")
    for name, s in SPEC["components"]["schemas"].items():
        if "example" in s:
            assert_valid(pointer("components", "schemas", name), s["example"], f"example of {name}")


# ---------------------------------------------------------------------------------------------
# (b) Spec and router agree
# ---------------------------------------------------------------------------------------------


def test_every_operation_answers_its_examples(server: Rest):
    seed(server)
    for path, method, op in OPERATIONS:
        examples = body_examples(op) or [("no body", None)]
        for name, ex in examples:
            r = server.request(method.upper(), path + query_example(op), ex)
            assert r.status not in (404, 405), f"{method.upper()} {path} is not routed: {r.status} {r.text}"
            assert r.status == 200, f"{method.upper()} {path} with example {name} answered {r.status}: {r.text}"
            check_response(path, method, r)


def test_other_methods_answer_405_with_the_spec_methods_in_allow(server: Rest):
    for path in SPEC["paths"]:
        allowed = spec_methods(path)
        implied = allowed | ({"HEAD"} if "GET" in allowed else set())
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "HEAD"):
            if method in implied:
                continue
            r = server.request(method, path, raw=b"{}" if method not in ("GET", "HEAD", "TRACE") else None)
            assert r.status == 405, f"{method} {path} answered {r.status} (not in the spec, so 405 expected): {r.text}"
            got = {m.strip() for m in r.headers.get("allow", "").split(",") if m.strip()}
            assert got == implied, f"{path}: Allow says {sorted(got)}, the spec says {sorted(implied)}"
            if method != "HEAD":
                assert r.json["error"]["code"] == "method_not_allowed"
                check_component_response("MethodNotAllowed", r)
        if "GET" in allowed:
            r = server.request("HEAD", path + query_example(operation(path, "get")))
            assert r.status == 200, f"HEAD {path} answered {r.status}"


@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/index.html"),
        ("GET", "/ui/"),
        ("GET", "/api"),
        ("GET", "/api/v1"),
        ("POST", "/api/v1/nope"),
        ("POST", "/api/v1/contexts"),
        ("POST", "/api/v2/read"),
        ("POST", "/read"),
        ("GET", "/mcp"),
        ("POST", "/mcp"),
        ("GET", "/status/"),
        ("POST", "/search/semantic"),
        ("GET", "/HEALTH"),
    ],
)
def test_paths_not_in_the_spec_answer_404(server: Rest, method: str, path: str):
    assert path not in SPEC["paths"]
    r = server.request(method, path, {} if method == "POST" else None)
    assert r.status == 404, f"{method} {path} answered {r.status}: {r.text}"
    assert r.json["error"]["code"] == "not_found" and "no such endpoint" in r.json["error"]["message"]
    check_component_response("NotFound", r)


def router_routes() -> dict[tuple[str, str], str | None]:
    """(path, METHOD) → operation name: the REST surface's own routes, read from `rest_router`
    in src/http/rest.rs, and every REST route of the operation table (`memdir ops`)."""
    src = (REPO_ROOT / "src" / "http" / "rest.rs").read_text()
    start = src.index("fn rest_router")
    body = src[start : src.index("for op in ops::table()", start)]
    own = {"search": "search"}
    routes: dict[tuple[str, str], str | None] = {}
    for path, kind, handler in re.findall(r'\.route\(\s*"([^"]+)"\s*,\s*(get|post)\((\w+)\)\)', body):
        routes[(path, kind.upper())] = own.get(handler)
    assert routes, "no .route(...) found in rest_router: update this parser"
    table = json.loads(subprocess.run([str(MEMDIR_BIN), "ops"], capture_output=True, check=True, timeout=30).stdout)
    for op in table["operations"]:
        if op["rest"]:
            routes[(op["rest"]["path"], op["rest"]["method"])] = op["name"]
    return routes


def test_router_serves_exactly_the_spec():
    routes = router_routes()
    spec = {(path, method.upper()): op for path, method, op in OPERATIONS}
    assert set(routes) == set(spec), f"router only: {sorted(set(routes) - set(spec))}; spec only: {sorted(set(spec) - set(routes))}"
    table = {op["name"]: op for op in json.loads(subprocess.run([str(MEMDIR_BIN), "ops"], capture_output=True, check=True, timeout=30).stdout)["operations"]}
    for key, name in routes.items():
        assert spec[key].get("x-memdir-operation") == name, f"{key}: the router runs {name}, the spec says {spec[key].get('x-memdir-operation')}"
        if name is not None:
            tool = (table[name]["mcp"] or {}).get("tool")
            assert spec[key].get("x-memdir-tool") == tool, f"{key}: {name}'s tool is {tool}, the spec says {spec[key].get('x-memdir-tool')}"


def accepted_names(message: str) -> set[str] | None:
    """The argument names an unknown-argument error lists, if it lists them."""
    m = re.search(r"expected (?:one of:? )?(`.*)$", message)
    if not m:
        return None
    listed = re.findall(r"`([^`]+)`", m.group(1))
    return set(listed) if listed else {n.strip() for n in m.group(1).split(",")}


def test_unknown_arguments_are_rejected_and_accepted_names_are_the_spec(server: Rest):
    seed(server)
    checked = 0
    for path, method, op in OPERATIONS:
        for name, ex in body_examples(op):
            variant = variant_of(op, ex)
            if variant.get("additionalProperties") is not False:
                continue
            r = server.request("POST", path, {**ex, UNKNOWN: 1})
            assert r.status == 400, f"POST {path} accepted an unknown argument: {r.status} {r.text}"
            err = check_response(path, method, r)["error"]
            assert err["code"] == "invalid" and err.get("field") == UNKNOWN, err
            names = accepted_names(err["message"])
            if names is not None:
                assert names == set(variant["properties"]) - ROUTER_FIELDS, f"POST {path} ({name}): the server accepts {sorted(names)}, the spec {sorted(variant['properties'])}"
                checked += 1
        params = [deref(p) for p in op.get("parameters", []) if deref(p)["in"] == "query"]
        if params:
            r = server.request(method.upper(), f"{path}?{UNKNOWN}=1")
            assert r.status == 400, f"{method.upper()} {path} accepted an unknown parameter: {r.status} {r.text}"
            err = check_response(path, method, r)["error"]
            assert err.get("field") == UNKNOWN
            assert accepted_names(err["message"]) == {p["name"] for p in params}, err["message"]
            checked += 1
    assert checked >= 12
    # A batch item is a NewChunk: unknown fields inside it are rejected too.
    r = server.request("POST", "/ingest", {"chunks": [{"session_id": "s", "content": "x", UNKNOWN: 1}]})
    assert r.status == 400 and r.json["error"]["field"] == f"chunks[0].{UNKNOWN}", r.text


def test_required_arguments_are_required(server: Rest):
    seed(server)
    for path, method, op in OPERATIONS:
        if "requestBody" not in op or len(body_variants(op)) != 1:
            continue
        (name, ex), *_ = body_examples(op)
        for req in body_variants(op)[0].get("required", []):
            body = {k: v for k, v in ex.items() if k != req}
            r = server.request("POST", path, body)
            assert r.status == 400, f"POST {path} without {req} answered {r.status}: {r.text}"
            err = check_response(path, method, r)["error"]
            assert err.get("field") == req, f"POST {path} without {req}: {err}"


def test_request_fields_agree_with_the_mcp_tool_schemas(launch):
    srv = launch("--tools", "full")
    tools = {t["name"]: t["input_schema"] for t in srv.ok("GET", "/tools")["tools"]}
    seen = set()
    for path, method, op in OPERATIONS:
        if tool_of(op) is None:
            continue
        by_tool: dict[str, list[dict]] = {}
        if "requestBody" in op:
            for v in body_variants(op):
                by_tool.setdefault(tool_of(op, v), []).append(v)
        else:
            params = [deref(p) for p in op.get("parameters", [])]
            by_tool[tool_of(op)] = [{"properties": {p["name"]: p["schema"] for p in params}, "required": [p["name"] for p in params if p.get("required")]}]
        for tool, variants in by_tool.items():
            seen.add(tool)
            assert tool in tools, f"{method.upper()} {path} runs {tool}, which /tools does not list"
            props = set().union(*(v["properties"] for v in variants)) - ROUTER_FIELDS
            assert props == set(tools[tool]["properties"]), f"{tool}: spec {sorted(props)}, tool {sorted(tools[tool]['properties'])}"
            if len(variants) == 1:
                required = set(variants[0].get("required", [])) - ROUTER_FIELDS
                assert required == set(tools[tool].get("required", [])), f"{tool}: required {sorted(required)} vs {tools[tool].get('required')}"
    assert {"memory_search", "memory_search_semantic", "memory_ingest", "memory_restore"} <= seen
    # Every operation names its entry in the operation table; one without an MCP tool (diff)
    # names none.
    for path, method, op in OPERATIONS:
        if path not in ("/health", "/tools"):
            assert op.get("x-memdir-operation"), f"{method.upper()} {path}"
    assert "x-memdir-tool" not in operation("/api/v1/diff", "post")


# ---------------------------------------------------------------------------------------------
# (c) Responses match the response schemas
# ---------------------------------------------------------------------------------------------


def test_happy_path_responses_validate(server: Rest):
    health = server.ok("GET", "/health")
    assert health["ok"] is True
    before = server.ok("GET", "/status")
    assert before["exists"] is False
    assert server.ok("POST", "/search", {"query": "anything"})["engine"] == "empty"
    assert server.ok("GET", "/api/v1/list") == {"categories": [], "count": 0}

    one = server.ok("POST", "/ingest", {"session_id": "s1", "content": "The connection pool timeout is 30 seconds.", "project": "web", "metadata": {"role": "user"}})
    assert one["session_id"] == "s1" and one["position"] == 0 and one["ok"] is True
    batch = server.ok("POST", "/ingest", {"chunks": [{"session_id": "s1", "content": f"note {i} " + "x" * 600} for i in range(3)]})
    assert batch["count"] == 3 and [c["position"] for c in batch["chunks"]] == [1, 2, 3]

    w1 = server.ok("POST", "/api/v1/write", {"category": "base", "data": {"editor": "helix", "pool": "timeout tuning"}, "expected_hash": "absent", "reason": "first"})
    assert w1["unchanged"] is False and w1["version"] == 1
    w2 = server.ok("POST", "/api/v1/write", {"category": "base", "data": {"shell": "fish", "pool": None}, "merge": True, "expected_hash": w1["new_hash"]})
    assert w2["version"] == 2 and w2["op"] == "merge"
    same = server.ok("POST", "/api/v1/write", {"category": "base", "data": {"shell": "fish"}, "merge": True})
    assert same["unchanged"] is True

    hits = server.ok("POST", "/search", {"query": "connection pool timeout", "limit": 10, "context": 1})
    kinds = {h["kind"] for h in hits["results"]}
    assert hits["count"] == len(hits["results"]) >= 1 and "chunk" in kinds, hits
    server.ok("POST", "/search", {"query": "helix", "kind": "category"})
    server.ok("POST", "/search", {"query": "note", "full": False, "project": None, "mode": "bm25"})
    server.ok("POST", "/search", {"query": "\"no such phrase anywhere\"", "mode": "auto"})
    sem = server.ok("POST", "/search", {"query": "pool", "semantic": True, "limit": 2})
    assert sem["engine"] == "keyword-fallback"

    read = server.ok("POST", "/api/v1/read", {"category": "base"})
    assert read["data"] == {"editor": "helix", "shell": "fish"} and read["meta"]["current"] is True
    old = server.ok("POST", "/api/v1/read", {"category": "base", "version": 1, "fields": ["pool", "missing"]})
    assert old["data"] == {"pool": "timeout tuning"} and old["missing_fields"] == ["missing"] and old["meta"]["current"] is False
    server.ok("POST", "/api/v1/read", {"category": "base", "fields": "editor,shell"})

    server.ok("POST", "/api/v1/append", {"category": "journal", "data": {"e": 1}, "max_entries": 1})
    app = server.ok("POST", "/api/v1/append", {"category": "journal", "data": {"e": 2}})
    assert app["entries"] == 1 and app["dropped"] == 1

    listed = server.ok("GET", "/api/v1/list")
    assert {c["name"] for c in listed["categories"]} == {"base", "journal"}
    after = server.ok("GET", "/status")
    assert after["exists"] is True and after["chunks"] == 4 and after["categories"] == 2
    ov = server.ok("GET", "/overview?days=0&limit=1")
    assert ov["total"] == 1 and ov["sessions"][0]["message_count"] == 4
    page = server.ok("POST", "/fetch", {"session_id": "s1", "position": 1, "limit": 2})
    assert page["next_position"] == 3 and len(page["chunks"]) == 2

    hist = server.ok("POST", "/api/v1/history", {"category": "base", "diff_from": 1, "diff_to": 2})
    assert hist["total"] == 2 and hist["diff"]["from"] == 1
    assert server.ok("POST", "/api/v1/diff", {"category": "base"})["to"] == 2
    server.ok("POST", "/api/v1/diff", {"category": "base", "from": 1, "to": 1})
    assert server.ok("POST", "/api/v1/diff", {"category": "base", "to": 1})["from"] is None
    server.ok("POST", "/api/v1/delete", {"category": "base", "reason": "test"})
    server.ok("POST", "/api/v1/history", {"category": "base"})
    restored = server.ok("POST", "/api/v1/restore", {"category": "base", "version": 2, "expected_hash": "absent"})
    assert restored["restored_from"] == 2 and restored["version"] == 4
    server.ok("GET", "/tools")


def test_error_responses_validate(server: Rest):
    seed(server)
    base = server.ok("POST", "/api/v1/read", {"category": "base"})

    def err(method: str, path: str, body: Any, status: int, code: str, **kw: Any) -> dict:
        r = server.request(method, path, body, **kw)
        assert r.status == status, f"{method} {path} {body!r}: expected {status}, got {r.status} {r.text}"
        e = check_response(path.split("?")[0], method, r)["error"]
        assert e["code"] == code, e
        return e

    # 400
    assert err("POST", "/api/v1/read", None, 400, "invalid", raw=b"[1]")["field"] == "body"
    assert err("POST", "/api/v1/write", None, 400, "invalid", raw=b"{not json")["field"] == "body"
    assert err("POST", "/api/v1/read", {"category": ""}, 400, "invalid")["field"] == "category"
    assert err("POST", "/search", {"query": "x", "semantic": "true"}, 400, "invalid")["field"] == "semantic"
    assert err("POST", "/search", {"query": "x", "semantic": True, "mode": "bm25"}, 400, "invalid")["field"] == "mode"
    assert err("POST", "/search", {"query": "x", "limit": 0}, 400, "invalid")["field"] == "limit"
    assert err("GET", "/overview?days=x", None, 400, "invalid")["field"] == "days"
    assert err("POST", "/api/v1/write", {"category": "base", "data": [1]}, 400, "invalid")["field"] == "data"
    assert err("POST", "/api/v1/write", {"category": "base", "data": {}, "expected_hash": "nope"}, 400, "invalid")["field"] == "expected_hash"
    assert err("POST", "/ingest", {"chunks": []}, 400, "invalid")["field"] == "chunks"
    # 404
    assert err("POST", "/api/v1/read", {"category": "nope"}, 404, "not_found")["available"]
    err("POST", "/fetch", {"session_id": "never"}, 404, "not_found")
    assert err("POST", "/api/v1/restore", {"category": "base", "version": 99}, 404, "not_found")["versions"]
    err("POST", "/api/v1/history", {"category": "nope"}, 404, "not_found")
    err("POST", "/api/v1/diff", {"category": "base", "from": 42}, 404, "not_found")
    err("POST", "/api/v1/delete", {"category": "nope"}, 404, "not_found")
    # 409
    err("POST", "/api/v1/write", {"category": "base", "data": {"a": 1}, "expected_hash": "absent"}, 409, "conflict")
    err("POST", "/api/v1/delete", {"category": "base", "expected_hash": "0" * 64}, 409, "conflict")
    err("POST", "/api/v1/append", {"category": "base", "data": {"a": 1}}, 409, "conflict")
    err("POST", "/api/v1/write", {"category": "journal", "data": {"a": 1}}, 409, "conflict")
    # 413
    e = err("POST", "/ingest", {"session_id": "s", "content": "x" * (256 * 1024 + 1)}, 413, "too_large")
    assert e["field"] == "content" and e["limit"] == 256 * 1024
    # 422: a hand-edited category file that is not JSON.
    server.ok("POST", "/api/v1/write", {"category": "broken", "data": {"a": 1}})
    (server.store / "categories" / "broken.json").write_text("{not json\n")
    assert err("POST", "/api/v1/read", {"category": "broken"}, 422, "corrupt")["current_hash"]
    err("POST", "/api/v1/append", {"category": "broken", "data": {"a": 1}}, 422, "corrupt")
    err("POST", "/api/v1/restore", {"category": "broken", "version": 1}, 422, "corrupt")
    assert base["meta"]["hash"]


def test_body_limit_answers_413(launch):
    srv = launch("--body-limit", "1024")
    for path, method, op in OPERATIONS:
        if method != "post":
            continue
        r = srv.request("POST", path, {"pad": "x" * 4096})
        assert r.status == 413, f"POST {path} with a body over --body-limit answered {r.status}: {r.text}"
        assert check_response(path, method, r)["error"]["code"] == "too_large"


def test_token_security(launch):
    token = "s3cret-token-for-tests"
    srv = launch("--token", token)
    for path, method, op in OPERATIONS:
        r = srv.request(method.upper(), path + query_example(op), (body_examples(op) or [(None, None)])[0][1])
        if op.get("security") == []:
            assert r.status == 200, f"{method.upper()} {path} needs no token, answered {r.status}"
            continue
        assert r.status == 401, f"{method.upper()} {path} without a token answered {r.status}: {r.text}"
        assert r.headers.get("www-authenticate") == "Bearer"
        assert check_response(path, method, r)["error"]["code"] == "unauthorized"
    assert srv.request("GET", "/status", headers={"Authorization": "Bearer wrong"}).status == 401
    assert srv.request("GET", "/status", headers={"X-Token": token + "x"}).status == 401
    srv.ok("GET", "/status", headers={"Authorization": f"Bearer {token}"})
    srv.ok("GET", "/api/v1/list", headers={"X-Token": token})
    srv.ok("POST", "/api/v1/write", {"category": "base", "data": {"a": 1}}, headers={"X-Token": token})
    # A token server serves any Host name.
    srv.ok("GET", "/status", headers={"Authorization": f"Bearer {token}", "Host": "memory.example.com"})


def test_host_and_origin_checks_answer_403(server: Rest):
    for headers in ({"Host": "evil.example.com"}, {"Origin": "http://evil.example.com"}):
        for path, method in (("/status", "GET"), ("/health", "GET"), ("/api/v1/read", "POST")):
            r = server.request(method, path, {"category": "base"} if method == "POST" else None, headers=headers)
            assert r.status == 403, f"{method} {path} with {headers} answered {r.status}"
            assert check_response(path, method, r)["error"]["code"] == "denied"
    server.ok("GET", "/status", headers={"Host": "localhost:1234", "Origin": "http://127.0.0.1:3000"})
