#!/usr/bin/env bash
# Process trees: record/native and replay/native, medians of RUNS
# interleaved runs (default 5), for `make -j2` building a small C project
# (five files) and for `sh -c` pipelines. Replays run with --no-explore
# (a process tree's log order replays as is, or the figure says invalid).
# Usage: bench/process.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
command -v make >/dev/null && command -v bc >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq make bc >/dev/null; }
cargo build --release -q
weft=$PWD/target/release/weft
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/project"
for n in a b c d; do
  printf 'int f_%s(int x) { int s = 0; for (int i = 0; i < x; i++) s += i; return s; }\n' "$n" > "$work/project/$n.c"
done
printf '#include <stdio.h>\nint f_a(int), f_b(int), f_c(int), f_d(int);\nint main(void) { printf("%%d\\n", f_a(1) + f_b(2) + f_c(3) + f_d(4)); return 0; }\n' > "$work/project/main.c"
printf 'OBJS = a.o b.o c.o d.o main.o\nprog: $(OBJS)\n\tcc -o $@ $(OBJS)\n%%.o: %%.c\n\tcc -O2 -c $< -o $@\n' > "$work/project/Makefile"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seconds() { local t0=$EPOCHREALTIME; "$@" >/dev/null 2>&1 || true; echo "$EPOCHREALTIME - $t0" | bc -l; }
bench() {
  local name=$1 setup=$2; shift 2
  local native=() record=() replay=() valid=yes
  for i in $(seq "$runs"); do
    eval "$setup"
    native+=("$(seconds "$@")")
    eval "$setup"
    rm -rf "$work/trace"
    record+=("$(seconds "$weft" record -o "$work/trace" -- "$@")")
    replay+=("$(seconds "$weft" replay -a --no-explore "$work/trace")")
    "$weft" replay -a --no-explore "$work/trace" 2>&1 >/dev/null | grep -q 'replay valid' || valid=no
  done
  local n r p
  n=$(printf '%s\n' "${native[@]}" | median)
  r=$(printf '%s\n' "${record[@]}" | median)
  p=$(printf '%s\n' "${replay[@]}" | median)
  printf '%-30s native %6.3fs  record %6.3fs (x%.2f)  replay %6.3fs (x%.2f)  valid: %s  %s processes\n' \
    "$name" "$n" "$r" "$(echo "$r / $n" | bc -l)" "$p" "$(echo "$p / $n" | bc -l)" "$valid" \
    "$("$weft" ps "$work/trace" | tail -n +2 | wc -l)"
}
bench "make -j2 (5 files)" "rm -f $work/project/*.o $work/project/prog" make -s -j2 -C "$work/project"
bench "sh -c 'ls /usr/bin | sort | wc -l'" ":" sh -c 'ls /usr/bin | sort | wc -l'
bench "sh -c 'seq 100000 | grep 7 | wc -l'" ":" sh -c 'seq 100000 | grep 7 | wc -l'
