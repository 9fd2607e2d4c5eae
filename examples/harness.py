#!/usr/bin/env python3
r"""A minimal harness: run one agent command under grantguard, then act on
the ToolResult.

    examples/harness.py --task TASK.json --repo CHECKOUT --state STATE_DIR \
        [--capability CAP]... [--timeout SECONDS] -- COMMAND [ARGS]...

grantguard is `$GRANTGUARD`, else `grantguard` on PATH. The harness prints
what it decided (`decision: accept|retry|reject|escalate`) and why, and
exits 0 only for accept, 2 on a usage error. The demo task needs
`--capability repo.read` (without it: `capability_not_granted`, reject).
See docs/guide/harness.md; the README shows the
core of it (tests/docs.rs keeps the two the same).
"""

import json
import os
import subprocess
import sys


def usage(message):
    print(message, file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    if "--" not in argv:
        usage(__doc__)
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1 :]
    args = {"capability": []}
    it = iter(opts)
    for flag in it:
        name = flag.lstrip("-")
        if name not in ("task", "repo", "state", "capability", "timeout"):
            usage(f"unknown option {flag}\n{__doc__}")
        value = next(it, None)
        if value is None:
            usage(f"{flag} needs a value")
        if name == "capability":
            args["capability"].append(value)
        else:
            args[name] = value
    for required in ("task", "repo", "state"):
        if required not in args:
            usage(f"--{required} is required\n{__doc__}")
    if not command:
        sys.exit(f"no command after --\n{__doc__}")
    # The command runs in the checkout: a relative path to a script here
    # would name nothing there.
    if os.sep in command[0] and os.path.exists(command[0]):
        command[0] = os.path.abspath(command[0])
    return args, command


def run(grantguard, task, repo, state, capabilities, timeout, command):
    """The ToolResult of one `grantguard run`, and its exit code; None when
    grantguard printed no result (a usage error, exit 2)."""
    cmd = [grantguard, "run", "--json", "--task", task, "--repo", repo, "--state", state]
    cmd += [arg for cap in capabilities for arg in ("--capability", cap)]
    if timeout is not None:
        cmd += ["--timeout", timeout]
    cmd += ["--", *command]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE)  # stderr: the agent's output
    try:
        result = json.loads(proc.stdout)                # exactly one ToolResult
    except ValueError:
        return None, proc.returncode
    return result, proc.returncode


def decide(result):
    """accept, retry, reject or escalate: from status, failure_class and
    retryable, never from message text."""
    if result["status"] == "succeeded":
        decision = "accept"    # the accepted commits are on the branch
    elif result["retryable"]:
        decision = "retry"     # timeout, conflict, ...: later, with a new run id
    elif result["failure_class"] in {"verification", "target_rejection",
                                     "validation", "authorization"}:
        decision = "reject"    # the work does not hold: report result["violations"]
    else:
        decision = "escalate"  # unsafe_state, internal_defect, ...: a human looks
    return decision


def main():
    args, command = parse_args(sys.argv[1:])
    grantguard = os.environ.get("GRANTGUARD", "grantguard")
    result, code = run(grantguard, args["task"], args["repo"], args["state"],
                       args["capability"], args.get("timeout"), command)
    if result is None:
        print(f"decision: escalate\nreason: grantguard exited {code} without a result")
        return 2
    decision = decide(result)
    print(f"decision: {decision}")
    print(f"status: {result['status']} (exit {code})")
    if result["failure_class"] is not None:
        print(f"failure_class: {result['failure_class']}")
    commits = result["evidence"].get("commits")
    if commits:
        print(f"commits: {commits['count']} (tip {commits['tip']})")
    for v in result["violations"]:
        where = v.get("path") or v.get("ref") or v.get("commit") or ""
        print(f"violation: {v['rule']} {where}".rstrip())
    return 0 if decision == "accept" else 1


if __name__ == "__main__":
    sys.exit(main())
