#!/usr/bin/env python3
"""Measure memdir's retrieval on the dev set (bench/devset/devset.json), as an agent sees it.

For each conversation: a fresh memory directory, `memdir serve` over stdio driven by the MCP
Python SDK, every session ingested in order with `memory_ingest` (one batch per session, each
turn a chunk `"<speaker>: <text>"`, ts = the session's date, metadata {dia_id, speaker},
source_id = the dia id). The (session_id, position) the ingest answers map hits back to turn ids.
Then, per question, three `memory_search` calls:

  ranking   {query, limit: 10, context: 0, mode}: where each evidence turn ranks among the hits;
            R@k = share of the question's evidence turns in the top k, averaged over questions.
  default   {query}: the answer an agent gets without options (5 hits, context windows of 3);
            the share of evidence turns shown (as a hit or a context line), of those shown
            whole (the line not cut to an excerpt, which memdir marks with '…'), and its size in
            tokens (characters of the text content / 4).
  budget    {query, max_tokens: 800}: the same, with the token budget.

Per-question results go to bench/results/devset-<mode>.json; a summary table to stdout.

    .venv/bin/python bench/devset/eval.py                         # bm25, release binary
    .venv/bin/python bench/devset/eval.py --mode hybrid --config embeddings.toml
    .venv/bin/python bench/devset/eval.py --old-fixture           # also bench/fixtures/recall.json
"""

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINDS = ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial"]


def text_of(res):
    return "".join(getattr(c, "text", "") or "" for c in res.content)


def payload(res):
    if getattr(res, "structured_content", None):
        return res.structured_content
    try:
        return json.loads(text_of(res))
    except ValueError:
        return {}


class Server:
    """One `memdir serve` over stdio on one memory directory."""

    def __init__(self, binary, store, config, errlog):
        env = dict(os.environ, MEMDIR_CONFIG=config, MEMDIR_DIR=store)
        env.pop("MEMDIR_TOOLS", None)
        self.params = StdioServerParameters(command=binary, args=["serve", "--dir", store], env=env)
        self.errlog = errlog

    async def __aenter__(self):
        self._cm = stdio_client(self.params, errlog=self.errlog)
        r, w = await self._cm.__aenter__()
        self._sess = ClientSession(r, w)
        self.s = await self._sess.__aenter__()
        await self.s.initialize()
        return self

    async def __aexit__(self, *exc):
        await self._sess.__aexit__(*exc)
        await self._cm.__aexit__(*exc)

    async def call(self, tool, args):
        res = await self.s.call_tool(tool, args)
        if getattr(res, "is_error", False) or getattr(res, "isError", False):
            raise RuntimeError(f"{tool} {json.dumps(args)[:200]}: {text_of(res)[:500]}")
        return res


def cut(text):
    """Whether an answer's line is an excerpt (memdir marks a cut with '…' at either end)."""
    return not isinstance(text, str) or text.startswith("…") or text.endswith("…")


def hits_of(p):
    """(session_id, position, whole, [(context position, whole)]) of each chunk hit, and the
    count of other hits; `whole` says the line shows the turn's whole text."""
    out, other = [], 0
    for h in p.get("results", []):
        if h.get("kind") == "chunk" and "session_id" in h and "position" in h:
            out.append((h["session_id"], h["position"], not cut(h.get("content")),
                        [(c.get("position"), not cut(c.get("content"))) for c in h.get("context") or []]))
        else:
            other += 1
    return out, other


async def wait_for_vectors(srv, query, mode, timeout):
    """With embeddings, wait until a search no longer answers by keyword fallback."""
    t0 = time.time()
    while True:
        p = payload(await srv.call("memory_search", {"query": query, "mode": mode, "limit": 1}))
        if p.get("engine") != "keyword-fallback":
            return p.get("engine")
        if time.time() - t0 > timeout:
            print(f"  still keyword-fallback after {timeout}s (coverage {p.get('coverage')}): {p.get('note')}",
                  file=sys.stderr)
            return "keyword-fallback"
        await asyncio.sleep(2)


ANSWER_ARGS: dict = {}


