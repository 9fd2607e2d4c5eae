#!/usr/bin/env bash
# Builds grantguard in release mode and installs the binary into $PREFIX/bin
# (default ~/.local/bin). Safe to run again: it replaces the binary in place.
#
# git starts the binary six times per `git commit` (the hook stubs' `#!` line
# names it), so the build favours start-up: where rustup can add the musl
# target, a static, non-PIE musl binary, which starts without a dynamic
# loader, without relocations and without glibc's start-up probes of the CPU
# (dozens of `cpuid` instructions, each a trap to the hypervisor in a VM).
# That start is cheaper than a shell's, which is what makes the hooks cost
# less than no-op shell hooks (docs/performance.md). The price: the binary's
# own code is not at a random address (the heap, stack and mappings still
# are). GRANTGUARD_BUILD=host builds an ordinary binary for the host instead;
# so does any machine where the musl target cannot be added (with a note).
#
# Prints the installed path on its last line.
set -euo pipefail
cd "$(dirname "$0")"
PREFIX="${PREFIX:-$HOME/.local}"

host=$(rustc -vV | sed -n 's/^host: //p')
musl=
case "$host" in
  x86_64-unknown-linux-gnu | aarch64-unknown-linux-gnu) musl=${host%-gnu}-musl ;;
esac
if [ "${GRANTGUARD_BUILD:-static}" = host ]; then
  musl=
elif [ -n "$musl" ] && ! rustup target list --installed 2>/dev/null | grep -qx "$musl"; then
  if ! rustup target add "$musl" >&2; then
    echo "note: cannot add the $musl target; building for $host (hooks start slower)" >&2
    musl=
  fi
fi

# cargo names the binary it built (wherever CARGO_TARGET_DIR or a config
# puts it): the `executable` of its artifact message.
build() {
  cargo build --release --locked --bin grantguard --message-format=json-render-diagnostics "$@" \
    | sed -n 's/^{"reason":"compiler-artifact".*"executable":"\([^"]*\)".*/\1/p' | tail -n 1
}
if [ -n "$musl" ]; then
  var=CARGO_TARGET_$(echo "$musl" | tr '[:lower:]-' '[:upper:]_')_RUSTFLAGS
  built=$(export "$var=-C relocation-model=static" && build --target "$musl")
else
  built=$(build)
fi
if [ -z "$built" ] || [ ! -x "$built" ]; then
  echo "error: cannot find the binary cargo built (got '$built')" >&2
  exit 1
fi
mkdir -p "$PREFIX/bin"
install -m 0755 "$built" "$PREFIX/bin/grantguard.new"
mv -f "$PREFIX/bin/grantguard.new" "$PREFIX/bin/grantguard"
case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "note: $PREFIX/bin is not on PATH; add it, e.g. export PATH=\"$PREFIX/bin:\$PATH\"" >&2 ;;
esac
echo "installed $PREFIX/bin/grantguard"
