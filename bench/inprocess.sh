#!/usr/bin/env bash
# In-process recording (issue 12, seed 003), medians of RUNS interleaved
# runs (default 5):
# - record/native for bench/c/syscall_heavy.c (two threads x 200,000 rounds
#   of clock_gettime + stat, open/read/close every 64th), with the runtime
#   and with `record --no-inprocess` (ptrace alone), and its trace's bytes
#   per event (the events file over the events `weft record` reports);
# - record/native for pbzip2 -p2 and xz -T2 on SIZE_MB of text (default 64);
# - pbzip2's replay: for each recording, the exploration replays its search
#   needed (0: valid in log order; at most ATTEMPTS replays, default 50),
#   then replay/native, the replay timed with --no-explore under the
#   schedule found.
# Usage: bench/inprocess.sh [RUNS] [SIZE_MB]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
size=${2:-64}
attempts=${ATTEMPTS:-50}
command -v pbzip2 >/dev/null && command -v xz >/dev/null && command -v bc >/dev/null && command -v python3 >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq pbzip2 xz-utils bc python3 >/dev/null; }
cargo build --release -q
weft=$PWD/target/release/weft
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_DATA_HOME=$work/xdg
cc -O2 -pthread -o "$work/syscall_heavy" bench/c/syscall_heavy.c
# Compressible but not trivial input (bench/text_input.py).
python3 bench/text_input.py "$work/input" "$size"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Wall-clock seconds of a command; its stderr is kept in $work/stderr, and
# a failure is reported (the figure would be meaningless).
seconds() {
  local t0=$EPOCHREALTIME
  "$@" >/dev/null 2>"$work/stderr" || echo "FAILED ($?): $* -- $(tail -3 "$work/stderr")" >&2
  echo "$EPOCHREALTIME - $t0" | bc -l
}
ratio() { printf 'x%.3f' "$(echo "$1 / $2" | bc -l)"; }

# bench NAME PTRACE_TOO CMD...: native, record (traces kept in
# $work/NAME-I), and with PTRACE_TOO=yes `record --no-inprocess`, interleaved.
bench() {
  local name=$1 ptrace_too=$2; shift 2
  local native=() record=() ptrace=() n r p line
  for i in $(seq "$runs"); do
    native+=("$(seconds "$@")")
    rm -rf "$work/$name-$i"
    record+=("$(seconds "$weft" record -o "$work/$name-$i" -- "$@")")
    grep -o 'recorded [0-9]* events' "$work/stderr" | tr -dc 0-9 >"$work/$name-$i.events"
    if [[ $ptrace_too == yes ]]; then
      rm -rf "$work/ptrace"
      ptrace+=("$(seconds "$weft" record --no-inprocess -o "$work/ptrace" -- "$@")")
      grep -o 'recorded [0-9]* events' "$work/stderr" | tr -dc 0-9 >"$work/$name-ptrace.events"
      cp "$work/ptrace/events" "$work/$name-ptrace.bytes" 2>/dev/null || true
    fi
  done
  n=$(printf '%s\n' "${native[@]}" | median)
  r=$(printf '%s\n' "${record[@]}" | median)
  line=$(printf '%-16s native %7.3fs  record %7.3fs (%s)' "$name" "$n" "$r" "$(ratio "$r" "$n")")
  if [[ $ptrace_too == yes ]]; then
    p=$(printf '%s\n' "${ptrace[@]}" | median)
    line+=$(printf '  record --no-inprocess %7.3fs (%s)' "$p" "$(ratio "$p" "$n")")
  fi
  echo "$line"
  echo "$n" >"$work/$name.native"
}

# bytes_per_event NAME LABEL EVENTS_FILE COUNT_FILE
bytes_per_event() {
  local bytes events
  bytes=$(stat -c %s "$3")
  events=$(cat "$4")
  printf '  %-30s %9d events, events file %10d bytes: %.1f bytes/event\n' "$2" "$events" "$bytes" "$(echo "$bytes / $events" | bc -l)"
}

# replay_bench NAME: the search for each recording of NAME, then its replay
# timed under the schedule found.
replay_bench() {
  local name=$1 explorations=() replay=() out found p
  for i in $(seq "$runs"); do
    out=$("$weft" replay -a --max-attempts "$attempts" "$work/$name-$i" 2>&1 >/dev/null || true)
    found=$(grep -oE 'found in [0-9]+ replays' <<<"$out" | tr -dc 0-9 || true)
    if [[ -z $found ]] || ! grep -q 'replay valid' <<<"$out"; then
      explorations+=("none-found")
      echo "  $name-$i: $(grep -E '^weft: (replay failed|no schedule)' <<<"$out" | cut -c1-160 | paste -sd';')" >&2
      continue
    fi
    explorations+=("$((found - 1))")
    replay+=("$(seconds "$weft" replay -a --no-explore "$work/$name-$i")")
  done
  printf '%-16s exploration replays per recording: %s' "$name" "${explorations[*]}"
  if (( ${#replay[@]} > 0 )); then
    p=$(printf '%s\n' "${replay[@]}" | median)
    printf '  replay %7.3fs (%s of native, median of %d)' "$p" "$(ratio "$p" "$(cat "$work/$name.native")")" "${#replay[@]}"
  fi
  echo
}

echo "$(nproc) cores; $runs runs each, interleaved, medians; input ${size} MB"
bench syscall_heavy yes "$work/syscall_heavy"
bytes_per_event syscall_heavy "record" "$work/syscall_heavy-$runs/events" "$work/syscall_heavy-$runs.events"
bytes_per_event syscall_heavy "record --no-inprocess" "$work/syscall_heavy-ptrace.bytes" "$work/syscall_heavy-ptrace.events"
bench pbzip2-p2 no pbzip2 -p2 -c "$work/input"
bench xz-T2 no xz -T2 -c "$work/input"
rm -rf "$work"/xz-T2-* "$work"/syscall_heavy-*
replay_bench pbzip2-p2
