//! Compatibility suite: grantguard with the real tools agents use and the
//! checkout shapes they get, never imitations of them. `tests/compat/setup.sh`
//! installs the tools from the package registries (git-lfs from Debian;
//! pre-commit, pygit2, dulwich, GitPython from PyPI; husky, lefthook,
//! isomorphic-git from npm) into `target/compat/` (or
//! `GRANTGUARD_COMPAT_DIR`). When they are missing every test here FAILS and
//! says to run it: a suite that skipped them would pass while proving
//! nothing.
//!
//! Each test is one agent run under the grant `docs/` (1 to 2 commits): a
//! granted commit is accepted by `verify`; an ungranted one (`README.md`) is
//! refused by the hook when the tool runs hooks, and rejected by `verify`
//! when the tool bypasses them (verify is the authority); `disarm` restores
//! the config byte for byte; and a hook manager's own hook still runs while
//! armed (grantguard chains it) and after disarm.
//!
//! Everything is isolated: the Sandbox's HOME and git environment, and the
//! tools' caches (npm, pre-commit, XDG) in the temp dir. Nothing touches the
//! network: pre-commit hooks are `repo: local`, clones are from a local
//! `file://` origin, and `npm_config_offline` is set.

mod common;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Sandbox, assert_accepted, assert_rejected};

/// The directory `tests/compat/setup.sh` installed the tools into.
struct Tools {
    dir: PathBuf,
}

/// The installed tools, or a loud failure naming what to run.
fn tools() -> Tools {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = common::compat_dir();
    let mut missing = Vec::new();
    for bin in [
        "git-lfs",
        "pre-commit",
        "compat-python",
        "husky",
        "lefthook",
    ] {
        if !dir.join("bin").join(bin).exists() {
            missing.push(format!("bin/{bin}"));
        }
    }
    if !dir
        .join("node_modules/isomorphic-git/package.json")
        .exists()
    {
        missing.push("node_modules/isomorphic-git".to_owned());
    }
    // An install from other pins is stale: the suite would test other tools.
    for (installed, pinned) in [
        ("venv/.installed-requirements.txt", "requirements.txt"),
        ("npm/.installed-package-lock.json", "package-lock.json"),
    ] {
        let have = std::fs::read(dir.join(installed)).ok();
        if have.is_none() || have != std::fs::read(root.join("tests/compat").join(pinned)).ok() {
            missing.push(format!("{installed} (not tests/compat/{pinned})"));
        }
    }
    assert!(
        missing.is_empty(),
        "the compatibility tools are not installed in {}: missing or stale: {}.\n\
         Run tests/compat/setup.sh (it installs git-lfs, pre-commit, pygit2, dulwich, \
         GitPython, husky, lefthook and isomorphic-git), then run the tests again.",
        dir.display(),
        missing.join(", ")
    );
    Tools { dir }
}

/// A Sandbox plus the tools, with every tool isolated in it.
struct Compat {
    sb: Sandbox,
    tools: Tools,
    path: OsString,
}

impl Compat {
    fn new() -> Compat {
        Compat::in_sandbox(Sandbox::new())
    }

    /// [`Compat::new`] for the git libraries (pygit2, dulwich, GitPython,
    /// isomorphic-git): repositories in the formats they read and write,
    /// SHA-1 with refs in files, whatever git's defaults (Git 3.0 makes
    /// SHA-256 + reftable repositories, which libgit2 refuses to open and
    /// the others cannot commit to). grantguard is still tested with the
    /// tool under every git.
    fn for_libraries() -> Compat {
        Compat::in_sandbox(Sandbox::with_files_refs())
    }

    fn in_sandbox(sb: Sandbox) -> Compat {
        let tools = tools();
        let mut paths = vec![tools.dir.join("bin")];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(paths).unwrap();
        Compat { sb, tools, path }
    }

