#!/usr/bin/env bash
# The main job on a bundled example: install what is missing, build weft,
# record a multithreaded producer/consumer on all cores, replay it on one.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
if ! command -v cc >/dev/null || [ ! -e /usr/include/pthread.h ]; then
  apt-get update -qq && apt-get install -y -qq gcc libc6-dev >/dev/null
fi
command -v cargo >/dev/null || { echo "weft is built with cargo: install a Rust toolchain (https://rustup.rs)" >&2; exit 1; }
cargo build --release -q
out=$(mktemp -d)
cc -O1 -g -pthread -o "$out/prodcons" tests/c/prodcons.c
echo "== weft record: 2 producers, 2 consumers, on all cores"
target/release/weft record -o "$out/trace" -- "$out/prodcons"
echo "== weft replay -a: the same run, on one core, validated against the log"
target/release/weft replay -a "$out/trace"
