#!/bin/sh
# A minimal harness in POSIX sh: run one agent command under grantguard,
# then act on the ToolResult's status, failure_class and retryable.
#
#   examples/harness.sh TASK.json CHECKOUT STATE_DIR COMMAND [ARGS]...
#
# grantguard is $GRANTGUARD, else `grantguard` on PATH; the task's one
# capability here is repo.read. JSON fields are read with python3 (no jq
# needed). Prints `decision: accept|retry|reject|escalate` and exits 0 only
# for accept. See docs/guide/harness.md.
set -u
[ "$#" -ge 4 ] || { sed -n '5p' "$0" >&2; exit 2; }
task=$1 repo=$2 state=$3
shift 3
# The command runs in the checkout: make a relative path to a script absolute.
case $1 in
    /*) ;;
    */*) [ -e "$1" ] && { cmd="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; shift; set -- "$cmd" "$@"; } ;;
esac

# stdout is grantguard's alone (the agent's output goes to stderr).
result=$("${GRANTGUARD:-grantguard}" run --json --task "$task" --repo "$repo" \
    --state "$state" --capability repo.read -- "$@")
code=$?

field() {
    printf '%s' "$result" | python3 -c 'import json, sys
r = json.load(sys.stdin)
v = r[sys.argv[1]]
print("null" if v is None else str(v).lower() if isinstance(v, bool) else v)' "$1"
}
status=$(field status) || { echo "decision: escalate"; echo "reason: grantguard exited $code without a result"; exit 2; }
class=$(field failure_class)
retryable=$(field retryable)

if [ "$status" = succeeded ]; then
    decision=accept
elif [ "$retryable" = true ]; then
    decision=retry      # with a new run id: the same one replays this result
else
    case $class in
        verification | target_rejection | validation | authorization) decision=reject ;;
        *) decision=escalate ;;   # unsafe_state, compensation, internal_defect, ...
    esac
fi
echo "decision: $decision"
echo "status: $status (exit $code)"
[ "$class" = null ] || echo "failure_class: $class"
printf '%s' "$result" | python3 -c 'import json, sys
for v in json.load(sys.stdin)["violations"]:
    print("violation:", v["rule"], v.get("path") or v.get("ref") or "")'
[ "$decision" = accept ]
