"""The web viewer (src/viewer.rs, assets/viewer/): served at `/` by `memdir serve --transport
http` and by `memdir ui`, tested over plain HTTP and in a real browser.

The HTTP tests check what the server promises about the page: content types, a strict
Content-Security-Policy, cache headers and revalidation, the guard (no token for the page
itself, which holds no data; the token for every API call; Host checks), the page weight and
that nothing is loaded from elsewhere; and `memdir ui` (prints the URL, runs the opener).

The browser tests drive headless Chromium from Debian (`chromium`) with Debian's
`chromium-driver` through Selenium, offline: an explicit driver path and `SE_OFFLINE=true`, so
Selenium never downloads a driver or a browser. They load the viewer, search as a user types,
open a hit's session, read a category's history, diff two versions, restore with a stale hash
(the conflict is shown and nothing changes) and then with the current one, ask for a token
when the server has one, and check phone width and keyboard use. As in test_browser.py, a
missing browser is installed when this runs as root; elsewhere the tests skip, and under
CI=true they fail.

`MEMDIR_SCREENSHOTS=DIR` saves screenshots of the main pages there (the README's come from
`MEMDIR_SCREENSHOTS=docs/screenshots`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import MEMDIR_BIN, server_env, store_digest
from test_browser import chromium
from test_http import HttpServer, cli, start_server

pytestmark = [pytest.mark.timeout(300)]

CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL_TIMEOUT_S = 600.0
WAIT_S = 20.0
START_TIMEOUT_S = 20.0
PAGE_WEIGHT_LIMIT = 200 * 1024
TOKEN = "viewer-test-token-0123456789"


# --------------------------------------------------------------------------------------------
# A store with something to look at
# --------------------------------------------------------------------------------------------


def ok(store: Path, *args: str) -> Any:
    rc, out, err = cli(store, *args)
    assert rc == 0, (args, err)
    return out


def seed(store: Path) -> None:
    chunks = [
        {"session_id": "deploy-notes", "project": "web", "content": "We deployed v2 to staging on Monday.", "metadata": {"role": "user", "title": "Deploying v2"}},
        {"session_id": "deploy-notes", "project": "web", "content": "The postgres pool timed out under load.", "metadata": {"role": "assistant"}},
        {"session_id": "deploy-notes", "project": "web", "content": "We raised max_size=10 and the timeouts stopped.", "metadata": {"role": "assistant"}},
        {"session_id": "deploy-notes", "project": "web", "content": "Next: watch the connection pool metrics for a week.", "metadata": {"role": "user"}},
        {"session_id": "garden", "project": "home", "content": "Tomatoes need staking before the first truss sets.", "metadata": {"role": "user", "title": "Garden plans"}},
    ]
    jsonl = store.parent / "seed.jsonl"
    jsonl.write_text("".join(json.dumps(c) + "\n" for c in chunks))
    ok(store, "ingest", "--jsonl", str(jsonl))
    ok(store, "write", "base", "--data", json.dumps({"name": "Ada", "editor": "vim"}), "--reason", "first notes")
    ok(store, "write", "base", "--merge", "--data", json.dumps({"editor": "helix"}), "--reason", "switched editor")
    ok(store, "write", "base", "--merge", "--data", json.dumps({"shell": "fish"}))
    ok(store, "append", "journal", "--data", json.dumps({"event": "deployed v2"}))


# --------------------------------------------------------------------------------------------
# Over HTTP
# --------------------------------------------------------------------------------------------


@pytest.fixture
def seeded(tmp_path: Path, memdir_bin: Path) -> Path:
    store = tmp_path / "store"
    seed(store)
    return store


@pytest.fixture
def server(seeded: Path) -> Iterator[HttpServer]:
    srv = start_server(seeded, "http")
    yield srv
    assert srv.stop() == 0, srv.stderr


def assets_of(page: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/ui/[^"]+)"', page)


def test_the_page_and_its_assets_have_types_csp_and_cache_headers(server: HttpServer):
    r = server.request("GET", "/", check=False)
    assert r.status == 200, r.describe()
    assert r.header("Content-Type") == "text/html; charset=utf-8"
    csp = r.header("Content-Security-Policy") or ""
    for directive in ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "require-trusted-types-for 'script'"]:
        assert directive in csp, csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert r.header("X-Content-Type-Options") == "nosniff"
    assert r.header("Cache-Control") == "no-cache"
    page = r.body.decode()
    assert "<script>" not in page and "<style" not in page, "no inline script or style"
    assets = assets_of(page)
    types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
    assert {Path(a.split("?")[0]).suffix for a in assets} == set(types), assets
    weight = len(r.body)
    for a in sorted(set(assets)):
        ar = server.request("GET", a, check=False)
        assert ar.status == 200, ar.describe()
        assert ar.header("Content-Type") == types[Path(a.split("?")[0]).suffix]
        assert ar.header("Content-Security-Policy") == csp
        assert ar.header("X-Content-Type-Options") == "nosniff"
        # Versioned URLs are cached for good; the same file under another version revalidates.
        assert ar.header("Cache-Control") == "public, max-age=31536000, immutable", a
        stale = server.request("GET", a.split("?")[0] + "?v=old", check=False)
        assert stale.status == 200 and stale.header("Cache-Control") == "no-cache"
        weight += len(ar.body)
        # Nothing from elsewhere: no absolute URL in any asset (the SVG's xmlns is a name).
        text = ar.body.decode().replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert not re.search(r"https?://|url\(|@import", text), f"{a} names an outside resource"
    assert weight <= PAGE_WEIGHT_LIMIT, f"the viewer weighs {weight} bytes"
    # Revalidation: the page's ETag answers 304 without a body.
    etag = r.header("ETag")
    assert etag
    r304 = server.request("GET", "/", headers=[("If-None-Match", etag)], check=False)
    assert r304.status == 304 and r304.body == b""
    # HEAD works for the page like for every GET route.
    assert server.request("HEAD", "/", check=False).status == 200


def test_the_viewer_is_not_an_api_and_unknown_files_are_404(server: HttpServer):
    for path in ["/ui/", "/ui/nope.js", "/ui/../status", "/index.html", "/ui/app.js/x"]:
        r = server.request("GET", path)
        assert r.status == 404, r.describe()
        assert r.json["error"]["code"] == "not_found"
    r = server.request("POST", "/", {})
    assert r.status == 405, r.describe()
    assert "GET" in (r.header("Allow") or "")


def test_the_guard_applies_a_token_to_the_api_but_not_to_the_page(seeded: Path):
    srv = start_server(seeded, "http", token=TOKEN)
    try:
        page = srv.request("GET", "/", check=False)
        assert page.status == 200, page.describe()
        for a in set(assets_of(page.body.decode())):
            assert srv.request("GET", a, check=False).status == 200
        # The data is behind the token, as for every client.
        for method, path, body in [("GET", "/status", None), ("GET", "/overview", None), ("POST", "/search", {"query": "pool"})]:
            r = srv.request(method, path, body)
            assert r.status == 401, r.describe()
            r = srv.request(method, path, body, [("Authorization", f"Bearer {TOKEN}")])
            assert r.status == 200, r.describe()
        # A write needs it too, however the page is reached.
        r = srv.request("POST", "/api/v1/restore", {"category": "base", "version": "1"})
        assert r.status == 401
    finally:
        assert srv.stop() == 0
    # Without a token, the page obeys the Host and Origin checks like everything else.
    srv = start_server(seeded, "http")
    try:
        r = srv.request("GET", "/", host="evil.example:80")
        assert r.status == 403, r.describe()
        r = srv.request("GET", "/ui/app.js", headers=[("Origin", "null")])
        assert r.status == 403, r.describe()
    finally:
        assert srv.stop() == 0


def test_the_mcp_transport_serves_no_viewer(seeded: Path):
    srv = start_server(seeded, "mcp-http", token=TOKEN)
    try:
        r = srv.request("GET", "/", check=False)
        # Not open on the MCP transport: the token comes first, then there is no such page.
        assert r.status == 401, r.describe()
        r = srv.request("GET", "/", headers=[("Authorization", f"Bearer {TOKEN}")])
        assert r.status == 404, r.describe()
    finally:
        assert srv.stop() == 0


def start_ui(store: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """Starts `memdir ui`; returns the process and the URL it prints on stdout."""
    proc = subprocess.Popen(
        [str(MEMDIR_BIN), "ui", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=server_env(store, **(env or {})),
        text=True,
    )
    assert proc.stdout is not None
    # The first line is the URL; readline returns at once if the process dies first.
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        proc.wait()
        raise AssertionError(f"memdir ui printed no URL (exit {proc.returncode})")
    return proc, line


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("memdir ui did not stop on SIGTERM")


def fetch(url: str, token: str | None = None) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_ui_serves_the_viewer_on_a_free_loopback_port_and_prints_the_url(seeded: Path):
    proc, url = start_ui(seeded, "--no-open")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        assert not url.endswith(":0/")
        status, body = fetch(url)
        assert status == 200 and b"/ui/app.js?v=" in body
        status, body = fetch(url + "overview?days=0")
        assert status == 200 and json.loads(body)["total"] == 2
    finally:
        stop(proc)


def test_ui_opens_the_browser_with_the_url_and_keeps_a_token(seeded: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opened = tmp_path / "opened.txt"
    for name in ("xdg-open", "open"):
        opener = bin_dir / name
        opener.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{opened}"\n')
        opener.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "MEMDIR_HTTP_TOKEN": TOKEN}
    proc, url = start_ui(seeded, env=env)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (opened.exists() and opened.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert opened.exists() and opened.read_text().splitlines() == [url], "the opener got the URL, once"
        # The token is not in the URL (a command line other users may read); the page asks.
        assert TOKEN not in url
        assert fetch(url)[0] == 200
        assert fetch(url + "status")[0] == 401
        assert fetch(url + "status", TOKEN)[0] == 200
    finally:
        stop(proc)


# --------------------------------------------------------------------------------------------
# In a real browser
# --------------------------------------------------------------------------------------------


def chromedriver() -> Path:
    """Debian's chromium-driver, installed first when missing and this is root (as in CI)."""
    chromium()
    if not CHROMEDRIVER.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium-driver"]):
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=INSTALL_TIMEOUT_S, check=False)
    if CHROMEDRIVER.exists():
        return CHROMEDRIVER
    how = "apt-get install chromium-driver failed" if os.geteuid() == 0 else "apt-get install chromium-driver needs root"
    reason = f"{CHROMEDRIVER} is missing and cannot be installed here ({how})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the viewer's browser tests (scripts/test installs it as root)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver_path = chromedriver()
    # Selenium must not look for or download anything: the driver and the browser are given.
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
        "--window-size=1000,760",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(driver_path), log_output=subprocess.DEVNULL), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


