#!/usr/bin/env bash
# The network-fault scenarios of cli/tests/faults.rs, all of them (CI runs only the short ones), one after
# the other so that their times compare, in a release build; prints the sync time of each in a table.
# Needs root (network namespaces).
#
#   scripts/faults.sh [RUNS]      # RUNS rounds of every scenario (default 1)
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-1}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for i in $(seq 1 "$runs"); do
  echo "== round $i of $runs" >&2
  set +e
  cargo test --release -p regolith-cli --test faults -- --include-ignored --nocapture --test-threads=1 \
    2>&1 | tee -a "$log" | grep -E '^(faults:|test |test result)' >&2
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "faults.sh: the tests failed (exit $status); see the output above" >&2
    exit "$status"
  fi
done

echo
echo "| scenario | sync time (s), per round |"
echo "|---|---|"
for scenario in None Loss Latency KillServer Partition; do
  # The harness prints `test NAME ... ` before a test's own output, on the same line.
  times=$(sed -nE "s/.*faults: $scenario: the fresh node synced in ([0-9.]+) s$/\1/p" "$log" | paste -sd' ' -)
  echo "| $scenario | ${times:-not run} |"
done
