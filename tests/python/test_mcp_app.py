"""memdir's viewer as an MCP App (the MCP Apps extension, `io.modelcontextprotocol/ui`, spec
2026-01-26): assets/mcp-app/viewer.html, served by the server as `ui://memdir/viewer` and named
in the `_meta.ui.resourceUri` of memory_search, memory_history and memory_overview.

The host is tests/mcp-app/host.js: the official `@modelcontextprotocol/ext-apps` AppBridge
and the official MCP client (`@modelcontextprotocol/client`, StreamableHTTPClientTransport),
bundled with esbuild from tests/mcp-app/node_modules (`npm ci` there; scripts/test runs it).
A page server of this test serves the host page on 127.0.0.1, the sandbox proxy
(tests/mcp-app/sandbox.js) on `localhost` (another origin, as the spec requires of web hosts)
and proxies /mcp to a real `memdir serve --transport mcp-http`, so the host's MCP client is
same-origin. Headless Chromium (Debian's, through Debian's chromedriver and Selenium, offline,
as in test_viewer.py) loads it; the test calls tools as a model would and drives the View.

The host reads the View's HTML from the server (resources/read of the tools' ui:// resource),
as a real host does; test_the_server_serves_the_app_resource checks that resource and the tools'
_meta directly.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import REPO_ROOT, store_digest
from test_browser import chromium
from test_http import HttpServer, start_server
from test_viewer import chromedriver, ok, seed

pytestmark = [pytest.mark.timeout(300)]

HOST_DIR = REPO_ROOT / "tests" / "mcp-app"
VIEWER = REPO_ROOT / "assets" / "mcp-app" / "viewer.html"
RESOURCE_URI = "ui://memdir/viewer"
MIME = "text/html;profile=mcp-app"
UI_TOOLS = ["memory_search", "memory_history", "memory_overview"]
WAIT_S = 20.0
NO_REQUEST_PATH = "/nothing-may-ask-for-this"


# --------------------------------------------------------------------------------------------
# The file itself
# --------------------------------------------------------------------------------------------


def inline(tag: str) -> str:
    found = re.findall(rf"<{tag}>([\s\S]*?)</{tag}>", VIEWER.read_text())
    assert len(found) == 1, f"one inline <{tag}>"
    return found[0]


def sha(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_the_app_is_one_file_that_loads_nothing_under_the_viewers_csp_rules():
    html = VIEWER.read_text()
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert m, "the page carries its own CSP"
    csp = m.group(1)
    # As `memdir ui`: nothing from anywhere, no eval, no HTML from strings; the one script and
    # the one style are allowed by their hashes (the file is served as is, so they are fixed).
    for directive in ["default-src 'none'", "connect-src 'none'", "img-src 'none'", "base-uri 'none'", "form-action 'none'", "require-trusted-types-for 'script'", "trusted-types 'none'"]:
        assert directive in csp, csp
    assert f"script-src '{sha(inline('script'))}'" in csp, "stale hash: run node tests/mcp-app/csp-hashes.mjs"
    assert f"style-src '{sha(inline('style'))}'" in csp, "stale hash: run node tests/mcp-app/csp-hashes.mjs"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    # No other script or style, no inline handler, nothing named elsewhere.
    assert len(re.findall(r"<script", html)) == 1 and len(re.findall(r"<style", html)) == 1
    assert not re.search(r"\son[a-z]+=", html), "no inline event handlers"
    assert not re.search(r"https?://|url\(|@import|\bfetch\(|XMLHttpRequest|WebSocket|EventSource|innerHTML|eval\(", html)
    assert len(html.encode()) <= 100 * 1024


# --------------------------------------------------------------------------------------------
# The server side: the resource and the tools' _meta
# --------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_server_serves_the_app_resource(tmp_path: Path, mcp_server: Any):
    """The server side: `ui://memdir/viewer` with the MCP App MIME type and this file's text,
    listed in resources/list and named by `_meta.ui.resourceUri` of the three tools."""
    store = tmp_path / "store"
    async with mcp_server(store) as srv:
        tools = {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in (await srv.session.list_tools()).tools}
        for name in UI_TOOLS:
            meta = tools[name].get("_meta") or {}
            assert (meta.get("ui") or {}).get("resourceUri") == RESOURCE_URI, (name, meta)
        for name, tool in tools.items():
            if name not in UI_TOOLS:
                assert "ui" not in (tool.get("_meta") or {}), name
        listed = {r.uri: r for r in (await srv.session.list_resources()).resources}
        assert listed[RESOURCE_URI].mime_type == MIME and listed[RESOURCE_URI].size == len(VIEWER.read_bytes())
        read = await srv.session.read_resource(RESOURCE_URI)
        [content] = read.contents
        c = content.model_dump(by_alias=True, exclude_none=True)
        assert c["mimeType"] == MIME and c["uri"] == RESOURCE_URI
        assert c["text"] == VIEWER.read_text(), "the resource is the file, byte for byte"
        ui = (c.get("_meta") or {}).get("ui") or {}
        # No outside origin of any kind: the host's default CSP is the one that applies.
        assert not any((ui.get("csp") or {}).get(k) for k in ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")), ui


# --------------------------------------------------------------------------------------------
# The host and its page server
# --------------------------------------------------------------------------------------------


def node_tools() -> Path:
    """tests/mcp-app/node_modules (scripts/test runs `npm ci` there): skipped without it, and
    under CI=true a failure."""
    esbuild = HOST_DIR / "node_modules" / ".bin" / "esbuild"
    if esbuild.exists() and shutil.which("node"):
        return esbuild
    reason = "tests/mcp-app/node_modules is missing (run: npm ci --prefix tests/mcp-app --ignore-scripts)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the MCP App tests", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def bundle() -> Path:
    esbuild = node_tools()
    out = HOST_DIR / "dist" / "host.bundle.js"
    subprocess.run(
        [str(esbuild), "host.js", "--bundle", "--format=esm", "--platform=browser", "--target=chrome120", "--log-level=warning", f"--outfile={out}"],
        cwd=HOST_DIR,
        check=True,
        timeout=120,
    )
    return out


class PageServer:
    """The host page on 127.0.0.1, the sandbox proxy on localhost (another origin), /mcp
    proxied to memdir. Every request is recorded."""

    def __init__(self, mcp: HttpServer, bundle: Path):
        self.mcp = mcp
        self.requests: list[tuple[str, str, str]] = []
        owner = self
        files = {
            "/host.html": (HOST_DIR / "host.html", "text/html; charset=utf-8"),
            "/dist/host.bundle.js": (bundle, "text/javascript; charset=utf-8"),
        }
        sandbox_files = {
            "/sandbox.html": (HOST_DIR / "sandbox.html", "text/html; charset=utf-8"),
            "/sandbox.js": (HOST_DIR / "sandbox.js", "text/javascript; charset=utf-8"),
        }

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _route(self) -> None:
                host = (self.headers.get("Host") or "").split(":")[0]
                path = self.path.split("?")[0]
                owner.requests.append((self.command, host, path))
                if host == "127.0.0.1" and path == "/mcp":
                    return self._proxy()
                table = files if host == "127.0.0.1" else sandbox_files if host == "localhost" else {}
                if self.command != "GET" or path not in table:
                    self.send_error(404)
                    return
                file, ctype = table[path]
                body = file.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                if path == "/host.html":
                    self.send_header(
                        "Content-Security-Policy",
                        f"default-src 'none'; script-src 'self'; connect-src 'self'; frame-src http://localhost:{owner.port}",
                    )
                self.end_headers()
                self.wfile.write(body)

            def _proxy(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id")}
                conn = http.client.HTTPConnection(owner.mcp.connect_host, owner.mcp.port, timeout=60)
                try:
                    conn.request(self.command, "/mcp", body=body, headers=headers)
                    r = conn.getresponse()
                    self.send_response(r.status)
                    for k, v in r.getheaders():
                        if k.lower() in ("content-type", "mcp-session-id", "cache-control", "allow"):
                            self.send_header(k, v)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    while True:  # streamed: an SSE answer ends when memdir ends it
                        chunk = r.read1(65536)
                        if not chunk:
                            break
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    conn.close()
                    self.close_connection = True

            do_GET = do_POST = do_DELETE = _route

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def host_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/host.html?sandbox=http://localhost:{self.port}/sandbox.html"

    def origins(self) -> tuple[str, str]:
        return f"http://127.0.0.1:{self.port}/", f"http://localhost:{self.port}/"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def mcp(request: Any, tmp_path: Path, memdir_bin: Path) -> Iterator[HttpServer]:
    """The server the host talks to; the full tool profile unless a test asks for another
    (`indirect` parametrization)."""
    store = tmp_path / "store"
    seed(store)
    profile = getattr(request, "param", "full")
    srv = start_server(store, "mcp-http", args=["--tools", profile])
    yield srv
    assert srv.stop() == 0, srv.stderr


@pytest.fixture
def pages(mcp: HttpServer, bundle: Path) -> Iterator[PageServer]:
    p = PageServer(mcp, bundle)
    yield p
    p.close()


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver_path = chromedriver()
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium())
    for arg in [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1000,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    d = webdriver.Chrome(service=Service(executable_path=str(driver_path), log_output=subprocess.DEVNULL), options=options)
    d.set_page_load_timeout(WAIT_S)
    d.set_script_timeout(WAIT_S)
    try:
        yield d
    finally:
        d.quit()


class Host:
    """The test host page in the browser, and the View inside its two iframes."""

    def __init__(self, d: Any, pages: PageServer):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.d = d
        self.pages = pages
        self.By = By
        self.wait = WebDriverWait(d, WAIT_S)

    def open(self) -> None:
        self.d.get(self.pages.host_url)
        self.d.get_log("browser")
        self.d.get_log("performance")
        self.d.get(self.pages.host_url)
        state = self.until_host("the host connected", "return window.mcpHost && (window.mcpHost.state.ready || window.mcpHost.state.error)")
        assert not self.state()["error"], self.state()["error"]
        del state

    def state(self) -> dict[str, Any]:
        self.d.switch_to.default_content()
        return self.d.execute_script("return JSON.parse(JSON.stringify(window.mcpHost.state))")

    def until_host(self, what: str, script: str) -> Any:
        self.d.switch_to.default_content()
        try:
            return self.wait.until(lambda d: d.execute_script(script))
        except Exception as e:
            raise AssertionError(f"{what}: not within {WAIT_S}s; host: {self.d.find_element(self.By.TAG_NAME, 'body').text[:500]!r}") from e

    def js(self, script: str, *args: Any) -> Any:
        """Runs an async function of the host page: `arguments` are the args, the value is returned."""
        self.d.switch_to.default_content()
        return self.d.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"(async (...a) => {{ {script} }})(...Array.prototype.slice.call(arguments, 0, -1))"
            ".then((v) => done({ok: v}), (e) => done({err: String(e && e.stack || e)}));",
            *args,
        )

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """A tools/call by the host's own MCP client, not through the View."""
        r = self.js("return await window.mcpHost.callTool(a[0], a[1]);", name, args)
        assert "ok" in r, r
        return r["ok"]

    def show(self, name: str, args: dict[str, Any]) -> None:
        r = self.js("await window.mcpHost.show(a[0], a[1]); return true;", name, args)
        assert r.get("ok") is True, r
        self.enter()

    def enter(self) -> None:
        """Into the View: the host's iframe (the sandbox proxy), then its inner iframe."""
        d = self.d
        d.switch_to.default_content()
        d.switch_to.frame(self.wait.until(lambda d: d.find_element(self.By.ID, "app")))
        d.switch_to.frame(self.wait.until(lambda d: d.find_element(self.By.TAG_NAME, "iframe")))

    def css(self, sel: str) -> Any:
        return self.wait.until(lambda d: d.find_element(self.By.CSS_SELECTOR, sel))

    def all(self, sel: str) -> list[Any]:
        return self.d.find_elements(self.By.CSS_SELECTOR, sel)

    def until(self, what: str, f: Any) -> Any:
        try:
            return self.wait.until(lambda d: f())
        except Exception as e:
            main = self.d.execute_script("const m = document.getElementById('main'); return m ? m.innerText : document.body.innerText")
            raise AssertionError(f"{what}: not within {WAIT_S}s; view: {main[:1500]!r}") from e

    def view_calls(self) -> list[dict[str, Any]]:
        calls = self.state()["viewCalls"]
        self.enter()
        return calls


