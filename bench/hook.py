#!/usr/bin/env python3
"""Hook capture latency: one `memdir hook claude-code` per turn of a growing transcript.

Usage: python3 bench/hook.py [--memdir target/release/memdir] [--turns 200] [--fill 10000]

A store is pre-filled with `--fill` chunks (100 sessions), then a Claude Code transcript grows
by one turn at a time (a user prompt, an assistant thinking block, a tool call, its result and
the assistant's answer: five lines, two of them chunks) and the hook runs once per turn with a
`Stop` event on stdin, as Claude Code runs it. Prints JSON: wall-clock latency per event (p50,
p95, max, in ms, process start to exit), the CPU time (user + system) of each event's process,
and the chunk count at the end.
"""

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time


def turn(i, parent):
    """Five transcript lines of one turn; returns (lines, last uuid)."""
    base = {"cwd": "/home/dev/app", "gitBranch": "main", "sessionId": "bench-session",
            "version": "2.0.40", "isSidechain": False}
    u = [f"{i:06d}-{k}" for k in range(5)]
    recs = [
        {"type": "user", "uuid": u[0], "parentUuid": parent,
         "timestamp": f"2026-03-02T09:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
         "message": {"role": "user", "content": f"turn {i}: why does the cache test flake under load? "
                     "It fails about one run in five on CI."}},
        {"type": "assistant", "uuid": u[1], "parentUuid": u[0], "timestamp": "2026-03-02T09:00:00.000Z",
         "message": {"id": f"msg_{i}", "model": "claude-sonnet-4-5", "role": "assistant",
                     "content": [{"type": "thinking", "thinking": "Look at the clock reads. " * 20}]}},
        {"type": "assistant", "uuid": u[2], "parentUuid": u[1], "timestamp": "2026-03-02T09:00:01.000Z",
         "message": {"id": f"msg_{i}", "model": "claude-sonnet-4-5", "role": "assistant",
                     "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
                                  "input": {"command": "cargo test -p widget-cache ttl"}}]}},
        {"type": "user", "uuid": u[3], "parentUuid": u[2], "timestamp": "2026-03-02T09:00:02.000Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                  "content": "test result: FAILED. " + "x" * 2000}]},
         "toolUseResult": "failed"},
        {"type": "assistant", "uuid": u[4], "parentUuid": u[3], "timestamp": "2026-03-02T09:00:03.000Z",
         "message": {"id": f"msg_{i}b", "model": "claude-sonnet-4-5", "role": "assistant",
                     "content": [{"type": "text", "text": f"Turn {i}: the TTL check reads the clock "
                                  "twice; inject a clock and read it once."}]}},
    ]
    return [{**base, **r} for r in recs], u[4]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memdir", default="target/release/memdir")
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--fill", type=int, default=10000)
    a = ap.parse_args()
    binary = os.path.abspath(a.memdir)
    with tempfile.TemporaryDirectory(prefix="memdir-hook-bench-") as tmp:
        store = os.path.join(tmp, "store")
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "MEMDIR_DIR": store,
               "MEMDIR_DEVICE": "bench"}
        fill = os.path.join(tmp, "fill.jsonl")
        with open(fill, "w") as f:
            for n in range(a.fill):
                f.write(json.dumps({"session_id": f"s{n % 100}", "content":
                                    f"chunk {n} about pools, caches and deploys"}) + "\n")
        subprocess.run([binary, "ingest", "--jsonl", fill], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        tdir = os.path.join(tmp, "claude", "projects", "-home-dev-app")
        os.makedirs(tdir)
        path = os.path.join(tdir, "bench-session.jsonl")
        event = json.dumps({"session_id": "bench-session", "transcript_path": path,
                            "cwd": "/home/dev/app", "hook_event_name": "Stop"}).encode()
        parent = None
        times = []
        cpu = []
        for i in range(a.turns):
            lines, parent = turn(i, parent)
            with open(path, "a") as f:
                for r in lines:
                    f.write(json.dumps(r) + "\n")
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            r = subprocess.run([binary, "hook", "claude-code"], input=event, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            times.append((time.perf_counter() - t0) * 1000)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(((c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)) * 1000)
            assert r.returncode == 0 and not r.stdout, r
        log = os.path.join(store, ".memdir", "hook.log")
        assert not os.path.exists(log), open(log).read()
        out = subprocess.run([binary, "fetch", "cc-bench-session", "--limit", "1"], env=env,
                             check=True, stdout=subprocess.PIPE)
        total = json.loads(out.stdout)["total"]
        times.sort()
        cpu.sort()
        pct = lambda xs, p: round(xs[min(len(xs) - 1, int(p * len(xs)))], 1)
        print(json.dumps({"turns": a.turns, "fill_chunks": a.fill, "chunks_captured": total,
                          "wall_ms_p50": pct(times, 0.5), "wall_ms_p95": pct(times, 0.95),
                          "wall_ms_max": round(times[-1], 1),
                          "cpu_ms_p50": pct(cpu, 0.5), "cpu_ms_p95": pct(cpu, 0.95)}))


if __name__ == "__main__":
    main()
