#!/usr/bin/env bash
# Installs the real tools the compatibility suite (tests/compat.rs) runs, so
# that grantguard is tested against the programs agents actually use rather
# than imitations of them:
#
#   git-lfs                               Debian package (apt-get)
#   sshd (openssh-server)                 Debian package, for the publication
#                                         suite's ssh transport; where it cannot
#                                         be installed (no root, no apt-get)
#                                         that one test says so and skips
#   pre-commit, pygit2, dulwich, GitPython  PyPI, into a virtualenv
#   husky, lefthook, isomorphic-git       npm, into a local prefix
#
# Everything lands in target/compat/ (gitignored; GRANTGUARD_COMPAT_DIR
# overrides), with a bin/ directory the tests put first on PATH. Versions
# are pinned with every dependency (requirements.txt, package-lock.json) so
# CI is reproducible. Idempotent: a second run checks and reuses what is
# there. A tool that cannot be installed fails the script loudly, naming
# the tool: the suite must never pass by skipping a tool silently.
set -euo pipefail
started=$SECONDS
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${GRANTGUARD_COMPAT_DIR:-$root/target/compat}"

fail() {
    echo "tests/compat/setup.sh: cannot install $1: $2" >&2
    echo "tests/compat/setup.sh: the compatibility suite needs it; fix the cause and run tests/compat/setup.sh again" >&2
    exit 1
}
need() { command -v "$1" >/dev/null 2>&1 || fail "$2" "'$1' is not on PATH (a prerequisite, see README.md)"; }

need python3 "the Python tools (pre-commit, pygit2, dulwich, GitPython)"
need node "the npm tools (husky, lefthook, isomorphic-git)"
need npm "the npm tools (husky, lefthook, isomorphic-git)"
need git "git-lfs"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || fail "pre-commit, pygit2" "python3 is $(python3 -V 2>&1); pre-commit 4.7 and pygit2 1.21 need 3.11 or newer"
[ "$(node -p 'process.versions.node.split(".")[0] >= 18')" = true ] \
    || fail husky "node is $(node --version); husky 9 needs Node.js 18 or newer"
mkdir -p "$dir/bin"

# git-lfs: Debian's package. apt-get update only when the install needs it.
if ! command -v git-lfs >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fail git-lfs "apt-get is not available; install git-lfs with the system's package manager"
    [ "$(id -u)" = 0 ] || fail git-lfs "apt-get install needs root; run 'apt-get install -y git-lfs' as root"
    echo "setup: installing git-lfs from Debian" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q git-lfs >/dev/null 2>&1; then
        apt-get update -q >/dev/null || fail git-lfs "apt-get update failed"
        apt-get install -y -q git-lfs >/dev/null || fail git-lfs "apt-get install -y git-lfs failed"
    fi
fi
ln -sfn "$(command -v git-lfs)" "$dir/bin/git-lfs"

# sshd for tests/publication.rs's ssh transport (best effort, see above).
if [ ! -x /usr/sbin/sshd ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing openssh-server from Debian" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q openssh-server >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q openssh-server >/dev/null; } \
        || echo "setup: openssh-server could not be installed; the ssh publication test will skip" >&2
fi

# Python tools: a virtualenv, reinstalled only when requirements.txt changed.
venv="$dir/venv"
if ! cmp -s "$here/requirements.txt" "$venv/.installed-requirements.txt"; then
    echo "setup: installing pre-commit, pygit2, dulwich, GitPython into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" || fail "pre-commit, pygit2, dulwich, GitPython" "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" >"$dir/pip-install.log" 2>&1 \
        || { cat "$dir/pip-install.log" >&2; fail "pre-commit, pygit2, dulwich, GitPython" "pip install -r tests/compat/requirements.txt failed (log above)"; }
    cp "$here/requirements.txt" "$venv/.installed-requirements.txt"
fi
# A wrapper, not a symlink: Python finds its venv from the path it was
# started by, so a link outside the venv would start the base interpreter.
rm -f "$dir/bin/compat-python"
printf '#!/bin/sh\nexec %q "$@"\n' "$venv/bin/python" >"$dir/bin/compat-python"
chmod +x "$dir/bin/compat-python"
ln -sfn "$venv/bin/pre-commit" "$dir/bin/pre-commit"

# npm tools: npm install from the lockfile into a local prefix (not npm ci:
# lefthook 2.2.2 lists an optional platform package, lefthook-android-arm64,
# that the registry does not have, and npm ci refuses the lockfile for it;
# npm install takes every locked version as it is). --ignore-scripts:
# lefthook's postinstall would otherwise install its hooks into whatever
# repository npm runs in (this one); its binary comes in a platform package
# and needs no script.
prefix="$dir/npm"
if ! cmp -s "$here/package-lock.json" "$prefix/.installed-package-lock.json" || [ ! -d "$prefix/node_modules" ]; then
    echo "setup: installing husky, lefthook, isomorphic-git into $prefix" >&2
    rm -rf "$prefix"
    mkdir -p "$prefix"
    cp "$here/package.json" "$here/package-lock.json" "$prefix/"
    npm install --prefix "$prefix" --ignore-scripts --no-audit --no-fund --no-save --loglevel=error >"$dir/npm-install.log" 2>&1 \
        || { cat "$dir/npm-install.log" >&2; fail "husky, lefthook, isomorphic-git" "npm install of tests/compat/package-lock.json failed (log above)"; }
    cp "$here/package-lock.json" "$prefix/.installed-package-lock.json"
fi
ln -sfn "$prefix/node_modules/.bin/husky" "$dir/bin/husky"
ln -sfn "$prefix/node_modules/.bin/lefthook" "$dir/bin/lefthook"
ln -sfn "$prefix/node_modules" "$dir/node_modules"

# Every tool must run, not merely be present.
check() {
    local tool=$1
    shift
    local out
    out=$("$@" 2>&1) || fail "$tool" "'$*' failed after installing: $out"
    printf '  %-15s %s\n' "$tool" "$(printf '%s' "$out" | head -n1)"
}
echo "setup: tools in $dir" >&2
{
    check git-lfs "$dir/bin/git-lfs" version
    check pre-commit "$dir/bin/pre-commit" --version
    check pygit2 "$dir/bin/compat-python" -c 'import pygit2; print("pygit2", pygit2.__version__, "libgit2", pygit2.LIBGIT2_VERSION)'
    check dulwich "$dir/bin/compat-python" -c 'import dulwich; print("dulwich", ".".join(map(str, dulwich.__version__)))'
    check GitPython "$dir/bin/compat-python" -c 'import git; print("GitPython", git.__version__)'
    check husky node -e 'console.log("husky", require(process.argv[1]).version)' "$prefix/node_modules/husky/package.json"
    check lefthook "$dir/bin/lefthook" version
    check isomorphic-git node -e 'console.log("isomorphic-git", require(process.argv[1]).version())' "$prefix/node_modules/isomorphic-git"
} >&2
echo "setup: compatibility tools ready in $((SECONDS - started)) s" >&2
