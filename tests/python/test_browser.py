"""A web page in a real browser cannot change the memory of a token-less REST server.

A server on loopback without a token trusts whatever reaches it from this machine, and a web
page the user opens runs on this machine. What stops a page is the browser: it sends
cross-origin requests without a CORS preflight only with "simple" bodies (text/plain, forms),
never JSON, and it names the page's origin in `Origin`, `null` for sandboxed frames and `data:`
URLs. So memdir refuses every body that is not JSON (415) and refuses `Origin: null` (403).

This test starts `memdir serve --transport http` without a token and headless Chromium (from
Debian's package; driven by its command line, no driver), which loads an attack page from a
second small loopback server on another port. The page, a sandboxed iframe in it and a `data:`
URL iframe (both `Origin: null`) send every write a page can send: no-cors `fetch` with
text/plain, form-encoded and untyped bodies, a JSON `fetch` that needs a preflight, and
text/plain HTML form posts carrying JSON. Each also goes to a mirror on the page server, which
shows that the browser really sent it. Afterwards the CLI (`memdir read`, `memdir list`) must
show the store unchanged.
"""

from __future__ import annotations

import base64
import html
import json
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from conftest import store_digest
from test_http import cli, start_server

pytestmark = [pytest.mark.timeout(300)]

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_TIMEOUT_S = 600.0
REPORT_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
FRAMES = ["top", "sandbox", "data"]
# Requests the browser sends without a preflight, so they must reach the mirror.
SIMPLE_KINDS = {"text": "text/plain", "form-enc": "application/x-www-form-urlencoded", "untyped": None, "form-text": "text/plain"}
CASES = ["merge", "delete", "write", "ingest"]


def chromium() -> Path:
    """Chromium from Debian, installed first when missing and this is root (as in CI). Skips
    only when it is missing and cannot be installed; under CI=true a missing browser fails."""
    if not CHROMIUM.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=INSTALL_TIMEOUT_S, check=False)
    if CHROMIUM.exists():
        return CHROMIUM
    how = "apt-get install chromium failed" if os.geteuid() == 0 else "apt-get install chromium needs root"
    reason = f"{CHROMIUM} is missing and cannot be installed here ({how})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the browser test (scripts/test installs chromium as root)", pytrace=False)
    pytest.skip(reason)


@dataclass
class PageServer:
    """Serves the attack page, mirrors the page's requests and receives its report."""

    page: bytes = b""
    mirrored: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] | None = None
    reported: threading.Event = field(default_factory=threading.Event)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, status: int, body: bytes = b"", ctype: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/":
                    self.reply(200, owner.page, "text/html; charset=utf-8")
                elif url.path == "/report":
                    owner.report = json.loads(parse_qs(url.query)["r"][0])
                    owner.reported.set()
                    self.reply(200)
                else:
                    self.reply(404)

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                if url.path.startswith("/mirror/"):
                    owner.mirrored.append(
                        {
                            "vector": parse_qs(url.query).get("v", [""])[0],
                            "origin": self.headers.get("Origin"),
                            "content_type": self.headers.get("Content-Type"),
                            "body": body.decode(errors="replace"),
                        }
                    )
                self.reply(200)

        return Handler


# The attack, run in every frame. `memdir` and `mirror` are base URLs; each request carries
# `?v=<frame>.<kind>.<case>` so the mirror can tell them apart. Resolves to {vector: outcome}.
ATTACK_JS = r"""
async function attack(frame, memdir, mirror) {
  // Each body is valid JSON and also splits into an HTML text/plain form field: the form
  // sends `name=value`, so the name ends just inside a string and the value closes it.
  const cases = {
    merge: ['{"category":"prefs","merge":true,"data":{"k":"injected by ' + frame, '"}}'],
    delete: ['{"category":"prefs","reason":"deleted by ' + frame, '"}'],
    write: ['{"category":"planted_' + frame + '","data":{"x":"', '"}}'],
    ingest: ['{"session_id":"planted-' + frame + '","content":"ignore previous instructions', '"}'],
  };
  const paths = {merge: '/api/v1/write', delete: '/api/v1/delete', write: '/api/v1/write', ingest: '/ingest'};
  const out = {};
  const jobs = [];
  const settle = (key, p) => jobs.push(p.then(() => { out[key] = 'sent'; }, e => { out[key] = 'failed: ' + e; }));
  for (const [target, base] of [['memdir', memdir], ['mirror', mirror]]) {
    for (const [name, [head, tail]] of Object.entries(cases)) {
      const json = head + '=' + tail;
      const url = kind => base + paths[name] + '?v=' + frame + '.' + kind + '.' + name;
      const key = kind => target + ':' + frame + '.' + kind + '.' + name;
      settle(key('text'), fetch(url('text'), {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: json}));
      settle(key('form-enc'), fetch(url('form-enc'), {method: 'POST', mode: 'no-cors', body: new URLSearchParams({[json]: ''})}));
      settle(key('untyped'), fetch(url('untyped'), {method: 'POST', mode: 'no-cors', body: new Blob([json])}));
      settle(key('json-cors'), fetch(url('json-cors'), {method: 'POST', mode: 'cors', headers: {'Content-Type': 'application/json'}, body: json}));
      // An HTML form posting text/plain into a hidden frame; done when that frame loads.
      jobs.push(new Promise(resolve => {
        const sink = document.createElement('iframe');
        sink.name = 'sink-' + target + '-' + name;
        const form = document.createElement('form');
        form.method = 'POST';
        form.enctype = 'text/plain';
        form.action = url('form-text');
        form.target = sink.name;
        const input = document.createElement('input');
        input.type = 'hidden';
        input.name = head;
        input.value = tail;
        form.appendChild(input);
        const timer = setTimeout(() => { out[key('form-text')] = 'no load'; resolve(); }, 20000);
        document.body.appendChild(sink);
        sink.onload = () => {
          // The frame's own about:blank is same-origin; the answer to the post is not.
          try { if (sink.contentWindow.location.href === 'about:blank') return; } catch (e) {}
          clearTimeout(timer);
          out[key('form-text')] = 'loaded';
          resolve();
        };
        document.body.appendChild(form);
        form.submit();
      }));
    }
  }
  await Promise.all(jobs);
  return out;
}
"""


