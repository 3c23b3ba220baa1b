#!/bin/sh
# Sync figures over a local bare git remote: 10,000 new chunks and 1,000 category versions
# from one replica to another, a no-op sync, and repository growth per 1,000 category writes.
#
#   cargo build --release --bin memdir && bench/sync.sh [path/to/memdir]
#
# Prints one JSON object. Everything happens in a fresh temporary directory.
set -eu
BIN=${1:-target/release/memdir}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export HOME="$T/home" MEMDIR_CONFIG="$T/home/config.toml" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME" && : >"$MEMDIR_CONFIG"
git init -q --bare "$T/remote.git"
A="$T/a" B="$T/b"
ms() { date +%s%3N; }
kib() { du -sk "$1" | cut -f1; }

"$BIN" --dir "$A" write seed --data '{"a":1}' >/dev/null
"$BIN" --dir "$A" sync --init "$T/remote.git" >/dev/null
"$BIN" --dir "$B" sync --init "$T/remote.git" >/dev/null

# 10,000 chunks in 100 sessions, one batch each; 1,000 versions over 100 categories.
i=0
while [ $i -lt 100 ]; do
  j=0
  while [ $j -lt 100 ]; do
    printf '{"session_id":"s%d","content":"chunk %d of session %d with a few words"}\n' $i $j $i
    j=$((j + 1))
  done >"$T/batch.jsonl"
  "$BIN" --dir "$A" ingest --jsonl "$T/batch.jsonl" >/dev/null
  i=$((i + 1))
done
i=0
while [ $i -lt 1000 ]; do
  "$BIN" --dir "$A" write "c$((i % 100))" --merge --data "{\"k$((i % 7))\":$i}" >/dev/null
  i=$((i + 1))
done

git_before=$(kib "$T/remote.git")
t0=$(ms); "$BIN" --dir "$A" sync >/dev/null; t1=$(ms)
"$BIN" --dir "$B" sync >/dev/null; t2=$(ms)
git -C "$T/remote.git" gc -q
git_after=$(kib "$T/remote.git")
# A no-op sync: nothing changed on either side (best of five).
best=999999
for _ in 1 2 3 4 5; do
  s=$(ms); "$BIN" --dir "$B" sync >/dev/null; e=$(ms)
  [ $((e - s)) -lt $best ] && best=$((e - s))
done

# Growth per 1,000 category writes (each synced on its own commit per 100 writes).
before=$(kib "$T/remote.git")
i=0
while [ $i -lt 1000 ]; do
  "$BIN" --dir "$A" write "g$((i % 10))" --merge --data "{\"k$((i % 13))\":\"value $i\"}" >/dev/null
  i=$((i + 1))
  [ $((i % 100)) -eq 0 ] && "$BIN" --dir "$A" sync >/dev/null
done
git -C "$T/remote.git" gc -q
after=$(kib "$T/remote.git")
# After compact: the trimmed history leaves the tree; git keeps the old blobs reachable.
"$BIN" --dir "$A" compact --keep 5 --yes >/dev/null
"$BIN" --dir "$A" sync >/dev/null
git -C "$T/remote.git" gc -q
compacted=$(kib "$T/remote.git")
tree_files=$(git -C "$T/remote.git" ls-tree -r --name-only main | wc -l)

printf '{"push_10k_chunks_1k_versions_ms":%d,"pull_same_ms":%d,"noop_sync_ms":%d,"remote_kib_before":%d,"remote_kib_after_first":%d,"remote_kib_growth_per_1000_writes_after_gc":%d,"remote_kib_after_compact":%d,"tree_files_after_compact":%d}\n' \
  $((t1 - t0)) $((t2 - t1)) $best $git_before $git_after $((after - before)) $compacted $tree_files
