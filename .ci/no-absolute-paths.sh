#!/usr/bin/env bash
# Fails when a tracked file names an absolute path of the machine it was
# written on, so that the tests and docs work from a clone in any directory.
# (A test once named the compatibility tools' Python by one checkout's
# absolute path; CI passed only because that path existed there.)
#
# Flagged, as the start of a path (after a blank, a quote, `=`, `(`, `[`,
# `,`, `:`, `;`, `|` or `file://`, or at the start of a line):
#   - this checkout's own location and every worktree of its repository,
#     and $HOME, as found where the check runs;
#   - the places checkouts and homes live on any machine: /work/...,
#     /root, /home/<user>/..., /Users/<user>/...
# Not flagged: the product's own absolute paths (/proc, /dev/null, /usr/bin,
# /tmp, /nonexistent, /run, /sys, /etc, ...), nor paths built from a
# variable (`$ws/work/upper`, `/proc/<pid>/root`). A legitimate exception
# goes into .ci/absolute-paths.allow as `FILE<TAB>PATH-PREFIX`, with a reason.
#
# This script and its allow file, which name such paths, are not read. Tracked
# symlinks are checked by their target too. Exit 0: clean; 1: each
# finding printed as FILE:LINE: PATH.
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"

escape() { printf '%s' "$1" | sed 's/[][\.*^$+?(){}|/]/\\&/g'; }

alternatives=('/work' '/root' '/home/[^/[:space:]"`'"'"']+' '/Users/[^/[:space:]"`'"'"']+')
add_machine_path() {
    case ${1%/} in
        # Not of this machine: the system's own directories (a HOME of
        # /nonexistent in a container, a checkout at the root).
        '' | /tmp | /var/tmp | /nonexistent | /proc | /dev | /usr | /run | /sys | /etc \
            | /var | /opt | /srv | /mnt | /bin | /sbin | /lib) ;;
        /*) alternatives+=("$(escape "${1%/}")") ;;
    esac
}
add_machine_path "$(pwd -P)"
add_machine_path "$(pwd)"
while IFS= read -r wt; do add_machine_path "$wt"; done \
    < <(git worktree list --porcelain | sed -n 's/^worktree //p')
add_machine_path "${HOME:-}"

before='(^|[[:space:]"`'"'"'=(\[,:;|]|file://)'
# The rest of the path, or what ends it.
after='(/[^[:space:]"`'"'"'),;]*|[[:space:]"`'"'"'),;:]|$)'
pattern="$before($(IFS='|'; echo "${alternatives[*]}"))$after"

allow=.ci/absolute-paths.allow
allowed() { # FILE PATH
    [ -f "$allow" ] || return 1
    local file path
    while IFS=$'\t' read -r file path; do
        case $file in '' | '#'*) continue ;; esac
        [ "$file" = "$1" ] && case $2 in "$path"*) return 0 ;; esac
    done < "$allow"
    return 1
}

findings=0
report() { # FILE:LINE MATCH
    local where=$1 match=$2 file path
    file=${where%%:*}
    match=${match#*file://}
    path=/${match#*/}
    path=${path%[[:space:]\"\`\'),;:]}
    allowed "$file" "$path" && return 0
    printf '%s: %s\n' "$where" "$path"
    findings=$((findings + 1))
}

while IFS= read -r hit; do
    # FILE:LINE:MATCH (a match starts with its separator, or at the path)
    where=${hit%%:*}:$(cut -d: -f2 <<<"$hit")
    report "$where" "${hit#*:*:}"
done < <(git ls-files -z -- ':!:.ci/no-absolute-paths.sh' ':!:.ci/absolute-paths.allow' \
    | xargs -0 grep -nIoE "$pattern" -- 2>/dev/null || true)

while IFS= read -r link; do
    target=$(readlink "$link" || true)
    if grep -qE "$pattern" <<<"$target"; then report "$link:symlink" " $target"; fi
done < <(git ls-files -s | awk '$1 == "120000" { sub(/^[^\t]*\t/, ""); print }')

if [ "$findings" -gt 0 ]; then
    echo "no-absolute-paths: $findings absolute path(s) of a machine in tracked files;" \
        "make them relative (to the checkout, CARGO_MANIFEST_DIR, \$HOME or a temp dir)," \
        "or allow one in $allow with its reason" >&2
    exit 1
fi