@pytest.fixture
def host(driver: Any, pages: PageServer) -> Iterator[Host]:
    h = Host(driver, pages)
    h.open()
    yield h
    driver.switch_to.default_content()


def read_base(host: Host) -> dict[str, Any]:
    r = host.call("memory_read", {"category": "base"})
    host.enter()
    return r["structuredContent"]


# --------------------------------------------------------------------------------------------
# In the browser
# --------------------------------------------------------------------------------------------


def test_the_host_renders_a_search_and_the_view_searches_and_opens_sessions_through_it(host: Host, pages: PageServer, mcp: HttpServer):
    st = host.state()
    # The host shows the server's resource, found through the tools' _meta.
    assert st["source"] == "server", st
    assert st["resourceUri"] == RESOURCE_URI
    for name in UI_TOOLS:
        assert st["toolMeta"][name]["ui"]["resourceUri"] == RESOURCE_URI

    # The model calls memory_search; the host passes the input and the result to the View.
    host.show("memory_search", {"query": "pool"})
    host.until("the hits", lambda: host.all("#hits > li"))
    hits = host.all("#hits > li")
    assert [h.get_attribute("data-session") for h in hits] == ["deploy-notes"]
    assert {m.text.lower() for m in host.all("#hits mark")} == {"pool"}
    assert "engine bm25" in host.css("#search-summary").text
    # The hit's neighbouring window: the turns around it, in order, the hit among them.
    ctx = [li.get_attribute("data-position") for li in hits[0].find_elements(host.By.CSS_SELECTOR, ".ctx li")]
    assert ctx == ["0", "1", "2", "3"], ctx
    assert host.css("#q").get_attribute("value") == "pool", "the tool input fills the search box"
    assert host.view_calls() == [], "the View rendered what the host passed; it called nothing"

    # A new search typed in the View: a tools/call through the bridge to the server.
    q = host.css("#q")
    q.clear()
    q.send_keys("tomatoes staking")
    host.css("#search-go").click()
    host.until("the new hits", lambda: [h.get_attribute("data-session") for h in host.all("#hits > li")] == ["garden"])
    assert "Tomatoes" in host.css("#hits").text
    assert host.view_calls() == [{"name": "memory_search", "arguments": {"query": "tomatoes staking"}}]

    # Open the hit's session (memory_fetch through the bridge).
    host.css("#hits .hit-link").click()
    host.until("the session", lambda: host.all("#chunks > li"))
    assert host.css(".chunk.hit").get_attribute("id") == "c-0"
    assert "Tomatoes need staking" in host.css(".chunk.hit").text
    assert host.css("#session-id").text == "garden"
    assert host.view_calls()[-1] == {"name": "memory_fetch", "arguments": {"session_id": "garden", "position": 0, "limit": 20}}
    # The View asked the host for its height.
    assert host.state()["sizes"], "ui/notifications/size-changed"
    host.enter()


