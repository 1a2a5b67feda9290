#!/usr/bin/env bash
# SIGKILL loop over an import with state apply: a generated chain is imported again and again, each import
# killed (SIGKILL) at a random moment and restarted, until the chain is in; after every kill
# `inspect state --check` must be clean, and at the end of each round the stored states (roots, cells) must be
# those of an uninterrupted import. Rounds (a fresh data dir each) go on until KILLS kills were made.
#
#   scripts/state-kill-loop.sh [KILLS] [MC_BLOCKS]      # defaults: 200 kills, a chain of 600 mc blocks
#
# Uses the release binary (built if missing: cargo build --release -p regolith-cli). Prints one line per
# round and a summary; exits non-zero at the first damaged or different state.
set -euo pipefail
cd "$(dirname "$0")/.."

kills_wanted=${1:-200}
mc_blocks=${2:-600}
bin=${REGOLITH:-${CARGO_TARGET_DIR:-target}/release/regolith}
if [ ! -x "$bin" ]; then
  cargo build --release -p regolith-cli >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bin" --data "$work/unused" chain generate --out "$work/chain" \
  --base-zerostate ../shared/fixtures/zerostate.boc --mc-blocks "$mc_blocks" --key-block-every 20 \
  --rotate-every 2 --persistent-every 2 --accounts 300 --seed 7 >/dev/null
archives=("$work"/chain/archives/*)

states_of() {
  # The stored states and their cells, without the checkpoint's timing.
  "$bin" --data "$1" inspect --json state --check
}

"$bin" --data "$work/reference" init --zerostate "$work/chain/zerostate.boc" >/dev/null
"$bin" --data "$work/reference" import --quiet "${archives[@]}" >/dev/null 2>&1
reference=$(states_of "$work/reference")
echo "reference: $(echo "$reference" | grep -c '"block"') states stored" >&2

kills=0
round=0
while [ "$kills" -lt "$kills_wanted" ]; do
  round=$((round + 1))
  data="$work/round-$round"
  "$bin" --data "$data" init --zerostate "$work/chain/zerostate.boc" >/dev/null
  round_kills=0
  while true; do
    "$bin" --data "$data" import --quiet "${archives[@]}" >/dev/null 2>"$work/stderr" &
    pid=$!
    # A kill between 20 and 400 ms after the start: early ones land in the restore, later ones anywhere.
    sleep "0.$(printf '%03d' $((20 + RANDOM % 380)))"
    if kill -9 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      kills=$((kills + 1))
      round_kills=$((round_kills + 1))
      if ! check=$("$bin" --data "$data" inspect --json state --check 2>&1); then
        echo "round $round, kill $round_kills: the check failed" >&2
        echo "$check" >&2
        exit 1
      fi
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
echo "state-kill-loop: $kills kills in $round rounds; every check clean, every round ended with the reference states"
