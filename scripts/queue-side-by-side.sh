#!/usr/bin/env bash
# `regolith bench queue` with two builds, side by side and alternating; prints the throughput figures (msg/s)
# of each run, one line per run.
#
#   scripts/queue-side-by-side.sh OLD_REGOLITH NEW_REGOLITH [RUNS] [CASES]
set -euo pipefail

old=$1
new=$2
runs=${3:-5}
cases=${4:-iteration}

for _ in $(seq 1 "$runs"); do
  for bin in "$old" "$new"; do
    "$bin" bench queue --cases "$cases" --json 2>/dev/null | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["unit"] == "msg/s"]
print(sys.argv[1], "; ".join("%s: %.0f" % (r["metric"], r["value"]) for r in rows))
' "$bin"
  done
done