def test_the_overview_lists_sessions_and_opens_one(host: Host):
    host.show("memory_overview", {"days": 0})
    host.until("the catalog", lambda: len(host.all("#session-list > li")) == 2)
    assert {a.text for a in host.all("#session-list .session-link")} == {"Deploying v2", "Garden plans"}
    link = [a for a in host.all("#session-list .session-link") if a.text == "Deploying v2"][0]
    link.click()
    host.until("the session", lambda: len(host.all("#chunks > li")) == 4)
    assert host.css("#session-title").text == "Deploying v2"
    assert "role-user" in host.all("#chunks > li")[0].get_attribute("class")


@pytest.mark.parametrize("mcp", ["full", "default"], indirect=True)
def test_history_diff_and_restore_with_its_hash_through_the_host(host: Host, mcp: HttpServer, request: Any):
    """With the full profile the view restores through memory_restore; the default profile has
    no such tool, so it reads the old version and writes it with the same expected hash."""
    full = request.node.callspec.params["mcp"] == "full"
    store = mcp.store
    host.show("memory_history", {"category": "base"})
    host.until("three versions", lambda: len(host.all("#history-table tbody tr")) == 3)
    rows = host.all("#history-table tbody tr")
    assert [r.get_attribute("data-version") for r in rows] == ["3", "2", "1"]
    assert "switched editor" in rows[1].text and "first notes" in rows[2].text
    assert all("test" in r.text for r in rows), "the actor"
    newest = ok(store, "history", "base", "--limit", "1")["versions"][0]
    assert rows[0].find_element(host.By.CSS_SELECTOR, ".hash").get_attribute("title") == newest["hash"]

    # The diff of version 3 against its parent, then of any two versions.
    host.css('#history-table tr[data-version="3"] .diff-link').click()
    host.until("the diff", lambda: host.all("#diff .add"))
    assert [s.text for s in host.all("#diff .add")] == ['+  "name": "Ada",', '+  "shell": "fish"']
    from selenium.webdriver.support.ui import Select

    Select(host.css("#diff-from")).select_by_value("1")
    host.css("#diff-show").click()
    host.until("the diff from version 1", lambda: "From version 1 to version 3" in host.css("#diff-out").text)
    assert '-  "editor": "vim",' in [s.text for s in host.all("#diff .del")]
    assert host.view_calls()[-1] == {"name": "memory_history", "arguments": {"category": "base", "limit": 50, "diff_from": "1", "diff_to": "3"}}

    # Restore version 1 with the hash read when the form opened; the category changes first:
    # a conflict, and nothing changes.
    host.css('#history-table tr[data-version="1"] button.restore').click()
    expected = host.css("#restore-hash").get_attribute("value")
    assert expected == read_base(host)["meta"]["hash"]
    ok(store, "write", "base", "--merge", "--data", json.dumps({"editor": "emacs"}), "--reason", "changed elsewhere")
    before = store_digest(store)
    host.css("#restore-reason").send_keys("back to the first notes")
    host.css("#restore-submit").click()
    alert = host.css('#restore-result .alert[data-code="conflict"]')
    now = read_base(host)
    assert now["meta"]["hash"] in alert.text, "the conflict names the current hash"
    assert now["data"]["editor"] == "emacs"
    assert store_digest(store) == before, "a stale restore changed nothing"
    calls = host.view_calls()
    if full:
        assert calls[-1] == {"name": "memory_restore", "arguments": {"category": "base", "version": "1", "expected_hash": expected, "reason": "back to the first notes"}}
    else:
        assert calls[-3]["name"] == "memory_restore", "tried first, refused as an unknown tool"
        assert calls[-2] == {"name": "memory_read", "arguments": {"category": "base", "version": "1"}}
        assert calls[-1]["name"] == "memory_write"
        assert calls[-1]["arguments"]["expected_hash"] == expected
        assert calls[-1]["arguments"]["data"] == {"name": "Ada", "editor": "vim"}

    # Reload, restore against the current hash: a new version with the old content.
    host.css("#restore-reload").click()
    host.until("four versions", lambda: len(host.all("#history-table tbody tr")) == 4)
    host.css('#history-table tr[data-version="1"] button.restore').click()
    host.until("the current hash", lambda: host.css("#restore-hash").get_attribute("value") == now["meta"]["hash"])
    host.css("#restore-submit").click()
    host.until("five versions", lambda: len(host.all("#history-table tbody tr")) == 5)
    restored = read_base(host)
    assert restored["data"] == {"name": "Ada", "editor": "vim"}
    assert restored["meta"]["version"] == 5
    newest = ok(store, "history", "base", "--limit", "1")["versions"][0]
    assert newest["op"] == ("restore" if full else "write") and newest["actor"] == "test", newest
    if not full:
        assert newest["reason"] == "restore version 1"


