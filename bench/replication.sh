#!/bin/sh
# The replication model test (tests/it/replication.rs) with fresh seeds for a while: three
# replicas and a hub, random local operations, syncs over git and HTTP, crashes, and every
# second seed the hostile peer (HOSTILE=0 or HOSTILE=1 runs only one kind). Stops at the first seed that breaks an invariant and prints the
# test's message, which names the seed, the step and the invariant; replay it with
# MEMDIR_REPLICATION_SEED=<seed> MEMDIR_REPLICATION_HOSTILE=<0|1> cargo test -p memdir --test it replication
#
#   bench/replication.sh [MINUTES] [STEPS]        (defaults: 10 minutes, 80 steps per seed)
#
# Prints one JSON object: seeds run, steps per seed, minutes, failures.
set -eu
MINUTES=${1:-10}
STEPS=${2:-80}
HOSTILE=${HOSTILE:-mix}
cd "$(dirname "$0")/.."
cargo test -q -p memdir --test it --no-run 2>/dev/null
end=$(( $(date +%s) + MINUTES * 60 ))
runs=0
hostile_runs=0
failed=0
while [ "$(date +%s)" -lt "$end" ]; do
  seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  case "$HOSTILE" in
    mix) hostile=$((runs % 2)) ;;
    *) hostile=$HOSTILE ;;
  esac
  if ! MEMDIR_REPLICATION_SEED=$seed MEMDIR_REPLICATION_STEPS=$STEPS MEMDIR_REPLICATION_HOSTILE=$hostile \
    cargo test -q -p memdir --test it replication:: >"${TMPDIR:-/tmp}/replication-$seed.log" 2>&1; then
    failed=$((failed + 1))
    grep -A40 "invariant violated\|panicked" "${TMPDIR:-/tmp}/replication-$seed.log" | head -60 >&2
    echo "seed $seed (hostile $hostile) failed; full log: ${TMPDIR:-/tmp}/replication-$seed.log" >&2
    break
  fi
  rm -f "${TMPDIR:-/tmp}/replication-$seed.log"
  runs=$((runs + 1))
  hostile_runs=$((hostile_runs + hostile))
done
printf '{"seeds_passed": %d, "hostile_seeds_passed": %d, "steps_per_seed": %d, "minutes": %d, "failed": %d}\n' \
  "$runs" "$hostile_runs" "$STEPS" "$MINUTES" "$failed"
[ "$failed" -eq 0 ]