class Page:
    """The viewer in the browser, on one server."""

    def __init__(self, driver: Any, base: str):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.d = driver
        self.base = base
        self.By = By
        self.wait = WebDriverWait(driver, WAIT_S)

    def open(self, fragment: str = "") -> None:
        self.d.get(self.base + "/" + fragment)

    def go(self, fragment: str) -> None:
        self.d.execute_script("location.hash = arguments[0]", fragment)

    def css(self, sel: str) -> Any:
        return self.wait.until(lambda d: d.find_element(self.By.CSS_SELECTOR, sel))

    def all(self, sel: str) -> list[Any]:
        return self.d.find_elements(self.By.CSS_SELECTOR, sel)

    def until(self, what: str, f: Any) -> Any:
        try:
            return self.wait.until(lambda d: f())
        except Exception as e:
            main = self.d.execute_script("return document.getElementById('main').innerText")
            raise AssertionError(f"{what}: not within {WAIT_S}s; page: {main[:1500]!r}") from e

    def text(self, sel: str) -> str:
        return self.css(sel).text

    def shot(self, name: str, out: Path) -> None:
        target = Path(os.environ.get("MEMDIR_SCREENSHOTS") or out)
        target.mkdir(parents=True, exist_ok=True)
        assert self.d.save_screenshot(str(target / f"{name}.png"))

    def console_errors(self) -> list[dict[str, Any]]:
        """Script errors and CSP violations; an HTTP error the page handles (a 409 it shows)
        is logged by the browser as a network error and is not one of them."""
        return [l for l in self.d.get_log("browser") if l["level"] == "SEVERE" and l.get("source") != "network"]


