// Commits one file with isomorphic-git (pure JavaScript), as an agent using
// it would.
//
// Usage: node isomorphic_git_commit.mjs REPO PATH CONTENT MESSAGE [--no-verify]
// Writes CONTENT to PATH (relative to the worktree), stages it and commits
// on the current branch; prints the new commit id. isomorphic-git runs no
// hooks, so --no-verify changes nothing: verify is the authority. It is
// found through NODE_PATH (the suite points it at target/compat/node_modules).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const git = require("isomorphic-git");

const [dir, rel, content, message] = process.argv.slice(2, 6);
const file = path.join(dir, rel);
fs.mkdirSync(path.dirname(file), { recursive: true });
fs.writeFileSync(file, content);
await git.add({ fs, dir, filepath: rel });
const oid = await git.commit({
  fs,
  dir,
  message,
  author: { name: process.env.GIT_AUTHOR_NAME, email: process.env.GIT_AUTHOR_EMAIL },
  committer: { name: process.env.GIT_COMMITTER_NAME, email: process.env.GIT_COMMITTER_EMAIL },
});
console.log(oid);
