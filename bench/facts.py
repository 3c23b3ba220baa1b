#!/usr/bin/env python3
"""Facts that change: does the current value come first?

Builds two stores from the same multi-session conversations, in which facts are stated in an
early session and changed in a later one (a move, a new job, a changed plan, a corrected
number), each fact among ordinary turns of work talk. In store B each correcting turn names
the turn it corrects (`supersedes`, by source_id); in store A nothing links them. Then asks one
question per fact about its current value and records whether the best chunk hit holds the
current value (and whether the stale one outranks it).

    python3 bench/facts.py --memdir target/release/memdir [--out results.json]

Limits: the conversations are generated from templates (22 kinds of fact, 5 projects, filler
turns of work talk), questions are short and share words with both statements by design, and
only current-value questions are asked (memory as of a past date is not built yet).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

# (first statement, correction, question, current value, old value), {p} = project
FACTS = [
    ("We deploy {p} on Fridays at noon.", "Heads up: {p} deploys moved to Tuesdays from now on.", "which day do we deploy {p}", "Tuesdays", "Fridays"),
    ("The {p} standup is at 9:30 every morning.", "The {p} standup moved to 10:15, starting this week.", "what time is the {p} standup", "10:15", "9:30"),
    ("The {p} API rate limit is 500 requests per minute.", "We raised the {p} API rate limit to 800 requests per minute.", "what is the {p} API rate limit", "800", "500"),
    ("{p} runs on Postgres 14 in production.", "{p} production is on Postgres 16 now after the upgrade.", "which Postgres version does {p} production run", "16", "14"),
    ("The {p} staging URL is staging-old.{p}.dev.", "New staging host for {p}: stage2.{p}.dev (the old one is gone).", "what is the {p} staging URL", "stage2", "staging-old"),
    ("Maria owns the {p} billing service.", "Billing for {p} is owned by Kenji now after the reorg.", "who owns the {p} billing service", "Kenji", "Maria"),
    ("The {p} release branch is release/2.3.", "We cut a new {p} release branch: release/2.4 replaces the old one.", "what is the {p} release branch", "2.4", "2.3"),
    ("{p} uses Redis for the job queue.", "We moved the {p} job queue to NATS.", "what does {p} use for the job queue", "NATS", "Redis"),
    ("The {p} on-call rotation is weekly.", "{p} on-call is now a two-week rotation.", "how long is the {p} on-call rotation", "two-week", "weekly"),
    ("The {p} database backups run at 02:00 UTC.", "Backups for the {p} database now run at 04:30 UTC.", "when do the {p} database backups run", "04:30", "02:00"),
    ("{p} logs are kept for 30 days.", "Log retention for {p} changed to 90 days.", "how long are {p} logs kept", "90", "30"),
    ("The {p} design review is on Thursday afternoons.", "The {p} design review is Monday mornings now.", "when is the {p} design review", "Monday", "Thursday"),
    ("{p} CI runs on GitHub Actions.", "We moved {p} CI to Buildkite last sprint.", "where does {p} CI run", "Buildkite", "GitHub"),
    ("The {p} test coverage target is 70 percent.", "We lowered the {p} coverage target to 60 percent for now.", "what is the {p} test coverage target", "60", "70"),
    ("The {p} frontend is written in Vue.", "The {p} frontend was rewritten in Svelte.", "what is the {p} frontend written in", "Svelte", "Vue"),
    ("{p} sends email through Mailgun.", "{p} email goes through Postmark since the switch.", "which service sends {p} email", "Postmark", "Mailgun"),
    ("The {p} demo is scheduled for March 3.", "The {p} demo slipped to March 17.", "when is the {p} demo", "March 17", "March 3"),
    ("The {p} budget for cloud is 4000 dollars a month.", "Cloud budget for {p} went up to 6500 dollars a month.", "what is the {p} cloud budget", "6500", "4000"),
    ("{p} targets Python 3.10.", "{p} now targets Python 3.12.", "which Python version does {p} target", "3.12", "3.10"),
    ("The {p} cache TTL is 5 minutes.", "We set the {p} cache TTL to 15 minutes.", "what is the {p} cache TTL", "15 minutes", "is 5 minutes"),
    ("The {p} product manager is Aisha.", "Tomas took over as {p} product manager.", "who is the {p} product manager", "Tomas", "Aisha"),
    ("{p} is hosted in us-east-1.", "{p} moved its hosting to eu-west-1.", "which region hosts {p}", "eu-west-1", "us-east-1"),
]
PROJECTS = ["orion", "lumen", "basalt", "kestrel", "quill"]
FILLER = [
    "Can you look at the flaky test in the auth module? It fails about once in ten runs.",
    "I refactored the config loader so it reads the file once and caches it.",
    "The linter complains about unused imports in three files; I fixed two of them.",
    "Let's add a retry with backoff around the webhook call.",
    "The dashboard query is slow; an index on created_at should help.",
    "I wrote a migration that adds the archived column with a default of false.",
    "Please review the pull request for the pagination change when you have time.",
    "The error comes from a null user id in the session middleware.",
    "We should document the environment variables in the README.",
    "The memory usage grows during the import; it looks like we keep every row.",
    "I pinned the dependency versions to stop the surprise upgrades.",
    "Good catch, the timezone conversion was applied twice.",
]


def turns(rng, n):
    return [rng.choice(FILLER) for _ in range(n)]


def build(rng):
    """Sessions as lists of (content, source_id, supersedes); first and later ones."""
    early, late, questions = [], [], []
    facts = [(f, p) for p in PROJECTS for f in FACTS]
    rng.shuffle(facts)
    for i in range(0, len(facts), 4):
        group = facts[i : i + 4]
        s_early, s_late = [], []
        for j, ((first, fix, q, new, old), p) in enumerate(group):
            key = f"fact-{i + j}"
            s_early += [(t, None, None) for t in turns(rng, rng.randint(2, 4))]
            s_early.append((first.format(p=p), key, None))
            s_late += [(t, None, None) for t in turns(rng, rng.randint(2, 4))]
            s_late.append((fix.format(p=p), f"{key}-fix", key))
            questions.append({"q": q.format(p=p), "current": new, "old": old, "key": key})
        early.append(s_early)
        late.append(s_late)
    return early, late, questions


def write_jsonl(path, sessions, prefix, link):
    with open(path, "w") as f:
        for n, s in enumerate(sessions):
            for content, key, sup in s:
                line = {"session_id": f"{prefix}{n}", "content": content}
                if key:
                    line["source_id"] = key
                if sup and link:
                    line["supersedes"] = [sup]
                f.write(json.dumps(line) + "\n")


def run(memdir, store, *args):
    env = dict(os.environ, MEMDIR_DIR=store, MEMDIR_DEVICE="bench")
    out = subprocess.run([memdir, *args], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)}: {out.stderr}")
    return json.loads(out.stdout) if out.stdout.strip() else None


def measure(memdir, tmp, early, late, questions, link):
    store = os.path.join(tmp, "linked" if link else "plain")
    a, b = os.path.join(tmp, "early.jsonl"), os.path.join(tmp, "late.jsonl")
    write_jsonl(a, early, "early-", link)
    write_jsonl(b, late, "late-", link)
    run(memdir, store, "ingest", "--jsonl", a)
    run(memdir, store, "ingest", "--jsonl", b)
    rows = []
    for q in questions:
        r = run(memdir, store, "search", q["q"], "--limit", "5", "--context", "0")
        hits = [h["content"] for h in r["results"] if "session_id" in h]
        top = hits[0] if hits else ""
        rank = lambda v: next((i for i, h in enumerate(hits) if v in h), None)
        rows.append({**q, "top_is_current": q["current"] in top, "current_rank": rank(q["current"]), "old_rank": rank(q["old"])})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memdir", default="target/release/memdir")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out")
    a = ap.parse_args()
    early, late, questions = build(random.Random(a.seed))
    report = {"questions": len(questions)}
    per_item = {}
    with tempfile.TemporaryDirectory() as tmp:
        for link in (False, True):
            rows = measure(a.memdir, tmp, early, late, questions, link)
            name = "with_supersedes" if link else "without"
            report[name] = {
                "top_is_current": sum(r["top_is_current"] for r in rows) / len(rows),
                "current_in_top5": sum(r["current_rank"] is not None for r in rows) / len(rows),
                "stale_above_current": sum(
                    r["old_rank"] is not None and (r["current_rank"] is None or r["old_rank"] < r["current_rank"]) for r in rows
                ) / len(rows),
            }
            per_item[name] = rows
    print(json.dumps(report, indent=2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"report": report, "items": per_item}, f, indent=1)


if __name__ == "__main__":
    main()