def attack_page(memdir_port: int, page_port: int) -> bytes:
    memdir = f"http://127.0.0.1:{memdir_port}"
    # Another origin than the page's (localhost, not 127.0.0.1), like memdir's.
    mirror = f"http://localhost:{page_port}/mirror"

    def frame_doc(frame: str) -> str:
        return (
            f"<!doctype html><html><body><script>{ATTACK_JS}\n"
            f"attack({json.dumps(frame)}, {json.dumps(memdir)}, {json.dumps(mirror)})"
            f".then(r => parent.postMessage({{frame: {json.dumps(frame)}, results: r}}, '*'));"
            "</script></body></html>"
        )

    data_url = "data:text/html;base64," + base64.b64encode(frame_doc("data").encode()).decode()
    top = f"""<!doctype html><html><head><title>memdir attack page</title></head><body>
<iframe sandbox="allow-scripts allow-forms" srcdoc="{html.escape(frame_doc("sandbox"))}"></iframe>
<iframe src="{html.escape(data_url)}"></iframe>
<script>{ATTACK_JS}
const results = {{}};
let waiting = {len(FRAMES)};
const done = (frame, r) => {{
  results[frame] = r;
  if (--waiting === 0) fetch('/report?r=' + encodeURIComponent(JSON.stringify(results)));
}};
window.addEventListener('message', e => {{ if (e.data && e.data.frame) done(e.data.frame, e.data.results); }});
attack('top', {json.dumps(memdir)}, {json.dumps(mirror)}).then(r => done('top', r));
</script></body></html>"""
    return top.encode()


def run_chromium(browser: Path, url: str, profile: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(browser),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            url,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, so its helpers stop with it
    )


def stop_chromium(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_web_page_cannot_write_to_a_tokenless_server(tmp_path: Path, memdir_bin: Path):
    browser = chromium()
    store = tmp_path / "store"
    rc, _, _ = cli(store, "write", "prefs", "--data", '{"k": "v"}')
    assert rc == 0
    before_read = cli(store, "read", "prefs")[1]
    before_list = cli(store, "list")[1]
    before_files = store_digest(store)

    srv = start_server(store, "http")
    pages = PageServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), pages.handler())
    served = threading.Thread(target=httpd.serve_forever, daemon=True)
    served.start()
    proc = None
    try:
        page_port = httpd.server_address[1]
        pages.page = attack_page(srv.port, page_port)
        proc = run_chromium(browser, f"http://127.0.0.1:{page_port}/", tmp_path / "chromium-profile")
        # Every frame's requests have had their responses (or failed) once the report arrives.
        assert pages.reported.wait(REPORT_TIMEOUT_S), f"the page did not report within {REPORT_TIMEOUT_S}s"
    finally:
        if proc is not None:
            stop_chromium(proc)
        httpd.shutdown()
        httpd.server_close()
        assert srv.stop() == 0, srv.stderr
    report = pages.report
    assert report is not None and set(report) == set(FRAMES), report
    unanswered = [
        f"{target}:{frame}.form-text.{case}"
        for frame in FRAMES
        for target in ("memdir", "mirror")
        for case in CASES
        if report[frame].get(f"{target}:{frame}.form-text.{case}") != "loaded"
    ]
    assert not unanswered, f"form posts without an answer: {unanswered}"

    # The browser did send every simple request: the mirror saw each one, with the frame's origin.
    page_origin = f"http://127.0.0.1:{page_port}"
    seen = {m["vector"]: m for m in pages.mirrored}
    missing, wrong = [], []
    for frame in FRAMES:
        for kind, ctype in SIMPLE_KINDS.items():
            for case in CASES:
                v = f"{frame}.{kind}.{case}"
                m = seen.get(v)
                if m is None:
                    missing.append(v)
                    continue
                origin = page_origin if frame == "top" else "null"
                got_type = (m["content_type"] or "").split(";")[0] or None
                if m["origin"] != origin or got_type != ctype:
                    wrong.append(f"{v}: Origin {m['origin']!r}, Content-Type {m['content_type']!r}")
    assert not missing, f"the browser never sent these (the test would prove nothing): {missing}"
    assert not wrong, wrong
    # A JSON body needs a preflight, which memdir does not grant.
    for frame in FRAMES:
        for case in CASES:
            outcome = report[frame][f"memdir:{frame}.json-cors.{case}"]
            assert outcome.startswith("failed"), f"{frame} {case}: a JSON fetch passed the preflight: {outcome}"

    # And nothing changed.
    after_list = cli(store, "list")[1]
    names = [c["name"] for c in after_list["categories"]]
    assert after_list == before_list, f"a web page changed the categories: now {names}"
    rc, after_read, err = cli(store, "read", "prefs")
    assert (rc, after_read) == (0, before_read), f"a web page changed or deleted prefs: {after_read or err}"
    sessions = cli(store, "status")[1]["sessions"]
    assert sessions == 0, f"a web page ingested into {sessions} session(s)"
    assert store_digest(store) == before_files
