#!/usr/bin/env bash
# Debugger latency on a recording of at least 100,000 events (issue 10's
# benchmark): time from `target remote` to the first stop; median and
# maximum of reverse-stepi, of reverse-continue to a watchpoint about
# 1,000 events back, and of `monitor epoch back`; memory held by the
# timeline's checkpoints. gdb's Python times each command, so the figures
# include gdb's own work, as a user sees them.
# Usage: bench/debugger.sh [ROUNDS] [REPEATS]  (defaults: 50000 rounds per
# thread, about 100,000 events; 10 repeats of each move)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-50000}
repeats=${2:-10}
command -v gdb >/dev/null && command -v python3 >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq gdb python3 >/dev/null; }
cargo build --release -q
weft=$PWD/target/release/weft
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cc -O0 -g -pthread -o "$work/events" bench/c/events.c
"$weft" record -o "$work/trace" -- "$work/events" "$rounds" >/dev/null
events=$("$weft" dump --json "$work/trace" | tail -n +2 | wc -l)
# Validate once (the search's first replay), so the server starts at once.
"$weft" replay -a "$work/trace" >/dev/null 2>&1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$weft" replay -s "$port" "$work/trace" 2>"$work/server.log" &
server=$!
until grep -q "serving" "$work/server.log"; do sleep 0.1; done
cat >"$work/bench.py" <<PY
import gdb, statistics, time
def timed(cmd):
    t = time.perf_counter()
    gdb.execute(cmd, to_string=True)
    return (time.perf_counter() - t) * 1000
def show(name, ms):
    print(f"bench: {name}: median {statistics.median(ms):.1f} ms, max {max(ms):.1f} ms ({len(ms)} runs)")
first = timed("target remote 127.0.0.1:$port")
print(f"bench: target remote to first stop: {first:.1f} ms")
gdb.execute("monitor goto $((events * 6 / 10))", to_string=True)
gdb.execute("watch marker", to_string=True)
gdb.execute("continue", to_string=True)
gdb.execute("continue", to_string=True)
timed("reverse-continue")  # stops at the write that made the current value
rc, rs = [], []
for _ in range($repeats):
    rc.append(timed("reverse-continue"))
    for _ in range(2):
        rs.append(timed("reverse-stepi"))
show("reverse-stepi", rs)
show("reverse-continue to a watchpoint ~1,000 events back", rc)
print("bench: at " + gdb.execute("monitor when", to_string=True).strip())
gdb.execute("delete", to_string=True)
eb = [timed("monitor epoch back") for _ in range($repeats)]
show("monitor epoch back", eb)
print("bench: " + gdb.execute("monitor checkpoints", to_string=True).splitlines()[0])
PY
echo "recording: $events events ($rounds rounds per thread)"
gdb -batch -nx -q -ex "set confirm off" -ex "set pagination off" -x "$work/bench.py" "$work/events" 2>&1 | sed -n 's/^bench: //p'