    /// A command in the checkout with the Sandbox's environment, the tools
    /// first on PATH and their caches and configuration in the temp dir.
    fn cmd(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = self.sb.command(program);
        for var in [
            "HUSKY",
            "LEFTHOOK",
            "LEFTHOOK_BIN",
            "LEFTHOOK_EXCLUDE",
            "LEFTHOOK_VERBOSE",
            "SKIP",
            "PRE_COMMIT",
            "NODE_OPTIONS",
            "PYTHONPATH",
            "PYTHONHOME",
            "VIRTUAL_ENV",
        ] {
            cmd.env_remove(var);
        }
        let home = &self.sb.home;
        cmd.env("PATH", &self.path)
            .env("NODE_PATH", self.tools.dir.join("node_modules"))
            .env("PRE_COMMIT_HOME", self.sb.root.join("pre-commit-home"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("npm_config_cache", home.join(".npm"))
            .env("npm_config_offline", "true")
            .env("npm_config_update_notifier", "false")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(&self.sb.repo);
        cmd
    }

    fn try_run(&self, program: impl AsRef<OsStr>, args: &[&str]) -> Output {
        self.cmd(program).args(args).output().unwrap()
    }

    /// Runs a program in the checkout, asserting success; returns stdout.
    fn run(&self, program: impl AsRef<OsStr>, args: &[&str]) -> String {
        let program = program.as_ref().to_owned();
        let out = self.try_run(&program, args);
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}{}",
            program.to_string_lossy(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    }

    fn git(&self, args: &[&str]) -> String {
        self.run("git", args)
    }

    fn bin(&self, name: &str) -> PathBuf {
        self.tools.dir.join("bin").join(name)
    }

    /// The repository's config file (in the common git dir, wherever that is).
    fn config_path(&self) -> PathBuf {
        let common = self.git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]);
        PathBuf::from(common).join("config")
    }

    /// Removes the checkout so a shape can put its own in its place.
    fn drop_checkout(&self) {
        std::fs::remove_dir_all(&self.sb.repo).unwrap();
    }
}

/// A library the agent commits with: one small script each, under
/// `tests/compat/clients/`.
#[derive(Clone, Copy, Debug)]
enum Client {
    Pygit2,
    Dulwich,
    GitPython,
    IsomorphicGit,
}

/// How the agent makes a commit.
#[derive(Clone, Copy, Debug)]
enum Agent {
    /// The git command line: `git add`, `git commit`.
    Git,
    /// A git library, driven by its script.
    Library(Client),
}

/// Whether the tool ran grantguard's `pre-commit` hook, as measured with
/// the pinned versions.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Hooks {
    Run,
    NotRun,
}

impl Agent {
    /// What each tool was measured to do while armed: git and GitPython
    /// honour `core.hooksPath` and run grantguard's hook; libgit2 (pygit2)
    /// and isomorphic-git run no hooks; dulwich runs only
    /// `.git/hooks/pre-commit` and ignores `core.hooksPath`, and reaches
    /// grantguard's check through the stub `arm` places there. verify must
    /// hold for all of them.
    fn hooks(self) -> Hooks {
        match self {
            Agent::Git | Agent::Library(Client::GitPython) | Agent::Library(Client::Dulwich) => {
                Hooks::Run
            }
            Agent::Library(_) => Hooks::NotRun,
        }
    }

    /// Writes `content` to `rel`, stages it and commits; `bypass` skips the
    /// hooks where the tool has a way to.
    fn commit(self, c: &Compat, rel: &str, content: &str, message: &str, bypass: bool) -> Output {
        let client = match self {
            Agent::Git => {
                c.sb.write(rel, content);
                let hooks: &[&str] = if bypass {
                    &["-c", "core.hooksPath=/dev/null"]
                } else {
                    &[]
                };
                let add = c.try_run("git", &[hooks, &["add", "--", rel]].concat());
                if !add.status.success() {
                    return add;
                }
                return c.try_run("git", &[hooks, &["commit", "-q", "-m", message]].concat());
            }
            Agent::Library(client) => client,
        };
        let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/clients");
        let (program, script) = match client {
            Client::Pygit2 => (c.bin("compat-python"), "pygit2_commit.py"),
            Client::Dulwich => (c.bin("compat-python"), "dulwich_commit.py"),
            Client::GitPython => (c.bin("compat-python"), "gitpython_commit.py"),
            Client::IsomorphicGit => (PathBuf::from("node"), "isomorphic_git_commit.mjs"),
        };
        let script = clients.join(script);
        let repo = c.sb.repo.to_str().unwrap();
        let mut args = vec![script.to_str().unwrap(), repo, rel, content, message];
        if bypass {
            args.push("--no-verify");
        }
        c.try_run(program, &args)
    }
}

/// A file the agent writes: path and content.
type Change<'a> = (&'a str, &'a str);

/// The ordinary changes: a granted doc and an ungranted README.
const GRANTED: Change = ("docs/guide.md", "a better guide\n");
const UNGRANTED: Change = ("README.md", "# taken over\n");

