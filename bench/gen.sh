#!/usr/bin/env bash
# Generates a synthetic git repository for the benchmarks, deterministic from a
# seed: the same kind, seed and git version give the same commit ids.
#
#   bench/gen.sh KIND DIR [SEED]
#
# KIND     tracked files   directories   commits   ignored files in target/
# tiny                 8             2         3        10
# small               20             4         5        50
# large          100,000         2,000        50    50,000
# deep               200            20    10,000         0
#
# Every kind has a `docs/` directory (the benchmarks grant `docs/`) and a
# `.gitignore` with `target/`. The history is written with `git fast-import`
# (setup, not the measured product), checked out, and the index refreshed with
# file times in the past, so that no entry is "racily clean" and every reader
# sees a settled checkout.
#
# Paths: files are spread over `pkgNN/modNN/` (about 50 per directory);
# commit 1 adds them all, every later commit rewrites a seed-dependent handful.
set -euo pipefail

usage() { echo "usage: $0 tiny|small|large|deep DIR [SEED]" >&2; exit 2; }
[ $# -ge 2 ] || usage
kind=$1 dir=$2 seed=${3:-7}

case $kind in
  tiny)  files=8      dirs=2    commits=3     touched=2  ignored=10 ;;
  small) files=20     dirs=4    commits=5     touched=3  ignored=50 ;;
  large) files=100000 dirs=2000 commits=50    touched=20 ignored=50000 ;;
  deep)  files=200    dirs=20   commits=10000 touched=1  ignored=0 ;;
  *) usage ;;
esac

export LC_ALL=C
mkdir -p "$dir"
git init -q -b main "$dir"
cd "$dir"
git config user.name "Bench"
git config user.email "bench@example.invalid"

# The stream. Arithmetic stays far below 2^53, so mawk and gawk agree.
awk -v files="$files" -v dirs="$dirs" -v commits="$commits" -v touched="$touched" \
    -v seed="$seed" '
function path(i,   d) {
  d = i % dirs
  return sprintf("pkg%02d/mod%02d/f%06d.txt", int(d / 50), d % 50, i)
}
function blob(p, text) {
  printf "M 100644 inline %s\ndata %d\n%s\n", p, length(text), text
}
BEGIN {
  for (c = 1; c <= commits; c++) {
    msg = sprintf("commit %d of %d (seed %d)", c, commits, seed)
    printf "commit refs/heads/main\nmark :%d\n", c
    printf "author Bench <bench@example.invalid> %d +0000\n", 1700000000 + c * 60
    printf "committer Bench <bench@example.invalid> %d +0000\n", 1700000000 + c * 60
    printf "data %d\n%s\n", length(msg), msg
    if (c > 1) printf "from :%d\n", c - 1
    if (c == 1) {
      blob(".gitignore", "target/\n")
      blob("docs/guide.md", sprintf("# guide (seed %d)\n", seed))
      blob("README.md", "bench repository\n")
      for (i = 0; i < files; i++) blob(path(i), sprintf("file %d seed %d\n", i, seed))
    } else {
      for (j = 0; j < touched; j++) {
        i = (seed * 7919 + c * 104729 + j * 15485863) % files
        blob(path(i), sprintf("file %d seed %d rev %d\n", i, seed, c))
      }
    }
    print ""
  }
}' | git fast-import --quiet

git reset -q --hard main

# Ignored build output: never tracked, never to be descended by a status.
if [ "$ignored" -gt 0 ]; then
  awk -v n="$ignored" 'BEGIN { for (d = 0; d < (n + 499) / 500; d++) printf "target/debug/deps/d%03d\n", d }' \
    | xargs mkdir -p
  awk -v n="$ignored" 'BEGIN {
    for (i = 0; i < n; i++) {
      p = sprintf("target/debug/deps/d%03d/o%06d.o", int(i / 500), i)
      print "object " i > p
      close(p)
    }
  }'
fi

# Settle the index: file times in the past, then one refresh that records them.
git ls-files -z | xargs -0 touch -d @1700000000
git update-index -q --refresh