@pytest.fixture
def page(browser: Any, server: HttpServer) -> Iterator[Page]:
    p = Page(browser, f"http://{server.host_header}")
    p.open()
    browser.execute_script("sessionStorage.clear()")
    browser.get_log("browser")  # forget the log of earlier tests
    yield p
    errors = p.console_errors()
    assert not errors, f"the browser console reported errors: {errors}"


def test_load_search_as_you_type_and_open_a_hits_session(page: Page, tmp_path: Path):
    page.open()
    page.until("the session catalog", lambda: len(page.all("#session-list li")) == 2)
    titles = [a.text for a in page.all("#session-list .session-link")]
    assert set(titles) == {"Deploying v2", "Garden plans"}, titles
    page.shot("sessions", tmp_path)
    # The catalog filters by project.
    project = page.css("#f-project")
    project.send_keys("home")
    project.submit()
    page.until("the project filter", lambda: [a.text for a in page.all("#session-list .session-link")] == ["Garden plans"])

    page.go("#/search")
    q = page.css("#q")
    for ch in "pool":  # typed, one key at a time
        q.send_keys(ch)
    # Both pool turns sit within three turns of each other: one is a hit, the other a line
    # of its context window.
    page.until("hits as you type", lambda: page.all("#hits > li") and page.all("#hits mark"))
    summary = page.text("#search-summary")
    assert "engine bm25" in summary, summary
    marks = {m.text.lower() for m in page.all("#hits mark")}
    assert marks == {"pool"}, marks
    # Every hit shows its context: the neighbouring chunks of its session.
    first = page.all("#hits > li")[0]
    assert len(first.find_elements(page.By.CSS_SELECTOR, ".ctx li")) >= 2
    # The explanation is there on demand.
    why = first.find_element(page.By.CSS_SELECTOR, "details.explain")
    assert not why.get_attribute("open")
    why.find_element(page.By.CSS_SELECTOR, "summary").click()
    assert "Engine: bm25" in why.text and "Matching words: pool" in why.text
    assert "Parts: bm25" in why.text and "session" in why.text, why.text
    page.shot("search", tmp_path)

    # An identifier goes to exact search, and the literal is what is marked.
    q.clear()
    q.send_keys("max_size=10")
    page.until("exact hits", lambda: "engine exact" in page.text("#search-summary"))
    assert [m.text for m in page.all("#hits mark")] == ["max_size=10"]

    # Filters: categories only.
    q.clear()
    q.send_keys("helix")
    page.css("details summary").click()
    from selenium.webdriver.support.ui import Select

    Select(page.css("#s-kind")).select_by_value("category")
    page.until("category hits", lambda: page.all("#hits > li") and all(li.get_attribute("data-kind") == "category" for li in page.all("#hits > li")))
    assert "base" in page.text("#hits .hit-link")
    # The search is in the URL, so it survives a reload.
    page.d.refresh()
    page.until("the search after a reload", lambda: page.all("#hits > li[data-kind=category]"))
    assert page.css("#q").get_attribute("value") == "helix"

    # Open a hit's session: the page of the session around the hit, the hit marked.
    Select(page.css("#s-kind")).select_by_value("chunk")
    q = page.css("#q")
    q.clear()
    q.send_keys("timed out")
    page.until("chunk hits", lambda: page.all("#hits > li[data-kind=chunk]"))
    link = page.all("#hits .hit-link")[0]
    # A hit names its session by its title; the id is beside it.
    assert link.text.startswith("Deploying v2 #"), link.text
    assert page.all("#hits .session-id")[0].text == "deploy-notes"
    position = link.text.split("#")[1]
    link.click()
    hit = page.css(".chunk.hit")
    assert hit.get_attribute("id") == f"c-{position}"
    assert "timed out" in hit.text
    assert len(page.all("#chunks > li")) == 4
    assert page.d.execute_script("return location.hash").startswith("#/session/deploy-notes")
    assert page.text("main h1") == "Deploying v2"
    assert page.text("#session-id") == "deploy-notes"
    page.shot("session", tmp_path)


