#!/bin/sh
# Sync figures over HTTP: one replica served by `memdir serve --transport http`, another that
# syncs with it. 10,000 new chunks (100 sessions) and 1,000 category versions (100 categories)
# pushed from the client, the same pulled by a fresh replica, and a no-op sync.
#
#   cargo build --release --bin memdir && bench/sync_http.sh [path/to/memdir]
#
# Prints one JSON object. Everything happens in a fresh temporary directory; the server
# listens on a free loopback port and is stopped at the end.
set -eu
BIN=${1:-target/release/memdir}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$T"' EXIT
export HOME="$T/home" MEMDIR_CONFIG="$T/home/config.toml"
mkdir -p "$HOME" && : >"$MEMDIR_CONFIG"
export SYNC_TOKEN=bench-token-0123456789abcdef0123456789abcdef
A="$T/a" B="$T/b" C="$T/c"
ms() { date +%s%3N; }

"$BIN" --dir "$B" init >/dev/null
"$BIN" --dir "$B" serve --transport http --port 0 --token "$SYNC_TOKEN" 2>"$T/serve.err" &
PID=$!
URL=
for _ in $(seq 1 100); do
  URL=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$T/serve.err")
  [ -n "$URL" ] && break
  sleep 0.1
done
[ -n "$URL" ] || { cat "$T/serve.err" >&2; exit 1; }
sync() { "$BIN" --dir "$1" sync --remote "$URL" --token-env SYNC_TOKEN >/dev/null; }

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

t0=$(ms); sync "$A"; t1=$(ms)
sync "$C"; t2=$(ms)
# A no-op sync: nothing changed on either side (best of five).
best=999999
for _ in 1 2 3 4 5; do
  s=$(ms); sync "$A"; e=$(ms)
  [ $((e - s)) -lt $best ] && best=$((e - s))
done
same=$(diff -r "$A/history" "$C/history" >/dev/null && diff -r "$A/sessions" "$C/sessions" >/dev/null && echo true || echo false)

printf '{"push_10k_chunks_1k_versions_ms":%d,"pull_same_into_fresh_replica_ms":%d,"noop_sync_ms":%d,"identical":%s}\n' \
  $((t1 - t0)) $((t2 - t1)) $best "$same"