async def ask(srv, q, where, ev_keys, mode, budget, extra, schema_has_budget):
    """Run the three searches for one question; where maps (session_id, position) -> turn id."""
    rec = {}
    args = {"query": q, "limit": 10, "context": 0, "mode": mode, **extra}
    res = await srv.call("memory_search", args)
    p = payload(res)
    hits, other = hits_of(p)
    top = [where.get((s, pos)) for s, pos, _, _ in hits]
    rec["engine"] = p.get("engine")
    rec["top"] = top
    rec["ranks"] = [top.index(e) + 1 if e in top else None for e in ev_keys]
    rec["unmapped"] = sum(1 for t in top if t is None) + other
    variants = [("default", {"query": q, **extra, **ANSWER_ARGS})]
    if schema_has_budget:
        variants.append((f"budget{budget}", {"query": q, "max_tokens": budget, **extra}))
    for name, a in variants:
        res = await srv.call("memory_search", a)
        p = payload(res)
        hits, other = hits_of(p)
        shown, as_hit, whole = set(), set(), set()
        for s, pos, w, ctx in hits:
            t = where.get((s, pos))
            if t:
                shown.add(t)
                as_hit.add(t)
                if w:
                    whole.add(t)
            for c, w in ctx:
                t = where.get((s, c))
                if t:
                    shown.add(t)
                    if w:
                        whole.add(t)
        rec[name] = {"engine": p.get("engine"), "hits": len(hits),
                     "shown": [e in shown for e in ev_keys], "as_hit": [e in as_hit for e in ev_keys],
                     "whole": [e in whole for e in ev_keys],
                     "tokens": round(len(text_of(res)) / 4)}
        if "omitted" in p:
            rec[name]["omitted"] = p["omitted"]
    return rec


async def run_devset(args, dev, config, errlog):
    convs = dev["conversations"][: args.conversations or None]
    byconv = {}
    for q in dev["questions"]:
        byconv.setdefault(q["conv"], []).append(q)
    out = []
    for conv in convs:
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="memdir-devset-") as store:
            async with Server(args.memdir, store, config, errlog) as srv:
                has_budget = await takes_budget(srv)
                where = {}
                for sess in conv["sessions"]:
                    sid = f"{conv['id']}-s{sess['id']}"
                    chunks = []
                    for t in sess["turns"]:
                        content = t["text"] if args.no_speaker else f"{t['speaker']}: {t['text']}"
                        chunks.append({"session_id": sid, "project": conv["id"], "content": content,
                                       "ts": sess["date"], "source_id": t["id"],
                                       "metadata": {"dia_id": t["id"], "speaker": t["speaker"]}})
                    p = payload(await srv.call("memory_ingest", {"chunks": chunks}))
                    got = p.get("chunks", [])
                    if len(got) != len(chunks):
                        raise RuntimeError(f"{sid}: ingest answered {len(got)} chunks for {len(chunks)}")
                    for c, t in zip(got, sess["turns"]):
                        where[(c["session_id"], c["position"])] = t["id"]
                t_ing = time.time() - t0
                if args.mode in ("hybrid", "semantic"):
                    eng = await wait_for_vectors(srv, byconv[conv["id"]][0]["question"], args.mode, args.embed_timeout)
                    print(f"  {conv['id']}: vectors ready, engine {eng}", file=sys.stderr)
                for q in byconv.get(conv["id"], []):
                    rec = await ask(srv, q["question"], where, q["evidence"], args.mode, args.budget, json.loads(args.args), has_budget)
                    out.append({"id": q["id"], "conv": q["conv"], "kind": q["kind"], "question": q["question"],
                                "evidence": q["evidence"], **rec})
        print(f"  {conv['id']}: {sum(len(s['turns']) for s in conv['sessions'])} turns ingested in {t_ing:.1f}s, "
              f"{len(byconv.get(conv['id'], []))} questions, {time.time() - t0:.1f}s", file=sys.stderr)
    return out


async def takes_budget(srv) -> bool:
    """Whether the server's memory_search takes max_tokens."""
    tools = await srv.s.list_tools()
    schema = next(t for t in tools.tools if t.name == "memory_search").input_schema
    return "max_tokens" in schema.get("properties", {})