def test_no_request_leaves_the_page_and_the_view_cannot_make_one(host: Host, pages: PageServer):
    host.show("memory_search", {"query": "pool"})
    host.until("the hits", lambda: host.all("#hits > li"))
    # Inside the View: the CSP refuses a request even to the page server itself.
    host.enter()
    r = host.d.execute_async_script(
        "const done = arguments[0];"
        f"fetch('http://127.0.0.1:{pages.port}{NO_REQUEST_PATH}').then(() => done('sent'), (e) => done('refused: ' + e));"
    )
    assert r.startswith("refused"), r
    assert host.d.execute_script("return location.origin") == "null", "an opaque origin"
    host.d.switch_to.default_content()
    assert all(path != NO_REQUEST_PATH for _, _, path in pages.requests)

    # Every request the browser made, in every frame: the page server's two origins only.
    urls = []
    for entry in host.d.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    allowed = pages.origins()
    outside = [u for u in urls if not u.startswith(allowed) and not u.startswith(("data:", "about:"))]
    assert urls and not outside, f"requests outside the host's page server: {outside}"
    # And what reached it: the host page, its bundle, the sandbox proxy and /mcp.
    paths = {p for _, _, p in pages.requests}
    assert paths <= {"/host.html", "/dist/host.bundle.js", "/sandbox.html", "/sandbox.js", "/mcp"}, paths
    # No script error and no CSP violation other than the refused fetch above.
    errors = [l for l in host.d.get_log("browser") if l["level"] == "SEVERE" and NO_REQUEST_PATH not in l["message"]]
    assert not errors, errors


def test_markup_in_a_memory_is_shown_as_text(host: Host, mcp: HttpServer):
    evil = '<img src=x id=injected onerror="document.title=\'owned\'"><script>document.title="owned"</script> hostile'
    ok(mcp.store, "ingest", "--session-id", "evil<b>", "--text", evil)
    host.show("memory_search", {"query": "hostile"})
    host.until("the hit", lambda: host.all("#hits > li"))
    assert "<img src=x" in host.css("#hits").text
    assert not host.all("#main img, #main script, #injected")
    host.css("#hits .hit-link").click()
    host.until("the session", lambda: host.all("#chunks > li"))
    assert "<img src=x" in host.css("#chunks").text
    assert not host.all("#main img, #main script, #injected")
    assert host.d.execute_script("return document.title") == "memdir"
