"""Commits one file with pygit2 (libgit2), as an agent using it would.

Usage: pygit2_commit.py REPO PATH CONTENT MESSAGE [--no-verify]
Writes CONTENT to PATH (relative to the worktree), stages it and commits on
the current branch; prints the new commit id. libgit2 runs no hooks, so
--no-verify changes nothing: verify is the authority.
"""

import os
import sys

import pygit2

repo_dir, rel, content, message = sys.argv[1:5]
path = os.path.join(repo_dir, rel)
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    f.write(content)
repo = pygit2.Repository(repo_dir)
repo.index.add(rel)
repo.index.write()
tree = repo.index.write_tree()
author = pygit2.Signature(os.environ["GIT_AUTHOR_NAME"], os.environ["GIT_AUTHOR_EMAIL"])
committer = pygit2.Signature(os.environ["GIT_COMMITTER_NAME"], os.environ["GIT_COMMITTER_EMAIL"])
oid = repo.create_commit("HEAD", author, committer, message, tree, [repo.head.target])
print(oid)
