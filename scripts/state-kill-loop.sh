#!/usr/bin/env bash
# SIGKILL loop with state apply: a node takes a generated chain in again and again, each time killed
# (SIGKILL) at a random moment and restarted, until the chain is in; after every kill `inspect state --check`
# must be clean (or say that an interrupted state import is open, which the next start finishes), and at the
# end of each round the stored states must be those of an uninterrupted import. Rounds (a fresh data dir
# each) go on until KILLS kills were made.
#
#   scripts/state-kill-loop.sh [KILLS] [MC_BLOCKS] [MODE]   # defaults: 200 kills, 600 mc blocks, import
#
# MODE `import`: `regolith import` of the chain's archives is killed; at the end of a round the stored states
# (roots, cells) equal the uninterrupted import's. MODE `sync`: the uninterrupted import's node serves the
# chain (`regolith run`), and a fresh node (boot from genesis) syncs it over QUIC with `regolith run`, killed
# and restarted until it reaches the tip; at the end of a round its checkpoint's states have the roots of
# the serving node's and every count is exact.
#
# Uses the release binary (built if missing: cargo build --release -p regolith-cli). Prints one line per
# round and a summary; exits non-zero at the first damaged or different state.
set -euo pipefail
cd "$(dirname "$0")/.."

kills_wanted=${1:-200}
mc_blocks=${2:-600}
mode=${3:-import}
case "$mode" in import|sync) ;; *) echo "MODE is import or sync, not $mode" >&2; exit 2 ;; esac
bin=${REGOLITH:-${CARGO_TARGET_DIR:-target}/release/regolith}
if [ ! -x "$bin" ]; then
  cargo build --release -p regolith-cli >&2
fi
work=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT

"$bin" --data "$work/unused" chain generate --out "$work/chain" \
  --base-zerostate ../shared/fixtures/zerostate.boc --mc-blocks "$mc_blocks" --key-block-every 20 \
  --rotate-every 2 --persistent-every 2 --accounts 300 --seed 7 >/dev/null
