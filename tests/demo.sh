#!/usr/bin/env bash
# The main job on a bundled example: install what is missing, build weft,
# record a multithreaded producer/consumer on all cores, replay it on one,
# then debug the recording in gdb, forwards and backwards.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/install-deps.sh
cargo build --release -q
out=$(mktemp -d)
cc -O1 -g -pthread -o "$out/prodcons" tests/c/prodcons.c
echo "== weft record: 2 producers, 2 consumers, on all cores"
target/release/weft record -o "$out/trace" -- "$out/prodcons"
echo "== weft replay -a: the same run, on one core, validated against the log"
target/release/weft replay -a "$out/trace"
echo "== weft replay -- GDB_ARGS: gdb on the same run; a watchpoint, then back to the write before"
target/release/weft replay "$out/trace" -- -batch -nx \
  -ex 'break consumer' -ex 'continue' -ex 'watch count' -ex 'continue' -ex 'continue' \
  -ex 'reverse-continue' -ex 'monitor when' 2>&1 | grep -v '^warning:'
