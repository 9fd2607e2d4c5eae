"""Commits one file with dulwich's porcelain, as an agent using it would.

Usage: dulwich_commit.py REPO PATH CONTENT MESSAGE [--no-verify]
Writes CONTENT to PATH (relative to the worktree), stages it and commits on
the current branch; prints the new commit id. dulwich runs the pre-commit
hook it finds unless --no-verify is given.
"""

import os
import sys

from dulwich import porcelain

repo_dir, rel, content, message = sys.argv[1:5]
no_verify = "--no-verify" in sys.argv[5:]
path = os.path.join(repo_dir, rel)
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    f.write(content)
porcelain.add(repo_dir, paths=[path])
ident = lambda who: f"{os.environ[who + '_NAME']} <{os.environ[who + '_EMAIL']}>".encode()
oid = porcelain.commit(
    repo_dir,
    message=message.encode(),
    author=ident("GIT_AUTHOR"),
    committer=ident("GIT_COMMITTER"),
    no_verify=no_verify,
)
print(oid.decode())