/// Arms under `docs/`, 1 to 2 commits; returns the config's bytes before.
fn arm(c: &Compat) -> Vec<u8> {
    let before = std::fs::read(c.config_path()).unwrap();
    let grant = c.sb.grant(&["docs/"], 1, 2);
    c.sb.arm(&grant);
    before
}

/// Asserts that the hook manager's marker was written, then clears it.
#[track_caller]
fn assert_marker(marker: &Path, when: &str) {
    assert!(
        marker.exists(),
        "the hook manager's own pre-commit hook did not run {when}"
    );
    std::fs::remove_file(marker).unwrap();
}

/// One agent run in an armed checkout (see the module doc): `marker` is the
/// file a hook manager's pre-commit hook appends to, if there is one.
fn agent_run(c: &Compat, agent: Agent, marker: Option<&Path>, granted: Change, ungranted: Change) {
    let before = arm(c);

    let out = agent.commit(c, granted.0, granted.1, "granted change", false);
    assert!(
        out.status.success(),
        "{agent:?}: the granted commit failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(m) = marker {
        assert_marker(m, "while armed");
    }
    let (code, r) = c.sb.verify();
    assert_accepted(code, &r);
    assert_eq!(r["evidence"]["commits"]["count"], 1, "{r:#}");

    let out = agent.commit(c, ungranted.0, ungranted.1, "ungranted change", false);
    let refused = !out.status.success();
    let measured = if refused { Hooks::Run } else { Hooks::NotRun };
    assert_eq!(
        measured,
        agent.hooks(),
        "{agent:?}: whether grantguard's pre-commit hook refused the ungranted commit \
         differs from what was measured for this tool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if refused {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("path_not_granted"), "{agent:?}: {err}");
        if let Some(m) = marker {
            assert!(
                !m.exists(),
                "a refused commit must not reach the chained hook"
            );
        }
        let out = agent.commit(c, ungranted.0, ungranted.1, "ungranted change", true);
        assert!(
            out.status.success(),
            "{agent:?}: the commit bypassing hooks failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (code, r) = c.sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
    assert_eq!(r["violations"][0]["path"], ungranted.0, "{r:#}");

    disarm(c, &before);
    if let Some(m) = marker {
        let _ = std::fs::remove_file(m);
        let out = Agent::Git.commit(c, "docs/after.md", "after disarm\n", "after", false);
        assert!(
            out.status.success(),
            "a commit after disarm failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_marker(m, "after disarm");
    }
}

/// Disarms and asserts the config is byte for byte as before arm.
#[track_caller]
fn disarm(c: &Compat, before: &[u8]) {
    let out =
        c.sb.grantguard(&["disarm", "--state", c.sb.state.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "disarm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = std::fs::read(c.config_path()).unwrap();
    assert!(
        after == before,
        "disarm did not restore the config byte for byte:\n--- before\n{}\n--- after\n{}",
        String::from_utf8_lossy(before),
        String::from_utf8_lossy(&after)
    );
}

/// Stages everything and commits with git (hooks run), asserting success.
fn commit_all(c: &Compat, message: &str) {
    c.git(&["add", "-A"]);
    c.git(&["commit", "-q", "-m", message]);
}

// ---------------------------------------------------------------- managers

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_husky_whose_hook_keeps_running() {
    let c = Compat::new();
    let marker = c.sb.root.join("husky-ran");
    c.sb.write("package.json", "{\"name\": \"demo\", \"private\": true}\n");
    c.run(c.bin("husky"), &["init"]);
    assert_eq!(c.git(&["config", "core.hooksPath"]), ".husky/_");
    c.sb.write(
        ".husky/pre-commit",
        &format!("echo husky >> '{}'\n", marker.display()),
    );
    commit_all(&c, "husky");
    assert_marker(&marker, "before arm");
    agent_run(&c, Agent::Git, Some(&marker), GRANTED, UNGRANTED);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_lefthook_whose_hook_keeps_running() {
    let c = Compat::new();
    let marker = c.sb.root.join("lefthook-ran");
    c.sb.write(
        "lefthook.yml",
        &format!(
            "pre-commit:\n  commands:\n    marker:\n      run: echo lefthook >> '{}'\n",
            marker.display()
        ),
    );
    commit_all(&c, "lefthook");
    c.run(c.bin("lefthook"), &["install"]);
    assert!(c.sb.git_dir().join("hooks/pre-commit").exists());
    agent_run(&c, Agent::Git, Some(&marker), GRANTED, UNGRANTED);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_pre_commit_whose_hook_keeps_running() {
    let c = Compat::new();
    let marker = c.sb.root.join("pre-commit-ran");
    c.sb.write(
        ".pre-commit-config.yaml",
        &format!(
            "repos:\n  - repo: local\n    hooks:\n      - id: marker\n        name: marker\n        \
             entry: sh -c \"echo pre-commit >> '{}'\"\n        language: system\n        \
             always_run: true\n        pass_filenames: false\n",
            marker.display()
        ),
    );
    commit_all(&c, "pre-commit");
    c.run(c.bin("pre-commit"), &["install"]);
    assert!(c.sb.git_dir().join("hooks/pre-commit").exists());
    agent_run(&c, Agent::Git, Some(&marker), GRANTED, UNGRANTED);
}

// --------------------------------------------------------------- libraries

#[test]
fn accepts_granted_and_rejects_ungranted_commits_made_with_pygit2() {
    let c = Compat::for_libraries();
    agent_run(&c, Agent::Library(Client::Pygit2), None, GRANTED, UNGRANTED);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_made_with_dulwich() {
    let c = Compat::for_libraries();
    agent_run(
        &c,
        Agent::Library(Client::Dulwich),
        None,
        GRANTED,
        UNGRANTED,
    );
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_made_with_gitpython() {
    let c = Compat::for_libraries();
    agent_run(
        &c,
        Agent::Library(Client::GitPython),
        None,
        GRANTED,
        UNGRANTED,
    );
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_made_with_isomorphic_git() {
    let c = Compat::for_libraries();
    agent_run(
        &c,
        Agent::Library(Client::IsomorphicGit),
        None,
        GRANTED,
        UNGRANTED,
    );
}

// ----------------------------------------------------------------- git-lfs

#[test]
fn accepts_granted_and_rejects_ungranted_commits_of_git_lfs_files() {
    let c = Compat::new();
    c.git(&["lfs", "install", "--local"]);
    c.git(&["lfs", "track", "*.bin"]);
    c.sb.write("docs/data.bin", "first binary\n");
    commit_all(&c, "lfs");
    agent_run(
        &c,
        Agent::Git,
        None,
        ("docs/data.bin", "second binary\n"),
        ("assets/logo.bin", "not granted\n"),
    );
    let stored = c.git(&["cat-file", "-p", "HEAD~1:docs/data.bin"]);
    assert!(
        stored.starts_with("version https://git-lfs.github.com/spec/v1"),
        "git-lfs did not store a pointer: {stored}"
    );
}

// ------------------------------------------------------------------ shapes

/// Gives origin a second commit (so depth and filters cut something off),
/// lets it serve filters, and replaces the checkout with a `file://` clone
/// made with `args`.
fn reclone(c: &Compat, args: &[&str]) {
    c.sb.commit_file("docs/history.md", "older\n", "history");
    c.git(&["push", "-q", "origin", "main"]);
    c.sb.run_git(&c.sb.origin, &["config", "uploadpack.allowFilter", "true"]);
    c.drop_checkout();
    let url = format!("file://{}", c.sb.origin.display());
    let mut all = vec!["clone", "-q"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[&url, "repo"]);
    c.sb.run_git(&c.sb.root, &all);
}

/// The ordinary agent run with the git command line.
fn git_agent_run(c: &Compat) {
    agent_run(c, Agent::Git, None, GRANTED, UNGRANTED);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_in_a_shallow_clone() {
    let c = Compat::new();
    reclone(&c, &["--depth", "1"]);
    assert!(c.sb.git_dir().join("shallow").exists());
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_in_a_blobless_clone() {
    let c = Compat::new();
    reclone(&c, &["--filter=blob:none"]);
    assert_eq!(c.git(&["config", "remote.origin.promisor"]), "true");
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_in_a_treeless_clone() {
    let c = Compat::new();
    reclone(&c, &["--filter=tree:0"]);
    assert_eq!(
        c.git(&["config", "remote.origin.partialclonefilter"]),
        "tree:0"
    );
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_a_submodule() {
    let c = Compat::new();
    let lib = c.sb.root.join("lib");
    c.sb.run_git(&c.sb.root, &["init", "-q", "-b", "main", "lib"]);
    std::fs::write(lib.join("lib.c"), "int f;\n").unwrap();
    c.sb.run_git(&lib, &["add", "."]);
    c.sb.run_git(&lib, &["commit", "-q", "-m", "lib"]);
    c.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        lib.to_str().unwrap(),
        "vendor/lib",
    ]);
    commit_all(&c, "submodule");
    git_agent_run(&c);
}

#[test]
fn rejects_an_ungranted_submodule_update() {
    let c = Compat::new();
    let lib = c.sb.root.join("lib");
    c.sb.run_git(&c.sb.root, &["init", "-q", "-b", "main", "lib"]);
    std::fs::write(lib.join("lib.c"), "int f;\n").unwrap();
    c.sb.run_git(&lib, &["add", "."]);
    c.sb.run_git(&lib, &["commit", "-q", "-m", "lib"]);
    c.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        lib.to_str().unwrap(),
        "vendor/lib",
    ]);
    commit_all(&c, "submodule");
    arm(&c);
    let sub = c.sb.repo.join("vendor/lib");
    std::fs::write(sub.join("lib.c"), "int g;\n").unwrap();
    c.sb.run_git(&sub, &["commit", "-q", "-am", "lib change"]);
    c.git(&["add", "vendor/lib"]);
    let out = c.try_run("git", &["commit", "-q", "-m", "bump"]);
    assert!(
        !out.status.success(),
        "the hook must refuse the gitlink update"
    );
    c.git(&[
        "-c",
        "core.hooksPath=/dev/null",
        "commit",
        "-q",
        "-m",
        "bump",
    ]);
    let (code, r) = c.sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
    assert_eq!(r["violations"][0]["path"], "vendor/lib", "{r:#}");
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_in_a_cone_sparse_checkout() {
    let c = Compat::new();
    c.git(&["sparse-checkout", "set", "--cone", "docs"]);
    assert!(!c.sb.repo.join("src/lib.rs").exists());
    assert_ne!(
        c.git(&["config", "--default", "false", "index.sparse"]),
        "true"
    );
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_a_sparse_index() {
    let c = Compat::new();
    c.git(&["sparse-checkout", "set", "--cone", "--sparse-index", "docs"]);
    assert_eq!(c.git(&["config", "index.sparse"]), "true");
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_under_eol_crlf() {
    let c = Compat::new();
    c.sb.write(".gitattributes", "*.txt eol=crlf\n");
    c.sb.write("docs/notes.txt", "one\ntwo\n");
    commit_all(&c, "crlf");
    // Check the file out again so the worktree has git's CRLF form.
    std::fs::remove_file(c.sb.repo.join("docs/notes.txt")).unwrap();
    c.git(&["checkout", "--", "docs/notes.txt"]);
    assert_eq!(
        std::fs::read(c.sb.repo.join("docs/notes.txt")).unwrap(),
        b"one\r\ntwo\r\n"
    );
    agent_run(
        &c,
        Agent::Git,
        None,
        ("docs/notes.txt", "one\r\ntwo\r\nthree\r\n"),
        ("src/notes.txt", "not granted\r\n"),
    );
    assert_eq!(
        c.git(&["cat-file", "-p", "HEAD~1:docs/notes.txt"]),
        "one\ntwo\nthree"
    );
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_index_v4() {
    let c = Compat::new();
    c.git(&["update-index", "--index-version", "4"]);
    let index = std::fs::read(c.sb.git_dir().join("index")).unwrap();
    assert_eq!(&index[4..8], &[0, 0, 0, 4]);
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_a_split_index() {
    let c = Compat::new();
    c.git(&["config", "core.splitIndex", "true"]);
    c.git(&["update-index", "--split-index"]);
    let shared = std::fs::read_dir(c.sb.git_dir())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("sharedindex.")
        })
        .count();
    assert!(shared > 0, "no shared index written");
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_the_untracked_cache() {
    let c = Compat::new();
    c.git(&["config", "core.untrackedCache", "true"]);
    c.git(&["update-index", "--untracked-cache"]);
    c.git(&["status", "--porcelain"]);
    let index = std::fs::read(c.sb.git_dir().join("index")).unwrap();
    assert!(
        index.windows(4).any(|w| w == b"UNTR"),
        "no untracked cache extension in the index"
    );
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_a_separate_git_dir() {
    let c = Compat::new();
    c.drop_checkout();
    let git_dir = c.sb.root.join("repo-git");
    c.sb.run_git(
        &c.sb.root,
        &[
            "clone",
            "-q",
            "--separate-git-dir",
            git_dir.to_str().unwrap(),
            "origin.git",
            "repo",
        ],
    );
    assert!(c.sb.repo.join(".git").is_file());
    git_agent_run(&c);
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_in_a_sha256_repository() {
    let c = Compat::new();
    c.drop_checkout();
    c.sb.run_git(
        &c.sb.root,
        &["init", "-q", "-b", "main", "--object-format=sha256", "repo"],
    );
    c.sb.write("README.md", "# demo\n");
    c.sb.write("docs/guide.md", "guide\n");
    c.sb.write("src/lib.rs", "pub fn f() {}\n");
    commit_all(&c, "initial");
    assert_eq!(c.git(&["rev-parse", "--show-object-format"]), "sha256");
    git_agent_run(&c);
}

/// GitPython's `index.add(...); index.write(); index.commit(...)` on one
/// `IndexFile` writes back the cache-tree it read (naming HEAD's trees) over
/// the changed entries, then commits the tree the entries make.
fn gitpython_stale_cache_tree_commit(c: &Compat, rel: &str, content: &str) -> Output {
    // A valid cache-tree naming HEAD's trees, as after any checkout.
    c.git(&["read-tree", "HEAD"]);
    let script = "import sys, git\n\
                  repo_dir, rel, content = sys.argv[1:4]\n\
                  open(repo_dir + '/' + rel, 'w').write(content)\n\
                  index = git.Repo(repo_dir).index\n\
                  index.add([rel])\n\
                  index.write()\n\
                  index.commit('stale cache-tree')\n";
    let repo = c.sb.repo.to_str().unwrap();
    c.try_run(c.bin("compat-python"), &["-c", script, repo, rel, content])
}

#[test]
fn rejects_an_ungranted_gitpython_commit_behind_a_stale_cache_tree() {
    let c = Compat::for_libraries();
    let _before = arm(&c);
    let head = c.git(&["rev-parse", "HEAD"]);
    let out = gitpython_stale_cache_tree_commit(&c, "src/lib.rs", "pub fn taken() {}\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "GitPython committed: {stderr}");
    assert!(
        stderr.contains("src/lib.rs") && stderr.contains("not granted"),
        "{stderr}"
    );
    assert_eq!(c.git(&["rev-parse", "HEAD"]), head);
}

#[test]
fn accepts_a_granted_gitpython_commit_behind_a_stale_cache_tree() {
    let c = Compat::for_libraries();
    let _before = arm(&c);
    let head = c.git(&["rev-parse", "HEAD"]);
    let out = gitpython_stale_cache_tree_commit(&c, "docs/guide.md", "a better guide\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(c.git(&["rev-parse", "HEAD~1"]), head);
    assert_eq!(
        c.git(&["diff", "--name-only", "HEAD~1", "HEAD"]),
        "docs/guide.md"
    );
}

/// Tells the agent not to reinstall hooks or hook managers, naming each.
#[track_caller]
fn assert_says_hooks_stay(text: &str) {
    for said in [
        "do not install or reinstall hooks or hook managers",
        "lefthook install",
        "pre-commit install",
        "husky install",
        "git lfs install or update --force",
        "verify rejects any change to core.hooksPath",
    ] {
        assert!(text.contains(said), "no {said:?} in: {text}");
    }
}

#[test]
fn rejects_lefthook_install_force_while_armed_after_the_hooks_said_not_to() {
    let c = Compat::new();
    let marker = c.sb.root.join("lefthook-ran");
    c.sb.write(
        "lefthook.yml",
        &format!(
            "pre-commit:\n  commands:\n    marker:\n      run: echo lefthook >> '{}'\n",
            marker.display()
        ),
    );
    commit_all(&c, "lefthook");
    c.run(c.bin("lefthook"), &["install"]);
    let _before = arm(&c);
    // The refusal and status say it before the agent tries.
    c.sb.write(UNGRANTED.0, UNGRANTED.1);
    c.git(&["add", UNGRANTED.0]);
    let out = c.try_run("git", &["commit", "-q", "-m", "ungranted"]);
    assert!(!out.status.success());
    assert_says_hooks_stay(&String::from_utf8_lossy(&out.stderr));
    let state = c.sb.state.to_str().unwrap();
    let status = c.sb.grantguard(&["status", "--state", state]);
    assert_says_hooks_stay(&String::from_utf8_lossy(&status.stdout));
    c.git(&["reset", "-q", "--hard"]);
    // The agent does what lefthook's own message suggests anyway.
    c.run(c.bin("lefthook"), &["install", "--force"]);
    let (code, r) = c.sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        common::rules(&r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
}

#[test]
fn rejects_git_lfs_update_force_while_armed_after_the_hooks_said_not_to() {
    let c = Compat::new();
    let _before = arm(&c);
    // git-lfs finds grantguard's pre-push stub and suggests overwriting it.
    let out = c.try_run("git", &["lfs", "install", "--local"]);
    assert!(!out.status.success(), "git lfs install overwrote a hook");
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("git lfs update --force"), "{said}");
    let state = c.sb.state.to_str().unwrap();
    let status = c.sb.grantguard(&["status", "--state", state]);
    assert_says_hooks_stay(&String::from_utf8_lossy(&status.stdout));
    // The agent does what git-lfs's message suggests anyway.
    c.git(&["lfs", "update", "--force"]);
    let (code, r) = c.sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        common::rules(&r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
}

#[test]
fn leaves_a_chained_default_pre_commit_hook_to_dulwich_and_restores_it_on_disarm() {
    let c = Compat::for_libraries();
    // With core.hooksPath unset, .git/hooks is git's hooks directory: its
    // pre-commit is the original grantguard chains, and arm leaves it there.
    let hook = c.sb.git_dir().join("hooks/pre-commit");
    let marker = c.sb.root.join("own-hook-ran");
    let text = format!("#!/bin/sh\necho own >> '{}'\n", marker.display());
    std::fs::write(&hook, &text).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let before = arm(&c);
    assert_eq!(std::fs::read_to_string(&hook).unwrap(), text);
    // git runs grantguard's check, then the original.
    let out = Agent::Git.commit(&c, GRANTED.0, GRANTED.1, "granted", false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_marker(&marker, "git commit while armed");
    // dulwich runs the original only: verify is the authority there.
    let out = Agent::Library(Client::Dulwich).commit(&c, UNGRANTED.0, UNGRANTED.1, "x", false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, r) = c.sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        common::rules(&r).contains(&"path_not_granted".to_owned()),
        "{r:#}"
    );
    c.git(&["reset", "-q", "--hard", "HEAD~1"]);
    disarm(&c, &before);
    assert_eq!(std::fs::read_to_string(&hook).unwrap(), text);
}

#[test]
fn places_a_default_pre_commit_stub_for_dulwich_and_removes_it_on_disarm() {
    let c = Compat::for_libraries();
    let hooks = c.sb.git_dir().join("hooks");
    let listing = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let names_before = listing(&hooks);
    assert!(!hooks.join("pre-commit").exists());
    let before = arm(&c);
    assert!(hooks.join("pre-commit").exists());
    // git still runs the stubs in the state directory, not this one.
    assert_ne!(
        c.git(&["config", "core.hooksPath"]),
        hooks.to_str().unwrap()
    );
    let out = Agent::Library(Client::Dulwich).commit(&c, UNGRANTED.0, UNGRANTED.1, "x", false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "dulwich committed: {stderr}");
    assert!(stderr.contains("path_not_granted"), "{stderr}");
    // Removing the stub is a change to protected metadata.
    let stub = std::fs::read(hooks.join("pre-commit")).unwrap();
    std::fs::remove_file(hooks.join("pre-commit")).unwrap();
    let (code, r) = c.sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        common::rules(&r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
    std::fs::write(hooks.join("pre-commit"), &stub).unwrap();
    std::fs::set_permissions(
        hooks.join("pre-commit"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    c.git(&["reset", "-q", "--hard"]);
    c.git(&["clean", "-qfd"]);
    disarm(&c, &before);
    assert_eq!(listing(&hooks), names_before);
}

/// Parallel agents with real husky: `husky` (the `prepare` script) run in
/// each linked worktree generates that worktree's ignored `.husky/_` and
/// sets the shared, relative `core.hooksPath=.husky/_`. With both
/// worktrees armed, a commit in each runs that worktree's husky hook and
/// grantguard's check of that worktree's grant, and nobody else's.
#[test]
fn parallel_worktrees_with_husky_each_run_their_own_hooks_and_grant() {
    let c = Compat::new();
    let marker = c.sb.root.join("husky-ran");
    c.sb.write("package.json", "{\"name\": \"demo\", \"private\": true}\n");
    c.run(c.bin("husky"), &["init"]);
    c.sb.write(
        ".husky/pre-commit",
        &format!("echo \"husky $PWD\" >> '{}'\n", marker.display()),
    );
    commit_all(&c, "husky");
    std::fs::remove_file(&marker).unwrap();
    // The harness prepares every worktree (husky rewrites the shared
    // core.hooksPath, which would switch an armed worktree's hooks off),
    // then arms them.
    let dirs: Vec<PathBuf> = (1..=2).map(|i| c.sb.root.join(format!("wt{i}"))).collect();
    for (i, dir) in dirs.iter().enumerate() {
        let branch = format!("agent{}", i + 1);
        c.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            &branch,
            dir.to_str().unwrap(),
        ]);
        let out = c.cmd(c.bin("husky")).current_dir(dir).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(dir.join(".husky/_/pre-commit").exists());
    }
    let mut armed = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let i = i + 1;
        let dir = dir.clone();
        let grant = c.sb.root.join(format!("grant{i}.json"));
        let doc = serde_json::json!({"repository_grant": {"version": "1",
            "allowed_paths": [format!("area{i}/")],
            "commit_count": {"min": 1, "max": 2}, "publish": false}});
        std::fs::write(&grant, doc.to_string()).unwrap();
        let state = c.sb.root.join(format!("state{i}"));
        let out = c
            .cmd(env!("CARGO_BIN_EXE_grantguard"))
            .current_dir(&dir)
            .args(["arm", "--repo", dir.to_str().unwrap()])
            .args(["--grant", grant.to_str().unwrap()])
            .args(["--state", state.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        armed.push((dir, state));
    }
    for (i, (dir, _)) in armed.iter().enumerate().rev() {
        let commit = |file: &str| {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "x\n").unwrap();
            let add = c
                .cmd("git")
                .current_dir(dir)
                .args(["add", file])
                .output()
                .unwrap();
            assert!(add.status.success());
            c.cmd("git")
                .current_dir(dir)
                .args(["commit", "-q", "-m", file])
                .output()
                .unwrap()
        };
        let other = format!("area{}/x.txt", 2 - i);
        let out = commit(&other);
        assert!(
            !out.status.success(),
            "committed {other} in {}",
            dir.display()
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("[path_not_granted]"));
        let reset = c
            .cmd("git")
            .current_dir(dir)
            .args(["reset", "-q", "--hard"])
            .output();
        assert!(reset.unwrap().status.success());
        let out = commit(&format!("area{}/x.txt", i + 1));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Each commit ran its own worktree's husky hook, in that worktree.
    let ran = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(
        ran,
        format!(
            "husky {}\nhusky {}\n",
            armed[1].0.display(),
            armed[0].0.display()
        ),
    );
    for (dir, state) in &armed {
        let out = c
            .cmd(env!("CARGO_BIN_EXE_grantguard"))
            .current_dir(dir)
            .args(["verify", "--json", "--state", state.to_str().unwrap()])
            .output()
            .unwrap();
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["status"], "succeeded", "{r:#}");
    }
}

/// Issue 25, item 4, with real husky: `git clean -xdf` (or a fresh `npm
/// install`) removes the ignored `.husky/_` that husky generates and that
/// arm chains. git then runs no hook at all, so verify accepts the granted
/// commit with a warning instead of rejecting the session as
/// `protected_metadata_changed`; regenerating it (`husky`) is accepted
/// too, while a *changed* generated hook is still refused.
#[test]
fn accepts_husky_generated_hooks_removed_by_git_clean_with_a_warning() {
    let c = Compat::new();
    c.sb.write("package.json", "{\"name\": \"demo\", \"private\": true}\n");
    c.run(c.bin("husky"), &["init"]);
    c.sb.write(".husky/pre-commit", "true\n");
    commit_all(&c, "husky");
    let generated = c.sb.repo.join(".husky/_");
    assert!(generated.is_dir());
    c.sb.arm(&c.sb.grant(&["docs/"], 1, 1));
    c.sb.commit_file("docs/guide.md", "better\n", "docs");
    let saved = c.sb.root.join("husky-generated");
    let cp = |from: &std::path::Path, to: &std::path::Path| {
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(ok.success());
    };
    cp(&generated, &saved);
    c.git(&["clean", "-qxdf"]);
    assert!(!generated.exists(), "git clean kept .husky/_");
    let (code, r) = c.sb.verify();
    common::assert_accepted(code, &r);
    assert!(r["warnings"].to_string().contains(".husky/_"), "{r:#}");
    // One warning for all of them, however many files husky generated.
    let removed = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w.as_str().unwrap_or_default().contains("removed since arm"))
        .count();
    assert_eq!(removed, 1, "{r:#}");
    // Put back as it was: accepted; put back changed: refused.
    cp(&saved, &generated);
    let (code, r) = c.sb.verify();
    common::assert_accepted(code, &r);
    std::fs::write(generated.join("pre-commit"), "#!/bin/sh\necho changed\n").unwrap();
    let (code, r) = c.sb.verify();
    common::assert_rejected(code, &r, &["protected_metadata_changed"]);
}
