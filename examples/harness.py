#!/usr/bin/env python3
"""A minimal harness: run one agent command under grantguard, then act on
the ToolResult.

    examples/harness.py --task TASK.json --repo CHECKOUT --state STATE_DIR \
        [--capability CAP]... [--timeout SECONDS] -- COMMAND [ARGS]...

grantguard is `$GRANTGUARD`, else `grantguard` on PATH. The harness prints
what it decided (`decision: accept|retry|reject|escalate`) and why, and
exits 0 only for accept. See docs/guide/harness.md.
"""

import json
import os
import subprocess
import sys

# Classes that mean "the agent's work, or the input, is wrong": do not run
# the same thing again. Every other failing class (unsafe_state,
# compensation, internal_defect, dependency, ...) needs a human.
REJECT = {"verification", "target_rejection", "validation", "authorization"}


def parse_args(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1 :]
    args = {"capability": []}
    it = iter(opts)
    for flag in it:
        name = flag.lstrip("-")
        if name not in ("task", "repo", "state", "capability", "timeout"):
            sys.exit(f"unknown option {flag}\n{__doc__}")
        value = next(it, None)
        if value is None:
            sys.exit(f"{flag} needs a value")
        if name == "capability":
            args["capability"].append(value)
        else:
            args[name] = value
    for required in ("task", "repo", "state"):
        if required not in args:
            sys.exit(f"--{required} is required\n{__doc__}")
    if not command:
        sys.exit(f"no command after --\n{__doc__}")
    return args, command


def decide(result):
    """(decision, reason) from the ToolResult's status, failure_class and
    retryable: never from message text."""
    if result["status"] == "succeeded":
        return "accept", "verify accepted the commits"
    failure = result["failure_class"]
    if result["retryable"]:
        # timeout, conflict, rate_limit, transient_provider. A new run id:
        # the same one would replay this recorded result.
        return "retry", f"{failure} is retryable; run the task again later"
    if failure in REJECT:
        return "reject", f"{failure}: the work does not hold; do not retry it as it is"
    return "escalate", f"{failure}: a human must look before the checkout is used"


def main():
    args, command = parse_args(sys.argv[1:])
    grantguard = os.environ.get("GRANTGUARD", "grantguard")
    cmd = [grantguard, "run", "--json", "--task", args["task"], "--repo", args["repo"],
           "--state", args["state"]]
    for cap in args["capability"]:
        cmd += ["--capability", cap]
    if "timeout" in args:
        cmd += ["--timeout", args["timeout"]]
    # The command runs in the checkout: a relative path to a script here
    # would name nothing there.
    if os.sep in command[0] and os.path.exists(command[0]):
        command[0] = os.path.abspath(command[0])
    cmd += ["--", *command]

    # stdout is grantguard's alone: exactly one JSON document, the result.
    # The agent's own output arrives on stderr, passed through here.
    proc = subprocess.run(cmd, stdout=subprocess.PIPE)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        # A usage error (exit 2) prints no ToolResult.
        print(f"decision: escalate\nreason: grantguard exited {proc.returncode} without a result")
        return 2

    decision, reason = decide(result)
    print(f"decision: {decision}")
    print(f"reason: {reason}")
    print(f"status: {result['status']} (exit {proc.returncode})")
    commits = result["evidence"].get("commits")
    if commits:
        print(f"commits: {commits['count']} (tip {commits['tip']})")
    for v in result["violations"]:
        where = v.get("path") or v.get("ref") or v.get("commit") or ""
        print(f"violation: {v['rule']} {where}".rstrip())
    return 0 if decision == "accept" else 1


if __name__ == "__main__":
    sys.exit(main())
