"""Figures of the web viewer on a large store: first paint, search as you type, page weight.

    cargo build --release
    MEMDIR_BIN=target/release/memdir .venv/bin/python bench/viewer.py [--chunks 100000]

Builds a store of N synthetic chunks (30 words each from a Zipf-like vocabulary, 1,000
sessions over 10 projects) with `memdir ingest --jsonl`, serves it with `memdir serve
--transport http`, and drives headless Chromium (Debian's chromium and chromium-driver, through
Selenium, offline) over loopback:

- first paint: `first-contentful-paint` of a fresh load of `/`, and the time until the session
  catalog (the landing view, read from `/overview`) is on screen (`memdir:sessions-rendered`);
- search as you type: a query typed one key at a time into the search box; each answer's
  round trip (`fetch` to parsed JSON) as the page measures it;
- page weight: the bytes of the page and its assets, uncompressed, and any request that went
  elsewhere than the server.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

from test_http import start_server  # noqa: E402

MEMDIR_BIN = Path(os.environ.get("MEMDIR_BIN") or ROOT / "target" / "release" / "memdir")
LOADS = 7
BATCH = 10_000
QUERIES = ["connection pool timeout", "deploy staging rollback", "editor theme fonts"]


def corpus(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)] + "connection pool timeout deploy staging rollback editor theme fonts postgres cache index".split()
    weights = [1 / (i + 1) for i in range(len(vocab))]
    out = []
    for i in range(n):
        words = rng.choices(vocab, weights, k=30)
        out.append({"session_id": f"s{i % 1000:04}", "project": f"p{i % 10}", "content": " ".join(words)})
    return out


def build_store(store: Path, chunks: int) -> float:
    env = {"MEMDIR_DIR": str(store), "MEMDIR_DEVICE": "bench", "HOME": str(store.parent), "PATH": os.environ["PATH"]}
    all_chunks = corpus(chunks)
    t0 = time.monotonic()
    # In batches of 10,000 lines (a batch is all or nothing, and bounded in size).
    for i in range(0, len(all_chunks), BATCH):
        jsonl = store.parent / "chunks.jsonl"
        jsonl.write_text("".join(json.dumps(c) + "\n" for c in all_chunks[i : i + BATCH]))
        subprocess.run([str(MEMDIR_BIN), "ingest", "--jsonl", str(jsonl)], env=env, check=True, stdout=subprocess.DEVNULL)
    # The index catches up on the first search; do it now so the figures are the steady state.
    subprocess.run([str(MEMDIR_BIN), "search", "warm up"], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def driver(profile: Path):
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
              "--disable-component-update", "--no-first-run", "--window-size=1000,760", f"--user-data-dir={profile}"]:
        o.add_argument(a)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver", log_output=subprocess.DEVNULL), options=o)


def wait(d, script: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = d.execute_script(script)
        if v:
            return v
        time.sleep(0.01)
    raise SystemExit(f"timed out waiting for: {script}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        built = build_store(store, args.chunks)
        print(f"store: {args.chunks} chunks in 1,000 sessions, built and indexed in {built:.1f} s")
        srv = start_server(store, "http")
        d = driver(Path(tmp) / "profile")
        base = f"http://{srv.host_header}/"
        try:
            # The browser's own floor on this machine: a one-line page from the same server's
            # origin (`data:` pages report no paint timing), compared with the viewer.
            fcp, rendered, ttfb, overview, floor = [], [], [], [], []
            for i in range(LOADS):
                d.get("about:blank")
                d.get(base + f"ui/icon.svg?load={i}")
                floor.append(d.execute_script(
                    "const n = performance.getEntriesByType('navigation')[0]; return n.responseEnd - n.startTime"))
                d.get("about:blank")
                d.get(base + f"?load={i}#/sessions")
                wait(d, "return performance.getEntriesByName('memdir:sessions-rendered').length")
                wait(d, "return performance.getEntriesByName('first-contentful-paint').length")
                fcp.append(d.execute_script("return performance.getEntriesByName('first-contentful-paint')[0].startTime"))
                rendered.append(d.execute_script("return performance.getEntriesByName('memdir:sessions-rendered')[0].startTime"))
                ttfb.append(d.execute_script("const n = performance.getEntriesByType('navigation')[0]; return n.responseStart - n.requestStart"))
                overview.append(d.execute_script(
                    "return performance.getEntriesByType('resource').filter(e => e.name.includes('/overview'))[0].duration"))
            entries = d.execute_script(
                "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))"
                ".map(e => ({name: e.name, size: e.decodedBodySize, type: e.initiatorType}))")
            weight = sum(e["size"] for e in entries if e["type"] != "fetch")
            outside = [e["name"] for e in entries if not e["name"].startswith(base)]
            # Warm loads (after the first) are what a user sees after the first visit; the
            # first is cold (no cached assets).
            print(f"first contentful paint: cold {fcp[0]:.0f} ms, warm median {statistics.median(fcp[1:]):.0f} ms, max {max(fcp):.0f} ms")
            print(f"browser floor: a one-file page from the same server, median {statistics.median(floor):.0f} ms to its last byte")
            print(f"server: page first byte median {statistics.median(ttfb):.1f} ms; /overview (50 of 1,000 sessions) median {statistics.median(overview):.1f} ms")
            print(f"session catalog on screen: cold {rendered[0]:.0f} ms, warm median {statistics.median(rendered[1:]):.0f} ms, max {max(rendered):.0f} ms")
            print(f"page weight: {weight} bytes uncompressed; requests elsewhere: {len(outside)}")

            times = []
            d.get(base + "#/search")
            q = wait(d, "return document.getElementById('q')")
            for query in QUERIES:
                d.execute_script("arguments[0].value = ''", q)
                for ch in query:
                    before = d.execute_script("return performance.getEntriesByName('memdir:search-answered').length")
                    q.send_keys(ch)
                    # Wait for this key's answer (the page debounces typing by 120 ms).
                    wait(d, f"return performance.getEntriesByName('memdir:search-answered').length > {before}")
                    times.append(float(d.execute_script("return document.getElementById('search-summary').dataset.ms")))
            times.sort()
            p95 = times[int(len(times) * 0.95) - 1]
            print(f"search as you type: {len(times)} answers, p50 {statistics.median(times):.1f} ms, p95 {p95:.1f} ms, max {times[-1]:.1f} ms")
            hits = " ".join(d.execute_script("return document.getElementById('search-summary').textContent").split())
            print(f"last answer: {hits}")
        finally:
            d.quit()
            srv.stop()


if __name__ == "__main__":
    main()