archives=("$work"/chain/archives/*)

states_of() {
  # The stored states and their cells, without the checkpoint's timing.
  "$bin" --data "$1" inspect --json state --check
}

# The checkpoint and the newest stored state of each chain (the checkpoint's mc state and top shard states).
checkpoint_roots() {
  "$bin" --data "$1" inspect --json state --check | python3 -c '
import json, sys
v = json.load(sys.stdin)
print("checkpoint", v["checkpoint"])
newest = {}
for s in v["states"]:
    wc, shard, seqno = s["block"].split(":")[:3]
    if int(seqno) >= newest.get((wc, shard), (-1, ""))[0]:
        newest[(wc, shard)] = (int(seqno), s["block"] + " " + s["root"])
for _, line in sorted(newest.values()):
    print(line)'
}

# A free port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# init with its own QUIC and metrics ports, one-second discovery periods (as `regolith devnet` writes them),
# and, for a syncing node, the serving node as its bootstrap peer and a boot from genesis.
init_node() {
  local data=$1 peer=${2:-} metrics=${3:-off}
  [ "$metrics" != off ] && metrics="127.0.0.1:$metrics"
  "$bin" --data "$data" init --zerostate "$work/chain/zerostate.boc" --listen "127.0.0.1:$(free_port)" \
    --metrics "$metrics" >/dev/null
  python3 - "$data" "$peer" <<'PY'
import json, sys
data, peer = sys.argv[1], sys.argv[2]
path = f"{data}/node.json"
config = json.load(open(path))
for key in ["public_overlay_peer_store", "public_overlay_peer_exchange", "public_overlay_peer_collect",
            "public_overlay_peer_discovery"]:
    config["overlay"][f"{key}_period"] = "1s"
    config["overlay"][f"{key}_max_jitter"] = "1s"
for key in ["local_info_announce_period", "routing_table_refresh_period"]:
    config["dht"][key] = "1s"
    config["dht"][f"{key}_max_jitter"] = "1s"
if peer:
    config["boot"] = {"type": "genesis"}
    ours = json.load(open(f"{data}/global.json"))
    ours["bootstrap_peers"].append(json.load(open(f"{peer}/global.json"))["bootstrap_peers"][0])
    json.dump(ours, open(f"{data}/global.json", "w"))
json.dump(config, open(path, "w"), indent=2)
PY
}

# After a kill: the counts are exact, or an interrupted state import is open (the next start finishes it).
check_after_kill() {
  local check
  if ! check=$("$bin" --data "$1" inspect --json state --check 2>&1); then
    if echo "$check" | grep -q "a state import is open"; then
      open_imports=$((open_imports + 1))
      return 0
    fi
    echo "round $round, kill $round_kills: the check failed" >&2
    echo "$check" >&2
    exit 1
  fi
}
open_imports=0

init_node "$work/reference"
"$bin" --data "$work/reference" import --quiet "${archives[@]}" >/dev/null 2>&1
reference=$(states_of "$work/reference")
echo "reference: $(echo "$reference" | grep -c '"block"') states stored" >&2
if [ "$mode" = sync ]; then
  reference_roots=$(checkpoint_roots "$work/reference")
  "$bin" --data "$work/reference" run >/dev/null 2>"$work/server.log" &
  server_pid=$!
fi

kills=0
round=0
sync_round() {
  local metrics height
  metrics=$(free_port)
  init_node "$data" "$work/reference" "$metrics"
  while true; do
    "$bin" --data "$data" run >/dev/null 2>"$work/stderr" &
    pid=$!
    # A kill 0.1 to 3 s after the start: in the restore, the discovery, a download or an apply.
    sleep "$((RANDOM % 3)).$(printf '%03d' $((100 + RANDOM % 900)))"
    height=$(curl -s "127.0.0.1:$metrics/metrics" | awk '$1 == "regolith_sync_last_applied_mc_seqno" {print $2}')
    if ! kill -9 "$pid" 2>/dev/null; then
      echo "round $round: the node exited" >&2
      cat "$work/stderr" >&2
      exit 1
    fi
    wait "$pid" 2>/dev/null || true
    kills=$((kills + 1))
    round_kills=$((round_kills + 1))
    check_after_kill "$data"
    if [ "${height:-0}" = "$mc_blocks" ]; then
      break
    fi
  done
  if [ "$(checkpoint_roots "$data")" != "$reference_roots" ]; then
    echo "round $round: the checkpoint's states differ from the serving node's" >&2
    diff <(echo "$reference_roots") <(checkpoint_roots "$data") >&2 || true
    exit 1
  fi
  echo "round $round: $round_kills kills while syncing, then the serving node's states at the tip" >&2
}

while [ "$kills" -lt "$kills_wanted" ]; do
  round=$((round + 1))
  data="$work/round-$round"
  round_kills=0
  if [ "$mode" = sync ]; then
    sync_round
    continue
  fi
  "$bin" --data "$data" init --zerostate "$work/chain/zerostate.boc" >/dev/null
  while true; do
    "$bin" --data "$data" import --quiet "${archives[@]}" >/dev/null 2>"$work/stderr" &
    pid=$!
    # A kill between 20 and 400 ms after the start: early ones land in the restore, later ones anywhere.
    sleep "0.$(printf '%03d' $((20 + RANDOM % 380)))"
    if kill -9 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      kills=$((kills + 1))
      round_kills=$((round_kills + 1))
      check_after_kill "$data"
    else
      if ! wait "$pid"; then
        echo "round $round: the import failed" >&2
        cat "$work/stderr" >&2
        exit 1
      fi
      break
    fi
  done
  if [ "$(states_of "$data")" != "$reference" ]; then
    echo "round $round: the stored states differ from the uninterrupted import's" >&2
    diff <(echo "$reference") <(states_of "$data") >&2 || true
    exit 1
  fi
  echo "round $round: $round_kills kills, then the same states as the uninterrupted import" >&2
done
echo "state-kill-loop ($mode): $kills kills in $round rounds ($open_imports left a state import open); every check clean, every round ended with the reference states"
