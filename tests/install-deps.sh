# Sourced by tests/demo.sh and .ci/run: installs what a fresh Debian
# machine lacks to build weft and run its tests (root, for apt-get), and a
# Rust toolchain through rustup when there is no cargo (Debian's own is too
# old for the workspace's rust-version).
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# g++ for tests/cpp (tests/inprocess.rs); gdb and lldb-22 for tests/debugger.rs: lldb-22 comes from Debian 12's
# security suite (bookworm-security, in a fresh install's sources).
apt-get install -y -qq gcc g++ libc6-dev pbzip2 xz-utils coreutils curl ca-certificates gdb lldb-22 >/dev/null
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null; then
  curl -sSf https://sh.rustup.rs | sh -s -- -y -q --profile minimal
  export PATH="$HOME/.cargo/bin:$PATH"
fi
