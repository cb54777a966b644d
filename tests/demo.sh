#!/usr/bin/env bash
# The main job on a bundled example: install what is missing, build weft,
# record a multithreaded producer/consumer on all cores, replay it on one.
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
