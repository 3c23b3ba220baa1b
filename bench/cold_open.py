#!/usr/bin/env python3
"""A CLI search timed as a process, cold and back to back, in two stores (A against B).

Each round sleeps past the scan interval (1.2 s), so the first search of the round checks every
note for hand edits; the second follows at once, within the interval. Medians per store and the
ratios A/B. Usage:
    python3 bench/cold_open.py --memdir target/release/memdir --a DIR_WITH_NOTES --b DIR_WITHOUT [--rounds 12]
"""
import argparse
import os
import statistics
import subprocess
import time


def timed(memdir: str, store: str) -> float:
    env = dict(os.environ, MEMDIR_DIR=store)
    t = time.perf_counter()
    subprocess.run([memdir, "search", "tomato", "--limit", "5"], env=env,
                   stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memdir", default="target/release/memdir")
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args()
    res: dict[str, list[float]] = {"cold A": [], "next A": [], "cold B": [], "next B": []}
    for _ in range(args.rounds):
        for side, store in (("A", args.a), ("B", args.b)):
            time.sleep(1.2)
            res[f"cold {side}"].append(timed(args.memdir, store))
            res[f"next {side}"].append(timed(args.memdir, store))
    med = {k: statistics.median(v) for k, v in res.items()}
    for k, v in res.items():
        print(f"{k}: median {med[k]:.1f} ms (min {min(v):.1f}, max {max(v):.1f})")
    print(f"cold A/B {med['cold A'] / med['cold B']:.2f}, next A/B {med['next A'] / med['next B']:.2f}")


if __name__ == "__main__":
    main()