def test_history_diff_and_restore_with_a_stale_hash(page: Page, server: HttpServer, tmp_path: Path):
    store = server.store
    page.go("#/category/base?tab=history")
    page.until("three versions", lambda: len(page.all("#history-table tbody tr")) == 3)
    assert [r.get_attribute("data-version") for r in page.all("#history-table tbody tr")] == ["3", "2", "1"]
    page.shot("history", tmp_path)

    # The diff of the newest version against its parent.
    page.css('#history-table tr[data-version="3"] a[href*="tab=diff"]').click()
    page.until("the diff", lambda: page.all("#diff .add"))
    assert [s.text for s in page.all("#diff .add")] == ['+  "name": "Ada",', '+  "shell": "fish"']
    # Any two versions.
    from selenium.webdriver.support.ui import Select

    Select(page.css("#diff-from")).select_by_value("1")
    page.css("#diff-show").click()
    page.until("the diff from version 1", lambda: "From version 1 to version 3" in page.text("#diff-out"))
    assert '-  "editor": "vim",' in [s.text for s in page.all("#diff .del")]
    page.shot("diff", tmp_path)

    # Restore version 1, but the category changes after the page read it: a conflict.
    page.go("#/category/base?tab=history")
    page.css('#history-table tr[data-version="1"] button.restore').click()
    expected = page.css("#restore-hash").get_attribute("value")
    current = ok(store, "read", "base")["meta"]["hash"]
    assert expected == current
    ok(store, "write", "base", "--merge", "--data", json.dumps({"editor": "emacs"}), "--reason", "changed elsewhere")
    before = store_digest(store)
    page.css("#restore-reason").send_keys("back to the first notes")
    page.css("#restore-submit").click()
    alert = page.css('#restore-result .alert[data-code="conflict"]')
    assert "Conflict" in alert.text
    now = ok(store, "read", "base")
    assert now["meta"]["hash"] in alert.text, "the conflict names the current hash"
    assert store_digest(store) == before, "a stale restore changed nothing"
    assert now["data"]["editor"] == "emacs"
    page.shot("restore-conflict", tmp_path)

    # Reload, review, restore against the current hash: a new version with the old content.
    page.css("#restore-result button.secondary").click()
    page.until("four versions", lambda: len(page.all("#history-table tbody tr")) == 4)
    page.css('#history-table tr[data-version="1"] button.restore').click()
    assert page.css("#restore-hash").get_attribute("value") == now["meta"]["hash"]
    page.css("#restore-submit").click()
    page.until("five versions", lambda: len(page.all("#history-table tbody tr")) == 5)
    restored = ok(store, "read", "base")
    assert restored["data"] == {"name": "Ada", "editor": "vim"}
    newest = ok(store, "history", "base", "--limit", "1")["versions"][0]
    assert newest["op"] == "restore" and newest["actor"] == "test", newest

    # A log: its entries, and an append through the same API.
    page.go("#/category/journal")
    page.until("the log", lambda: len(page.all("#log-entries li")) == 1)
    page.css("details.card summary").click()
    page.css("#append-data").send_keys('{"event": "rolled back"}')
    page.css("#append-data").submit()
    page.until("two entries", lambda: len(page.all("#log-entries li")) == 2)
    assert "rolled back" in page.all("#log-entries li")[0].text, "newest first"
    assert [e["data"] for e in ok(store, "read", "journal")["data"]["entries"]][-1] == {"event": "rolled back"}
    # Bad input: an error, and nothing appended.
    before = store_digest(store)
    page.css("details.card summary").click()
    page.css("#append-data").send_keys("not json")
    page.css("#append-data").submit()
    page.until("the JSON error", lambda: "not JSON" in page.css("details.card").text)
    assert store_digest(store) == before


