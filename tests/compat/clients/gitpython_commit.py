"""Commits one file with GitPython's index API, as an agent using it would.

Usage: gitpython_commit.py REPO PATH CONTENT MESSAGE [--no-verify]
Writes CONTENT to PATH (relative to the worktree), stages it and commits on
the current branch; prints the new commit id. GitPython runs the pre-commit
hook it finds unless --no-verify (skip_hooks) is given.
"""

import os
import sys

import git

repo_dir, rel, content, message = sys.argv[1:5]
no_verify = "--no-verify" in sys.argv[5:]
path = os.path.join(repo_dir, rel)
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    f.write(content)
repo = git.Repo(repo_dir)
repo.index.add([rel])
commit = repo.index.commit(message, skip_hooks=no_verify)
print(commit.hexsha)
