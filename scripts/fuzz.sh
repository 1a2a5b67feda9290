#!/usr/bin/env bash
# Builds and runs the cargo-fuzz targets of fuzz/ one after the other, then prints per target the
# executions, coverage (cov and ft of libFuzzer's final line), wall time and crashes. Exits non-zero when any
# target crashed (its input is in fuzz/artifacts/TARGET/).
#
#   scripts/fuzz.sh [--seconds N] [--runs N] [TARGET...]
#
#   --seconds N   time per target (default 60)
#   --runs N      stop a target after N executions (default: no limit)
#   TARGET...     targets to run (default: all; `cargo +nightly fuzz list` in fuzz/ names them)
#
# The campaign of issue 11: scripts/fuzz.sh --seconds 600 --runs 1000000
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Seed corpora are written from
# ../shared/fixtures (or $REGOLITH_FIXTURES) into fuzz/corpus/TARGET before the first run; libFuzzer adds
# what it finds there. Build outputs go to $CARGO_TARGET_DIR (default ~/.cache/regolith-fuzz-target).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=60
runs=-1
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --seconds=*) seconds="${1#*=}"; shift ;;
        --runs) runs="$2"; shift 2 ;;
        --runs=*) runs="${1#*=}"; shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs a nightly toolchain and cargo-fuzz: rustup toolchain install nightly && cargo install cargo-fuzz" >&2
    exit 2
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/regolith-fuzz-target}"
export REGOLITH_FIXTURES="${REGOLITH_FIXTURES:-$root/../shared/fixtures}"
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')

cd fuzz
all=$(cargo +nightly fuzz list | grep -v '^fuzz-seed$')
if [ ${#targets[@]} -eq 0 ]; then
    read -r -a targets <<<"$(echo $all)"
fi
for t in "${targets[@]}"; do
    if ! grep -qx "$t" <<<"$all"; then
        echo "fuzz.sh: no target $t (targets: $(echo $all))" >&2
        exit 2
    fi
done

echo "== building the fuzz targets (nightly, cargo fuzz build)"
cargo +nightly fuzz build
echo "== seeding fuzz/corpus from $REGOLITH_FIXTURES"
"$CARGO_TARGET_DIR/$triple/release/fuzz-seed" corpus

mkdir -p logs
rows=()
crashed=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="logs/$t.log"
    echo "== $t: up to $seconds s$( [ "$runs" != -1 ] && echo " or $runs executions") (log: fuzz/$log)"
    started=$(date +%s%N)
    set +e
    extra=()
    # The download target runs a QUIC client and a fake peer in one process: connection state and tasks
    # outlive an input by design, which libFuzzer's per-input leak check would report as leaks.
    [ "$t" = chunked_download ] && extra=(-detect_leaks=0)
    cargo +nightly fuzz run "$t" "corpus/$t" -- \
        -max_total_time="$seconds" -runs="$runs" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1
    status=$?
    set -e
    wall_ms=$(( ($(date +%s%N) - started) / 1000000 ))
    wall="$((wall_ms / 1000)).$(( (wall_ms % 1000) / 100 ))"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    final=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$final")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$final")
    crashes=0
    if [ "$status" -ne 0 ]; then
        crashes=1
        crashed=1
        grep -E 'Test unit written to|panicked at|ERROR: libFuzzer|SUMMARY' "$log" | head -5 || true
    fi
    [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$final")
    rows+=("$(printf '%-18s %12s %8s %8s %9.1f %8s' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$wall" "$crashes")")
done

echo
printf '%-18s %12s %8s %8s %9s %8s\n' target executions cov ft "wall (s)" crashes
for r in "${rows[@]}"; do echo "$r"; done
if [ "$crashed" -ne 0 ]; then
    echo "fuzz.sh: a target crashed; inputs in fuzz/artifacts/" >&2
    exit 1
fi
