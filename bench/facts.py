#!/usr/bin/env python3
"""Facts that change: does the current value come first, and does as-of give the old one?

Builds two stores from the same multi-session conversations, in which facts are stated in an
early session and changed in a later one (a move, a new job, a changed plan, a corrected
number), each fact among ordinary turns of work talk. In store B each correcting turn names
the turn it corrects (`supersedes`, by source_id); in store A nothing links them. Sessions are
placed in time: each is ingested by its own process with the store's clock fixed to its date
(`MEMDIR_CLOCK`; every chunk's `ts` is that date too), one session every 3 days in the
conversations' order (all the early sessions, then all the later ones), 2026-01-05 to
2026-06-19; searches run with the clock a session step after the last one.

Two kinds of question, one of each per fact:

- current value: the question alone; does the best chunk hit hold the current value (and does
  the stale one outrank it)?
- past value: the same question about a date D strictly between the session of the first
  statement and that of the correction (a date, meaning the whole day, or an RFC 3339 time on
  such a day, alternately), so the right answer is the old value. Asked with `--as-of D`
  (memory as it stood then: does the best hit hold the old value, and is the new value, not
  yet said, anywhere in the hits?) and without it, as the baseline.

    python3 bench/facts.py --memdir target/release/memdir [--out results.json]

A binary whose search does not take `--as-of` answers those searches with a usage error: the
script notices it once, skips them, and records their figures as null with a note.

Limits: the conversations are generated from templates (22 kinds of fact, 5 projects, filler
turns of work talk, every fact changed exactly once); questions are short and share words with
both statements by design, and a past-value question is worded as the current-value one (the
date is the only difference), so words alone cannot tell which value is meant. By D the same
kind of fact may already have been corrected in another project, so the new value as a string
can be in the memory then ("new value in hits" counts those too; "correction in hits" counts
only the fact's own correction, which as-of must keep out).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone

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
    """Sessions as lists of (content, source_id, supersedes); first and later ones. Each
    question names its group (early-g states it, late-g corrects it) and the URIs of both
    turns."""
    early, late, questions = [], [], []
    facts = [(f, p) for p in PROJECTS for f in FACTS]
    rng.shuffle(facts)
    for i in range(0, len(facts), 4):
        group = facts[i : i + 4]
        g = len(early)
        s_early, s_late = [], []
        for j, ((first, fix, q, new, old), p) in enumerate(group):
            key = f"fact-{i + j}"
            s_early += [(t, None, None) for t in turns(rng, rng.randint(2, 4))]
            said = f"memdir://sessions/early-{g}/{len(s_early)}"
            s_early.append((first.format(p=p), key, None))
            s_late += [(t, None, None) for t in turns(rng, rng.randint(2, 4))]
            fixed = f"memdir://sessions/late-{g}/{len(s_late)}"
            s_late.append((fix.format(p=p), f"{key}-fix", key))
            questions.append({"q": q.format(p=p), "current": new, "old": old, "key": key, "group": g, "said": said, "fix": fixed})
        early.append(s_early)
        late.append(s_late)
    return early, late, questions


# Session k (the early ones, then the later ones) is saved at START + k * STEP.
START = datetime(2026, 1, 5, 10, 0, tzinfo=timezone.utc)
STEP = timedelta(days=3)


def rfc3339(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def schedule(early, late):
    """(session_id, chunks, time) in the order they are saved, and the time searches run at."""
    sessions = [(f"early-{n}", s) for n, s in enumerate(early)] + [(f"late-{n}", s) for n, s in enumerate(late)]
    timed = [(sid, s, START + k * STEP) for k, (sid, s) in enumerate(sessions)]
    return timed, START + len(timed) * STEP


def past_questions(rng, questions, n_early):
    """One past-value question per fact: as of a day strictly between the day of the first
    statement and that of the correction (the whole day, or alternately a time on it)."""
    out = []
    for n, q in enumerate(questions):
        said, fixed = START + q["group"] * STEP, START + (n_early + q["group"]) * STEP
        day = said + timedelta(days=rng.randint(1, (fixed - said).days - 1))
        if n % 2 == 0:
            as_of = day.strftime("%Y-%m-%d")
        else:
            as_of = rfc3339(day.replace(hour=rng.randint(0, 23), minute=rng.randint(0, 59)))
        out.append({**q, "as_of": as_of})
    return out


def as_of_time(as_of):
    """The time an as_of names: an RFC 3339 time, or a date meaning the whole of that day."""
    if "T" in as_of:
        return datetime.fromisoformat(as_of.replace("Z", "+00:00"))
    return datetime.fromisoformat(as_of).replace(tzinfo=timezone.utc) + timedelta(days=1, milliseconds=-1)


def write_jsonl(path, sid, chunks, ts, link):
    with open(path, "w") as f:
        for content, key, sup in chunks:
            line = {"session_id": sid, "content": content, "ts": ts}
            if key:
                line["source_id"] = key
            if sup and link:
                line["supersedes"] = [sup]
            f.write(json.dumps(line) + "\n")


def call(memdir, store, clock, *args):
    env = dict(os.environ, MEMDIR_DIR=store, MEMDIR_DEVICE="bench", MEMDIR_CLOCK=clock)
    return subprocess.run([memdir, *args], env=env, capture_output=True, text=True)


def run(memdir, store, clock, *args):
    out = call(memdir, store, clock, *args)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)}: {out.stderr}{out.stdout}")
    return json.loads(out.stdout) if out.stdout.strip() else None


class Searcher:
    """Searches one store at the time `now`. A binary whose search does not take `--as-of`
    answers it with a usage error: noticed once (`as_of_missing` says why), after which as-of
    searches answer None without running."""

    as_of_missing = None

    def __init__(self, memdir, store, now):
        self.memdir, self.store, self.now = memdir, store, now

    def hits(self, q, as_of=None):
        """The chunk hits, as (uri, content), best first; None when as_of cannot be asked."""
        args = ["search", q, "--limit", "5", "--context", "0"]
        if as_of is not None:
            if Searcher.as_of_missing:
                return None
            args += ["--as-of", as_of]
        out = call(self.memdir, self.store, self.now, *args)
        if out.returncode != 0:
            err = error_of(out.stderr) or error_of(out.stdout)
            if as_of is not None and err.get("code") == "usage" and "--as-of" in err.get("message", ""):
                Searcher.as_of_missing = f"this binary's search does not take --as-of ({err['message']}): as-of figures not measured"
                return None
            sys.exit(f"{' '.join(args)}: {out.stderr}{out.stdout}")
        r = json.loads(out.stdout)
        return [(h["uri"], h["content"]) for h in r["results"] if "session_id" in h]


def error_of(text):
    """The `error` object of a JSON error answer, or {}."""
    try:
        return json.loads(text).get("error") or {}
    except (ValueError, AttributeError):
        return {}


def rank(hits, value):
    return next((i for i, (_, h) in enumerate(hits) if value in h), None)


def current_row(q, hits):
    top = hits[0][1] if hits else ""
    row = {"q": q["q"], "kind": "current", "as_of": None, "expected": q["current"], "current": q["current"], "old": q["old"], "key": q["key"]}
    row.update(top=top, top_uri=hits[0][0] if hits else None, correct=q["current"] in top)
    row.update(top_is_current=row["correct"], current_rank=rank(hits, q["current"]), old_rank=rank(hits, q["old"]))
    return row


def past_row(q, hits, as_of, saved):
    """A past-value question's row; `saved` maps a session id to its save time. Besides the
    new value anywhere in the hits (another project's correction may be saved by then), the
    fact's own correction among them and any hit saved after the question's date, both of
    which as-of must keep out."""
    row = {"q": q["q"], "kind": "past", "as_of": as_of, "expected": q["old"], "current": q["current"], "old": q["old"], "key": q["key"]}
    if hits is None:
        none = ("top", "top_uri", "correct", "old_rank", "current_rank", "new_in_hits", "correction_in_hits", "later_in_hits")
        return {**row, **dict.fromkeys(none)}
    top = hits[0][1] if hits else ""
    row.update(top=top, top_uri=hits[0][0] if hits else None, correct=q["old"] in top)
    row.update(old_rank=rank(hits, q["old"]), current_rank=rank(hits, q["current"]))
    then = as_of_time(q["as_of"])
    row.update(
        new_in_hits=row["current_rank"] is not None,
        correction_in_hits=any(u == q["fix"] for u, _ in hits),
        later_in_hits=any(saved[u.split("/")[3]] > then for u, _ in hits),
    )
    return row


def measure(memdir, tmp, early, late, questions, past, link):
    store = os.path.join(tmp, "linked" if link else "plain")
    timed, now = schedule(early, late)
    path = os.path.join(tmp, "session.jsonl")
    for sid, chunks, t in timed:
        write_jsonl(path, sid, chunks, rfc3339(t), link)
        run(memdir, store, rfc3339(t), "ingest", "--jsonl", path)
    saved = {sid: t for sid, _, t in timed}
    s = Searcher(memdir, store, rfc3339(now))
    rows = [current_row(q, s.hits(q["q"])) for q in questions]
    rows += [past_row(q, s.hits(q["q"]), None, saved) for q in past]
    rows += [past_row(q, s.hits(q["q"], q["as_of"]), q["as_of"], saved) for q in past]
    return rows


def share(rows, f):
    return sum(bool(f(r)) for r in rows) / len(rows) if rows else None


def summary(rows):
    cur = [r for r in rows if r["kind"] == "current"]
    base = [r for r in rows if r["kind"] == "past" and r["as_of"] is None]
    then = [r for r in rows if r["kind"] == "past" and r["as_of"] is not None]
    out = {
        "top_is_current": share(cur, lambda r: r["correct"]),
        "current_in_top5": share(cur, lambda r: r["current_rank"] is not None),
        "stale_above_current": share(
            cur, lambda r: r["old_rank"] is not None and (r["current_rank"] is None or r["old_rank"] < r["current_rank"])
        ),
        "past_without_as_of": {
            "top_is_old": share(base, lambda r: r["correct"]),
            "old_in_top5": share(base, lambda r: r["old_rank"] is not None),
            "new_in_hits": share(base, lambda r: r["new_in_hits"]),
            "correction_in_hits": share(base, lambda r: r["correction_in_hits"]),
            "later_in_hits": share(base, lambda r: r["later_in_hits"]),
        },
    }
    measured = [r for r in then if r["correct"] is not None]
    out["past_as_of"] = {
        k: (share(measured, f) if measured else None)
        for k, f in (
            ("top_is_old", lambda r: r["correct"]),
            ("old_in_top5", lambda r: r["old_rank"] is not None),
            ("new_in_hits", lambda r: r["new_in_hits"]),
            ("correction_in_hits", lambda r: r["correction_in_hits"]),
            ("later_in_hits", lambda r: r["later_in_hits"]),
        )
    }
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memdir", default="target/release/memdir")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    early, late, questions = build(rng)
    past = past_questions(rng, questions, len(early))
    timed, now = schedule(early, late)
    report = {
        "questions": len(questions),
        "past_questions": len(past),
        "clock": {"sessions": len(timed), "first": rfc3339(timed[0][2]), "last": rfc3339(timed[-1][2]), "step_days": STEP.days, "searches_at": rfc3339(now)},
    }
    per_item, every = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for link in (False, True):
            rows = measure(a.memdir, tmp, early, late, questions, past, link)
            name = "with_supersedes" if link else "without"
            report[name] = summary(rows)
            per_item[name] = rows
            every += rows
    report["overall"] = summary(every)
    if Searcher.as_of_missing:
        report["note"] = Searcher.as_of_missing
    print(json.dumps(report, indent=2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"report": report, "items": per_item}, f, indent=1)


if __name__ == "__main__":
    main()