def test_blame_shows_the_version_that_set_each_key_and_blames_inside_an_object(page: Page, server: HttpServer):
    store = server.store
    ok(store, "write", "prefs", "--data", json.dumps({"name": "Ada", "editor": {"name": "vim", "theme": "dark"}}), "--reason", "first prefs")
    ok(store, "write", "prefs", "--merge", "--data", json.dumps({"editor": {"name": "helix", "theme": "dark"}}), "--reason", "switched editor")
    actor = ok(store, "blame", "prefs")["keys"][0]["actor"]

    def rows() -> dict[str, dict[str, str]]:
        from selenium.common.exceptions import StaleElementReferenceException

        out = {}
        try:
            for tr in page.all("#blame-table tbody tr"):
                cell = lambda label: tr.find_element(page.By.CSS_SELECTOR, f'td[data-label="{label}"]').text
                out[tr.get_attribute("data-key")] = {
                    "version": cell("Version"),
                    "op": cell("Op"),
                    "by": cell("By"),
                    "reason": cell("Reason"),
                    "href": tr.find_element(page.By.CSS_SELECTOR, ".blame-version a").get_attribute("href"),
                }
        except StaleElementReferenceException:
            return {}  # the view was being replaced: asked again by `until`
        return out

    # The Blame tab, beside History: one row per top-level key, with the version that set it.
    page.go("#/category/prefs")
    page.css("#category-json")
    page.css('nav.tabs a[href*="tab=blame"]').click()
    page.until("two keys", lambda: len(page.all("#blame-table tbody tr")) == 2)
    assert [th.text for th in page.all("#blame-table thead th")][:7] == ["Key", "Value", "Version", "Op", "By", "When", "Reason"]
    top = rows()
    assert {k: (r["version"], r["op"], r["reason"]) for k, r in top.items()} == {
        "editor": ("2", "merge", "switched editor"),
        "name": ("1", "write", "first prefs"),
    }
    assert {r["by"] for r in top.values()} == {actor}
    assert top["name"]["href"].endswith("#/category/prefs?version=1"), "the version links to its content"
    assert page.all('#blame-table tr[data-key="name"] time'), "the time is shown as elsewhere"

    # Only an object can be blamed inside: the editor's keys, each with its own version.
    assert not page.all('#blame-table tr[data-key="name"] a.blame-inside')
    page.css('#blame-table tr[data-key="editor"] a.blame-inside').click()
    page.until("the editor's keys", lambda: set(rows()) == {"name", "theme"})
    assert "path=%2Feditor" in page.d.execute_script("return location.hash")
    inner = rows()
    assert (inner["name"]["version"], inner["name"]["reason"]) == ("2", "switched editor")
    assert (inner["theme"]["version"], inner["theme"]["reason"]) == ("1", "first prefs")
    assert page.text("#blame-path") == "top level / editor"
    page.css("#blame-path a").click()
    page.until("the top level again", lambda: set(rows()) == {"editor", "name"})

    # A value older than a compacted version is a lower bound.
    for i in range(1, 4):
        ok(store, "write", "trimmed", "--data", json.dumps({"k": 1, "v": i}), "--reason", f"write {i}")
    ok(store, "compact", "trimmed", "--keep", "1")
    page.go("#/category/trimmed?tab=blame")
    page.until("the trimmed keys", lambda: set(rows()) == {"k", "v"})
    assert rows()["k"]["version"] == "at least version 3"

    # Errors are shown as on every other page.
    page.go("#/category/prefs?tab=blame&path=%2Fname")
    assert "no object" in page.css('#blame-out .alert[data-code="invalid"]').text
    page.go("#/category/nope?tab=blame")
    assert "nope" in page.css('#blame-out .alert[data-code="not_found"]').text


def test_status_shows_what_needs_attention_first(page: Page, server: HttpServer, tmp_path: Path):
    page.go("#/status")
    page.until("verify-store", lambda: "ok" in page.text("#verify"))
    assert "Nothing" in page.text("#attention")
    page.shot("status", tmp_path)
    # A hand-broken category file comes first, with a link to its history.
    (server.store / "categories" / "base.json").write_text("{not json")
    page.d.refresh()
    page.until("the malformed file", lambda: "base" in page.text("#attention") and page.all("#attention li.problem"))
    first = page.all("#attention li")[0]
    assert "does not parse" in first.text
    assert first.find_element(page.By.TAG_NAME, "a").get_attribute("href").endswith("#/category/base?tab=history")
    assert "problem" in page.text("#verify")
    # A sync that could not reach its remote is listed too, and the last sync is shown.
    report = ok(server.store, "sync", "--remote", "http://127.0.0.1:9")
    assert report["push_pending"] is True, report
    page.d.refresh()
    page.until("the pending sync", lambda: page.all("#sync-pending"))
    assert "http://127.0.0.1:9" in page.text("#sync-pending")
    assert "pending" in page.text("#last-sync")


