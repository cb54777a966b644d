#!/usr/bin/env bash
# Record overhead and replay time as ratios to native, median of RUNS runs,
# for pbzip2 -p2 and xz -T2 on a SIZE_MB input (defaults: 5 runs, 64 MB).
# Replay is timed under the schedule that one exploration of the last trace
# found (at most ATTEMPTS replays, default 50), with --no-explore;
# ATTEMPTS=0 skips replay.
# Usage: bench/record_overhead.sh [RUNS] [SIZE_MB] [PROGRAMS]  (PROGRAMS: "pbzip2 xz")
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
size=${2:-64}
programs=${3:-pbzip2 xz}
attempts=${ATTEMPTS:-50}
command -v pbzip2 >/dev/null && command -v bc >/dev/null && command -v python3 >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq pbzip2 bc python3 >/dev/null; }
cargo build --release -q
weft=$PWD/target/release/weft
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Compressible but not trivial input (bench/text_input.py).
python3 bench/text_input.py "$work/input" "$size"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seconds() { local t0=$EPOCHREALTIME; "$@" >/dev/null 2>&1 || true; echo "$EPOCHREALTIME - $t0" | bc -l; }
bench() {
  local name=$1; shift
  local native=() record=() replay=()
  for i in $(seq "$runs"); do
    native+=("$(seconds "$@" "$work/input")")
    rm -rf "$work/trace"
    record+=("$(seconds "$weft" record -o "$work/trace" -- "$@" "$work/input")")
  done
  local found n r p
  n=$(printf '%s\n' "${native[@]}" | median)
  r=$(printf '%s\n' "${record[@]}" | median)
  printf '%-14s native %6.2fs  record %6.2fs (x%.3f)  ' "$name" "$n" "$r" "$(echo "$r / $n" | bc -l)"
  if (( attempts == 0 )); then
    echo "replay not measured (ATTEMPTS=0)"
    return
  fi
  # The last trace: explore once (seed 000 §4) if the log order fails,
  # then time replays under the schedule found (saved in the trace).
  found=$("$weft" replay -a --max-attempts "$attempts" "$work/trace" 2>&1 >/dev/null \
    | grep -E '^weft: (replay valid|replay failed:|schedule .* found)' \
    | sed -E 's/^weft: //; s/^schedule .* found in ([0-9]+ replays) \(([0-9]+ resumed).*/schedule found in \1, \2/' \
    | cut -c1-100 | paste -sd';' || true)
  if [[ $found != *"replay valid"* ]]; then
    echo "replay invalid [$found]"
    return
  fi
  for i in $(seq "$runs"); do
    replay+=("$(seconds "$weft" replay -a --no-explore "$work/trace")")
  done
  p=$(printf '%s\n' "${replay[@]}" | median)
  printf 'replay %6.2fs (x%.2f)  [%s]\n' "$p" "$(echo "$p / $n" | bc -l)" "$found"
}
echo "input: ${size} MB, ${runs} runs each, median; $(nproc) cores"
for p in $programs; do
  case $p in
    pbzip2) bench "pbzip2 -p2" pbzip2 -p2 -c ;;
    xz) bench "xz -T2" xz -T2 -c ;;
  esac
done