async def run_old_fixture(args, config, errlog):
    """bench/fixtures/recall.json: one store, a project per conversation (as memdir-bench recall)."""
    fx = json.load(open(os.path.join(ROOT, "bench/fixtures/recall.json")))
    out = []
    with tempfile.TemporaryDirectory(prefix="memdir-recall-") as store:
        async with Server(args.memdir, store, config, errlog) as srv:
            has_budget = await takes_budget(srv)
            where = {}
            for conv in fx["conversations"]:
                cid = conv["id"]
                for si, sess in enumerate(conv["sessions"]):
                    sid = f"{cid}-s{si}"
                    chunks = [{"session_id": sid, "project": cid, "content": t} for t in sess]
                    p = payload(await srv.call("memory_ingest", {"chunks": chunks}))
                    for c, ti in zip(p["chunks"], range(len(sess))):
                        where[(c["session_id"], c["position"])] = f"{cid}:{si}:{ti}"
            if args.mode in ("hybrid", "semantic"):
                await wait_for_vectors(srv, fx["conversations"][0]["questions"][0]["question"], args.mode, args.embed_timeout)
            for conv in fx["conversations"]:
                cid = conv["id"]
                for qi, q in enumerate(conv["questions"]):
                    ev = [f"{cid}:{si}:{ti}" for si, ti in q["evidence"]]
                    rec = await ask(srv, q["question"], where, ev, args.mode, args.budget, {"project": cid, **json.loads(args.args)}, has_budget)
                    out.append({"id": f"{cid}-q{qi + 1}", "conv": cid, "kind": "fixture", "question": q["question"],
                                "evidence": ev, **rec})
    return out


def frac(xs):
    return sum(xs) / len(xs) if xs else 0.0


def summarize(recs, budget):
    bname = f"budget{budget}"

    def block(rs):
        if not rs:
            return {"questions": 0}
        ranks = [r["ranks"] for r in rs]
        flat = [x for rk in ranks for x in rk]
        s = {
            "questions": len(rs),
            "evidence_turns": len(flat),
            "R@5": round(frac([frac([x is not None and x <= 5 for x in rk]) for rk in ranks]), 3),
            "R@10": round(frac([frac([x is not None and x <= 10 for x in rk]) for rk in ranks]), 3),
            "R@5_turns": round(frac([x is not None and x <= 5 for x in flat]), 3),
            "R@10_turns": round(frac([x is not None and x <= 10 for x in flat]), 3),
            "all_evidence@10": round(frac([all(x is not None for x in rk) for rk in ranks]), 3),
        }
        for name in ("default", bname):
            if name in rs[0]:
                s[name] = {
                    "shown": round(frac([frac(r[name]["shown"]) for r in rs]), 3),
                    "shown_as_hit": round(frac([frac(r[name]["as_hit"]) for r in rs]), 3),
                    "shown_whole": round(frac([frac(r[name].get("whole", [])) for r in rs]), 3),
                    "shown_turns": round(frac([x for r in rs for x in r[name]["shown"]]), 3),
                    "tokens_median": statistics.median(r[name]["tokens"] for r in rs),
                    "tokens_max": max(r[name]["tokens"] for r in rs),
                }
        return s

    kinds = [k for k in KINDS if any(r["kind"] == k for r in recs)] + sorted(
        {r["kind"] for r in recs} - set(KINDS))
    out = {"all": block(recs)}
    for k in kinds:
        out[k] = block([r for r in recs if r["kind"] == k])
    out["unmapped_hits"] = sum(r["unmapped"] for r in recs)
    out["engines"] = sorted({str(r["engine"]) for r in recs} | {str(r["default"]["engine"]) for r in recs})
    return out