def test_phone_width_and_keyboard(page: Page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    d = page.d
    d.set_window_size(390, 844)
    try:
        for fragment, ready in [
            ("#/sessions", "#session-list li"),
            ("#/search?q=pool", "#hits li"),
            ("#/category/base?tab=history", "#history-table tr"),
            ("#/category/base?tab=diff", "#diff"),
            ("#/category/base?tab=blame", "#blame-table tr"),
            ("#/status", "#verify .badge"),
        ]:
            page.go(fragment)
            page.css(ready)
            overflow = d.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{fragment} scrolls sideways by {overflow}px at phone width"
    finally:
        d.set_window_size(1000, 760)

    # "/" from anywhere goes to the search box; Tab reaches the hits; Enter opens one.
    page.go("#/sessions")
    page.css("#session-list li")
    d.find_element(page.By.TAG_NAME, "body").click()
    ActionChains(d).send_keys("/").perform()
    page.until("the search box has focus", lambda: d.switch_to.active_element.get_attribute("id") == "q")
    ActionChains(d).send_keys("staking").perform()
    page.until("a hit", lambda: page.all("#hits .hit-link"))
    for _ in range(30):
        ActionChains(d).send_keys(Keys.TAB).perform()
        if "hit-link" in (d.switch_to.active_element.get_attribute("class") or ""):
            break
    else:
        raise AssertionError("Tab never reached a hit")
    ActionChains(d).send_keys(Keys.ENTER).perform()
    page.until("the session by keyboard", lambda: page.all(".chunk.hit"))
    assert "Tomatoes" in page.text(".chunk.hit")


def test_nothing_is_loaded_from_elsewhere(page: Page):
    page.open()
    page.css("#session-list li")
    origin = page.base
    entries = page.d.execute_script(
        "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))"
        ".map(e => ({name: e.name, size: e.decodedBodySize, type: e.initiatorType}))"
    )
    outside = [e["name"] for e in entries if not e["name"].startswith(origin + "/")]
    assert not outside, f"requests outside the server: {outside}"
    weight = sum(e["size"] for e in entries if e["type"] in ("navigation", "script", "link", "img", "css"))
    assert 0 < weight <= PAGE_WEIGHT_LIMIT, weight


def test_a_token_is_asked_once_and_kept_for_the_tab(browser: Any, seeded: Path, tmp_path: Path):
    srv = start_server(seeded, "http", token=TOKEN)
    try:
        page = Page(browser, f"http://{srv.host_header}")
        page.open()
        browser.execute_script("sessionStorage.clear()")
        page.d.refresh()
        page.until("the token prompt", lambda: page.css("#login").is_displayed())
        assert page.d.switch_to.active_element.get_attribute("id") == "token"
        assert "Token required" in page.text("#main")
        page.shot("token", tmp_path)
        # A wrong token is refused and not kept.
        page.css("#token").send_keys("wrong-token")
        page.css("#token").submit()
        page.until("the refusal", lambda: page.css("#login-error").is_displayed())
        assert "refused" in page.text("#login-error")
        assert browser.execute_script("return sessionStorage.getItem('memdir.token')") is None
        # The right one opens the memory, and the tab keeps it across reloads.
        page.css("#token").send_keys(TOKEN)
        page.css("#token").submit()
        page.until("the catalog", lambda: len(page.all("#session-list li")) == 2)
        assert not page.css("#login").is_displayed()
        page.d.refresh()
        page.until("the catalog after a reload", lambda: len(page.all("#session-list li")) == 2)
        assert not page.css("#login").is_displayed()
        # Forgetting it asks again.
        page.css("#forget").click()
        page.until("the prompt again", lambda: page.css("#login").is_displayed())
        browser.get_log("browser")  # the refused requests are logged as console errors
    finally:
        browser.execute_script("sessionStorage.clear()")
        assert srv.stop() == 0


def test_markup_in_a_memory_is_shown_as_text(page: Page, server: HttpServer):
    evil = '<img src=x id=injected onerror="document.title=\'owned\'"><script>document.title="owned"</script> hostile'
    ok(server.store, "ingest", "--session-id", "evil<b>", "--text", evil)
    ok(server.store, "write", "evil_cat", "--data", json.dumps({"note": evil}))
    for fragment, ready in [("#/search?q=hostile", "#hits li"), ("#/session/evil%3Cb%3E", "#chunks li"), ("#/category/evil_cat", "#category-json"), ("#/sessions?days=0", "#session-list li")]:
        page.go(fragment)
        page.css(ready)
        # (A session's title is its first line, cut short: the markup is what every view shows.)
        page.until(f"{fragment} shows the markup as text", lambda: "<img src=x" in page.text("#main"))
        assert not page.all("#main img, #main script, #injected"), f"{fragment} turned a memory into markup"
        assert page.d.title == "memdir"


# --------------------------------------------------------------------------------------------
# Issue 29, item 11: what a newcomer sees first
# --------------------------------------------------------------------------------------------


def test_an_empty_store_says_it_has_no_sessions_yet_and_how_to_add_one(browser: Any, tmp_path: Path):
    store = tmp_path / "empty"
    ok(store, "init")
    srv = start_server(store, "http")
    try:
        page = Page(browser, f"http://{srv.host_header}")
        page.open()
        browser.get_log("browser")
        box = page.css("#empty-store")
        text = box.text
        assert "no sessions yet" in text, text
        assert "memdir import claude-code" in text and "memdir ingest" in text, text
        assert "No sessions match" not in page.text("#main")
        # Nothing hides sessions in an empty store, so no note says so.
        assert not page.all("#window-note")
        assert not page.console_errors()
    finally:
        assert srv.stop() == 0


def test_the_30_day_window_says_what_it_hides_and_shows_all_on_request(page: Page, server: HttpServer):
    ok(server.store, "ingest", "--session-id", "old-notes", "--text", "Notes from long ago", "--ts", "2020-01-02T00:00:00Z")
    page.open()
    page.until("the recent sessions", lambda: len(page.all("#session-list > li")) == 2)
    note = page.text("#window-note")
    assert "last 30 days" in note and "1 older session is hidden" in note, note
    page.css("#show-all").click()
    page.until("every session", lambda: len(page.all("#session-list > li")) == 3)
    assert "Notes from long ago" in [a.text for a in page.all("#session-list .session-link")]
    assert page.css("#f-days").get_attribute("value") == "0"
    assert not page.all("#window-note")


def test_a_session_reads_as_a_conversation_with_rendered_markdown(page: Page, server: HttpServer, tmp_path: Path):
    answer = "\n".join([
        "## Cause",
        "",
        "The `maxmemory` policy is *allkeys-lru*, and **every** key counts:",
        "",
        "- one key",
        "- two keys",
        "",
        "```",
        "CONFIG SET maxmemory-policy <b>noeviction</b>",
        "```",
        "",
        "> quoted",
        "",
        "See [the docs](https://redis.io/docs/eviction) and [this](javascript:alert(1)) <img src=x id=injected>",
        "",
        "| setting | value |",
        "|---|---|",
        "| maxmemory | 2gb |",
    ])
    chunks = [
        {"session_id": "s-md", "content": "Why is redis_eviction slow?\nIt takes seconds.", "metadata": {"role": "user"}},
        {"session_id": "s-md", "content": "Let me look.", "metadata": {"role": "assistant"}},
        {"session_id": "s-md", "content": answer, "metadata": {"role": "assistant"}},
    ]
    jsonl = tmp_path / "md.jsonl"
    jsonl.write_text("".join(json.dumps(c) + "\n" for c in chunks))
    ok(server.store, "ingest", "--jsonl", str(jsonl))
    # Titled as in the catalog (its first line: it has no title field), the id beside it.
    page.go("#/sessions")
    page.until("the catalog", lambda: "Why is redis_eviction slow?" in [a.text for a in page.all("#session-list .session-link")])
    page.go("#/session/s-md")
    page.until("the session", lambda: len(page.all("#chunks > li")) == 3)
    assert page.text("main h1") == "Why is redis_eviction slow?"
    assert page.text("#session-id") == "s-md"
    # User and assistant turns look different.
    user, assistant = page.css("#chunks > li.role-user"), page.all("#chunks > li.role-assistant")[1]
    style = lambda el, prop: page.d.execute_script("return getComputedStyle(arguments[0])[arguments[1]]", el, prop)
    assert style(user, "borderLeftColor") != style(assistant, "borderLeftColor")
    assert style(user, "backgroundColor") != style(assistant, "backgroundColor")
    assert user.find_element(page.By.CSS_SELECTOR, ".role").text.lower() == "user"
    # The answer's markdown is rendered, and its markup stays text.
    md = assistant.find_element(page.By.CSS_SELECTOR, ".md")
    one = lambda sel: md.find_element(page.By.CSS_SELECTOR, sel)
    assert one(".md-h").text == "Cause"
    assert one("p code").text == "maxmemory"
    assert one("em").text == "allkeys-lru" and one("strong").text == "every"
    assert [li.text for li in md.find_elements(page.By.CSS_SELECTOR, "ul > li")] == ["one key", "two keys"]
    assert one("pre.code").text == "CONFIG SET maxmemory-policy <b>noeviction</b>"
    assert one("blockquote").text == "quoted"
    links = md.find_elements(page.By.CSS_SELECTOR, "a")
    assert [(a.text, a.get_attribute("href")) for a in links] == [("the docs", "https://redis.io/docs/eviction")]
    assert "[this](javascript:alert(1)) <img src=x id=injected>" in md.text
    assert [th.text for th in md.find_elements(page.By.CSS_SELECTOR, "table th")] == ["setting", "value"]
    assert not page.all("#main img, #main script, #main b, #injected")
    page.shot("conversation", tmp_path)
    # A search hit in it is titled the same way.
    page.go("#/search?q=eviction&kind=chunk")
    page.until("the hit", lambda: page.all("#hits .hit-link"))
    assert page.all("#hits .hit-link")[0].text.startswith("Why is redis_eviction slow? #")


def test_a_word_inside_an_identifier_is_marked(page: Page, server: HttpServer):
    ok(server.store, "ingest", "--session-id", "cache", "--text", "We tuned lru_redis and the redis_eviction policy.")
    page.go("#/search?q=redis")
    page.until("marked hits", lambda: page.all("#hits mark"))
    assert "engine bm25" in page.text("#search-summary")
    assert [m.text for m in page.all("#hits mark")] == ["redis", "redis"]


def test_search_shows_as_many_hits_as_the_cli_unless_asked_for_more(page: Page, server: HttpServer, tmp_path: Path):
    jsonl = tmp_path / "many.jsonl"
    jsonl.write_text("".join(json.dumps({"session_id": f"w{i}", "content": f"wombat sighting number {i}"}) + "\n" for i in range(8)))
    ok(server.store, "ingest", "--jsonl", str(jsonl))
    cli_hits = ok(server.store, "search", "wombat")
    page.go("#/search?q=wombat")
    page.until("the hits", lambda: page.all("#hits > li"))
    assert len(page.all("#hits > li")) == len(cli_hits["results"]) == 5
    page.go("#/search?q=wombat&limit=8")
    page.until("eight hits", lambda: len(page.all("#hits > li")) == 8)


def test_a_corrected_hit_says_so_and_links_to_its_correction(page: Page, server: HttpServer):
    old = ok(server.store, "ingest", "--session-id", "week-1", "--text", "The deploy day is Friday, deploy at noon.")
    fix = ok(
        server.store,
        "ingest",
        "--session-id",
        "week 9",
        "--text",
        "Deploys moved to Tuesday.",
        "--supersedes",
        f"memdir://sessions/week-1/{old['position']}",
    )
    page.go("#/search?q=deploy%20day&limit=5")
    page.until("the hits", lambda: page.all("#hits > li"))
    marks = page.all("#hits > li .superseded")
    assert len(marks) == 1, [e.text for e in page.all("#hits > li")]
    assert "corrected by" in marks[0].text
    a = marks[0].find_element(page.By.CSS_SELECTOR, "a")
    assert "week 9 #" + str(fix["position"]) in a.text
    assert "session/week%209" in a.get_attribute("href")


# --------------------------------------------------------------------------------------------
# Categories nobody has looked at in a while
# --------------------------------------------------------------------------------------------

EARLIER = {"MEMDIR_CLOCK": "2026-01-01T00:00:00Z"}
LATER = {"MEMDIR_CLOCK": "2026-06-01T00:00:00Z"}  # 151 days after EARLIER


def ok_at(store: Path, clock: dict[str, str], *args: str) -> Any:
    """`ok` with the CLI's clock set (MEMDIR_CLOCK)."""
    p = subprocess.run([str(MEMDIR_BIN), *args], capture_output=True, text=True, timeout=30, env=server_env(store, **clock))
    assert p.returncode == 0, (args, p.stderr)
    return json.loads(p.stdout)


def test_status_lists_categories_not_written_or_reviewed_in_90_days_until_one_is_reviewed(browser: Any, tmp_path: Path):
    store = tmp_path / "store"
    ok_at(store, EARLIER, "write", "prefs", "--data", json.dumps({"editor": "helix"}))
    assert ok_at(store, LATER, "status")["stale"] == 1
    srv = start_server(store, "http", env=LATER)
    try:
        page = Page(browser, f"http://{srv.host_header}")
        page.open("#/status")
        browser.get_log("browser")
        page.until("the stale category", lambda: page.all("#attention #stale"))
        item = page.text("#attention #stale")
        assert "1 category not written or reviewed in 90 days" in item, item
        assert "memdir review --stale 90" in item and "memdir review CATEGORY" in item, item
        # Only a reminder: verify-store finds nothing wrong, and it stays listed after the check.
        page.until("verify-store", lambda: "ok" in page.text("#verify"))
        assert "1 category not written or reviewed" in page.text("#attention")
        # Reviewing it (at the same later time) clears the reminder.
        ok_at(store, LATER, "review", "prefs")
        page.d.refresh()
        page.until("verify-store after the review", lambda: "ok" in page.text("#verify"))
        assert not page.all("#attention #stale")
        assert "not written or reviewed" not in page.text("#attention")
        assert "Nothing" in page.text("#attention")
        assert not page.console_errors()
    finally:
        assert srv.stop() == 0


def test_notes_read_rendered_with_history_diff_restore_and_search_hits(page: Page, server: HttpServer, tmp_path: Path):
    store = server.store
    ok(store, "note", "write", "projects/orbital.md", "--text", "# Orbital\n\nDeploys go through **staging-1**.\n\n## Rollbacks\nTake five minutes.\n")
    ok(store, "note", "edit", "projects/orbital.md", "--old-str", "staging-1", "--new-str", "staging-2")
    page.go("#/notes")
    page.until("the note list", lambda: len(page.all("#note-table tbody tr")) == 1)
    page.css('#note-table a[href*="note/"]').click()
    page.until("the rendered note", lambda: page.all("#note-rendered strong"))
    assert page.css("#note-rendered strong").text == "staging-2"
    assert "Rollbacks" in page.text("#note-rendered")
    page.shot("note", tmp_path)
    # History, a diff, and a restore of the first version through the same compare-and-swap.
    page.go("#/note/projects%2Forbital.md?tab=history")
    page.until("two versions", lambda: len(page.all("#history-table tbody tr")) == 2)
    page.css('#history-table tr[data-version="2"] a[href*="tab=diff"]').click()
    page.until("the diff", lambda: page.all("#diff .add"))
    assert [s.text for s in page.all("#diff .add")] == ["+Deploys go through **staging-2**."]
    page.go("#/note/projects%2Forbital.md?tab=history")
    page.until("two versions", lambda: len(page.all("#history-table tbody tr")) == 2)
    page.css('#history-table tr[data-version="1"] button.restore').click()
    assert page.css("#restore-hash").get_attribute("value") == ok(store, "note", "read", "projects/orbital.md")["hash"]
    page.css("#restore-submit").click()
    page.until("three versions", lambda: len(page.all("#history-table tbody tr")) == 3)
    assert "staging-1" in (store / "notes/projects/orbital.md").read_text()
    assert ok(store, "note", "history", "projects/orbital.md", "--limit", "1")["versions"][0]["op"] == "restore"
    # A search hit of a note names its heading and lines and links to the note.
    page.go("#/search?q=rollbacks%20minutes")
    page.until("a note hit", lambda: page.all('li.hit-card[data-kind="note"]'))
    card = page.css('li.hit-card[data-kind="note"]')
    assert "Orbital > Rollbacks" in card.text and "lines 5–6" in card.text, card.text
    card.find_element("css selector", "a.hit-link").click()
    page.until("the note from the hit", lambda: page.all("#note-rendered"))
    assert "lines" in page.text("#note-body")
