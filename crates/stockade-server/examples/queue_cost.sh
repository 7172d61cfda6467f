#!/usr/bin/env bash
# Requests/s of a waiting-room join and a ticket poll next to a bare axum
# handler, three rounds each (wrk, 2 threads, 64 connections, 10 s).
#   crates/stockade-server/examples/queue_cost.sh [redis://...]
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo build --release -q -p stockade-server --example queue_cost
out=$(mktemp)
"${CARGO_TARGET_DIR:-target}/release/examples/queue_cost" "$@" >"$out" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q TICKET "$out" && break; sleep 0.1; done
eval "$(cat "$out")"
lua="crates/stockade-server/examples/queue_join.lua"
# Requests/s, and the count of non-2xx answers if any (a run with any is void).
rate() { wrk -t2 -c64 -d10s "$@" | awk '/Non-2xx/ {bad=" (" $NF " non-2xx)"} /Requests\/sec/ {r=$2} END {print r bad}'; }
for round in 1 2 3; do
  echo "round $round: bare join $(rate -s "$lua" "$BARE") | join $(rate -s "$lua" "$STOCKADE") | bare poll $(rate "$BARE/v1/queue/$TICKET") | poll $(rate "$STOCKADE/v1/queue/$TICKET")"
done
