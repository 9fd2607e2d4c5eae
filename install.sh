#!/usr/bin/env bash
# Builds grantguard in release mode and installs the binary into $PREFIX/bin
# (default ~/.local/bin). Safe to run again: it replaces the binary in place.
set -euo pipefail
cd "$(dirname "$0")"
PREFIX="${PREFIX:-$HOME/.local}"
cargo build --release --locked --bin grantguard
mkdir -p "$PREFIX/bin"
install -m 0755 target/release/grantguard "$PREFIX/bin/grantguard.new"
mv -f "$PREFIX/bin/grantguard.new" "$PREFIX/bin/grantguard"
echo "installed $PREFIX/bin/grantguard"
case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "note: $PREFIX/bin is not on PATH; add it, e.g. export PATH=\"$PREFIX/bin:\$PATH\"" ;;
esac
