#!/usr/bin/env bash
# `regolith import` of the fixture chain with two builds, side by side and alternating, a fresh data dir each
# run; prints wall time and blocks/s of the whole command and of the import itself, then the synced writes
# (fsync + fdatasync + sync_file_range, counted by strace) of one more run of each.
#
#   scripts/import-side-by-side.sh OLD_REGOLITH NEW_REGOLITH [RUNS] [FIXTURES]
set -euo pipefail

old=$1
new=$2
runs=${3:-3}
fixtures=${4:-../shared/fixtures}
blocks=107 # archive_1: mc 1..100 and 7 shard blocks
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fresh() { # BIN DIR
  "$1" --data "$2" init --zerostate "$fixtures/zerostate.boc" >/dev/null
  sync
}

for i in $(seq 1 "$runs"); do
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    data="$work/$which-$i"
    fresh "$bin" "$data"
    started=$(date +%s%N)
    out=$(RUST_LOG=warn "$bin" --data "$data" import "$fixtures/archive_1.bin")
    wall_ms=$((($(date +%s%N) - started) / 1000000))
    import_ms=$(grep -oE 'in [0-9]+ ms' <<<"$out" | grep -oE '[0-9]+')
    echo "$which run $i: wall $wall_ms ms ($((blocks * 1000 / wall_ms)) blocks/s)," \
      "import $import_ms ms ($((blocks * 1000 / (import_ms > 0 ? import_ms : 1))) blocks/s)"
    rm -rf "$data"
  done
done

if command -v strace >/dev/null; then
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    data="$work/$which-strace"
    fresh "$bin" "$data"
    strace -f -c -e trace=fsync,fdatasync,sync_file_range -o "$work/strace" \
      "$bin" --data "$data" import --quiet "$fixtures/archive_1.bin" >/dev/null 2>&1
    n=$(awk '$NF ~ /^(fsync|fdatasync|sync_file_range)$/ {s += $4} END {print s + 0}' "$work/strace")
    echo "$which: $n synced writes ($(awk -v n="$n" -v b="$blocks" 'BEGIN {printf "%.2f", n / b}') per block)"
  done
fi