def table(summary, budget, title):
    bname = f"budget{budget}"
    lines = [title,
             f"{'kind':<12} {'n':>4} {'R@5':>6} {'R@10':>6} {'all@10':>6} | {'default: shown':>14} {'whole':>5} {'hit':>5} {'tok p50':>7}"
             f" | {'max_tokens ' + str(budget) + ': shown':>19} {'whole':>5} {'tok p50':>7}"]
    for k, s in summary.items():
        if not isinstance(s, dict) or "R@5" not in s:
            continue
        d = s.get("default", {})
        b = s.get(bname, {})
        lines.append(f"{k:<12} {s['questions']:>4} {s['R@5']:>6.3f} {s['R@10']:>6.3f} {s['all_evidence@10']:>6.3f} | "
                     f"{d.get('shown', 0):>14.3f} {d.get('shown_whole', 0):>5.3f} {d.get('shown_as_hit', 0):>5.3f} {d.get('tokens_median', 0):>7} | "
                     f"{b.get('shown', 0):>19.3f} {b.get('shown_whole', 0):>5.3f} {b.get('tokens_median', 0):>7}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devset", default=os.path.join(ROOT, "bench/devset/devset.json"))
    ap.add_argument("--memdir", default=os.path.join(ROOT, "target/release/memdir"), help="the memdir binary")
    ap.add_argument("--mode", default="bm25", choices=["bm25", "hybrid", "semantic", "auto"],
                    help="mode of the ranking search (the default answer always uses the tool's defaults)")
    ap.add_argument("--config", help="memdir config file (an [embeddings] section for hybrid/semantic); "
                                     "default: an empty one, so no user config is read")
    ap.add_argument("--out", help="per-question results (default bench/results/devset-<mode>[-nospeaker].json)")
    ap.add_argument("--conversations", type=int, default=0, help="only the first N conversations")
    ap.add_argument("--budget", type=int, default=800, help="max_tokens of the budget answer")
    ap.add_argument("--answer", default="{}", help="JSON arguments added to the default answer's search "
                    "(e.g. '{\"limit\": 7, \"context\": 2}') to compare answer shapes")
    ap.add_argument("--args", default="{}", help="JSON arguments added to every search (ranking and answers), "
                    "e.g. '{\"context_weight\": 0.8}'")
    ap.add_argument("--no-speaker", action="store_true", help="ingest the turn text without the 'Name: ' prefix")
    ap.add_argument("--old-fixture", action="store_true", help="also measure bench/fixtures/recall.json")
    ap.add_argument("--embed-timeout", type=int, default=900, help="seconds to wait for vectors (hybrid/semantic)")
    args = ap.parse_args()
    global ANSWER_ARGS
    ANSWER_ARGS = json.loads(args.answer)

    tmpcfg = None
    config = args.config
    if config:
        config = os.path.abspath(config)
    else:
        if args.mode in ("hybrid", "semantic"):
            print(f"skipped: --mode {args.mode} needs an [embeddings] provider; pass --config FILE "
                  "(docs/search.md#embeddings)")
            return 0
        fd, tmpcfg = tempfile.mkstemp(prefix="memdir-devset-", suffix=".toml")
        os.close(fd)
        config = tmpcfg
    suffix = "-nospeaker" if args.no_speaker else ""
    out_path = args.out or os.path.join(ROOT, f"bench/results/devset-{args.mode}{suffix}.json")
    dev = json.load(open(args.devset))
    version = subprocess.run([args.memdir, "--version"], capture_output=True, text=True).stdout.strip()
    errpath = os.path.join(tempfile.gettempdir(), "memdir-devset-serve.log")
    t0 = time.time()
    try:
        with open(errpath, "w") as errlog:
            recs = asyncio.run(run_devset(args, dev, config, errlog))
            t_dev = time.time() - t0
            old = asyncio.run(run_old_fixture(args, config, errlog)) if args.old_fixture else None
    finally:
        if tmpcfg:
            os.unlink(tmpcfg)
    summary = summarize(recs, args.budget)
    doc = {
        "meta": {
            "date": dt.date.today().isoformat(),
            "memdir": version,
            "binary": os.path.relpath(args.memdir, ROOT) if args.memdir.startswith(ROOT) else args.memdir,
            "mode": args.mode,
            "speaker_prefix": not args.no_speaker,
            "devset": {k: dev["meta"][k] for k in ("seed", "conversations", "sessions", "turns", "questions")},
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "seconds": round(t_dev, 1),
            "metrics": "R@k: share of a question's evidence turns among the top k hits of {limit: 10, context: 0, "
                       "mode}, averaged over questions (R@k_turns: over evidence turns); all_evidence@10: every "
                       "evidence turn in the top 10. default/budget: the tool's defaults (and max_tokens); shown: "
                       "evidence turn is a hit or a context line; whole: shown and not cut to an excerpt; tokens: "
                       "characters of the text content / 4.",
        },
        "summary": summary,
        "questions": recs,
    }
    print(table(summary, args.budget, f"dev set, mode {args.mode}, {len(recs)} questions, {t_dev:.0f}s ({version})"))
    print(f"unmapped hits: {summary['unmapped_hits']}; engines: {', '.join(summary['engines'])}")
    if old is not None:
        osum = summarize(old, args.budget)
        doc["old_fixture"] = {"summary": osum, "questions": old}
        print()
        print(table(osum, args.budget, f"bench/fixtures/recall.json, mode {args.mode}, {len(old)} questions"))
        a = osum["all"]
        print(f"  per evidence turn (as memdir-bench recall counts): R@5 {a['R@5_turns']:.3f} R@10 {a['R@10_turns']:.3f}, "
              f"default answer shows {a['default']['shown_turns']:.3f}")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {os.path.relpath(out_path)} (total {time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
