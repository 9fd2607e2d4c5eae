//! Test sandbox: real repositories built with the real `git`, isolated from
//! the machine's git configuration (HOME in a temp dir, no system config,
//! a fixed identity), plus helpers to run the grantguard binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A temp dir holding an isolated HOME, a bare `origin`, a clone `repo`
/// (so `refs/remotes/origin/*` exist) and a `state` dir outside both.
pub struct Sandbox {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub origin: PathBuf,
    pub repo: PathBuf,
    pub state: PathBuf,
}

/// Environment every git and grantguard process in the tests gets.
fn isolate(cmd: &mut Command, home: &Path) {
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_NAMESPACE",
        "GIT_CEILING_DIRECTORIES",
        "GRANTGUARD_STATE",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "GRANTGUARD_HUB_DIR",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", home.join(".gitconfig"))
        .env("GIT_AUTHOR_NAME", "Test Agent")
        .env("GIT_AUTHOR_EMAIL", "agent@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test Agent")
        .env("GIT_COMMITTER_EMAIL", "agent@example.invalid")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
}

impl Sandbox {
    /// A repository with `README.md`, `docs/guide.md`, `src/lib.rs` and a
    /// `.gitignore` for `target/`, pushed to a bare origin and cloned.
    pub fn new() -> Sandbox {
        Sandbox::with_object_format("sha1")
    }

    /// [`Sandbox::new`] with every repository (origin, seed, clone) in the
    /// given object format (`sha1` or `sha256`).
    pub fn with_object_format(format: &str) -> Sandbox {
        Sandbox::with_formats(format, None)
    }

    /// [`Sandbox::new`] whose repositories keep their refs in loose files
    /// and `packed-refs`, whatever this git's default ref format is (Git
    /// 3.0's is reftable): for tests about the files backend itself.
    #[allow(dead_code)]
    pub fn with_files_refs() -> Sandbox {
        Sandbox::with_formats("sha1", Some("files"))
    }

    /// [`Sandbox::with_files_refs`] in the given object format.
    #[allow(dead_code)]
    pub fn with_object_format_and_files_refs(format: &str) -> Sandbox {
        Sandbox::with_formats(format, Some("files"))
    }

    /// [`Sandbox::with_object_format`], every repository made with the
    /// given ref format when one is named (`-c init.defaultRefFormat`,
    /// which gits that know only the files format ignore).
    fn with_formats(format: &str, ref_format: Option<&str>) -> Sandbox {
        let sb = Sandbox::empty();
        let format = format!("--object-format={format}");
        let ref_config = ref_format.map(|f| format!("init.defaultRefFormat={f}"));
        let made = |args: &[&str]| -> Vec<String> {
            let mut all = Vec::new();
            if let Some(c) = &ref_config {
                all.push("-c".to_owned());
                all.push(c.clone());
            }
            all.extend(args.iter().map(|a| (*a).to_owned()));
            all
        };
        let run = |dir: &Path, args: &[&str]| {
            let args = made(args);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            sb.run_git(dir, &args);
        };
        run(
            &sb.root,
            &["init", "-q", "--bare", "-b", "main", &format, "origin.git"],
        );
        let seed = sb.root.join("seed");
        run(&sb.root, &["init", "-q", "-b", "main", &format, "seed"]);
        std::fs::create_dir_all(seed.join("docs")).unwrap();
        std::fs::create_dir_all(seed.join("src")).unwrap();
        std::fs::write(seed.join("README.md"), "# demo\n").unwrap();
        std::fs::write(seed.join("docs/guide.md"), "guide\n").unwrap();
        std::fs::write(seed.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(seed.join(".gitignore"), "target/\n").unwrap();
        sb.run_git(&seed, &["add", "."]);
        sb.run_git(&seed, &["commit", "-q", "-m", "initial"]);
        sb.run_git(&seed, &["push", "-q", "../origin.git", "main"]);
        run(&sb.root, &["clone", "-q", "origin.git", "repo"]);
        sb
    }

    /// Only the HOME and paths; no repository yet.
    pub fn empty() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        // Tests run git inside the bare `origin.git` (`git -C origin.git
        // ...`); Git 3.0 refuses that by default (safe.bareRepository =
        // explicit). A test-environment setting in the isolated global
        // config: grantguard never reads it. Likewise no detached auto
        // maintenance: git 2.55's, run after a commit, prunes worktrees
        // and repacks while the test goes on (its worktree-prune removed
        // a `.git/worktrees/wt` that `worktree add` was still creating, in
        // CI); in the foreground it does the same work, in order.
        std::fs::write(
            home.join(".gitconfig"),
            "[safe]\n\tbareRepository = all\n\
             [gc]\n\tautoDetach = false\n\
             [maintenance]\n\tautoDetach = false\n",
        )
        .unwrap();
        Sandbox {
            origin: root.join("origin.git"),
            repo: root.join("repo"),
            state: root.join("state"),
            home,
            root,
            _tmp: tmp,
        }
    }

    /// Runs `command` with `sh -c` in `dir`, in the isolated environment,
    /// asserting success: a command a refusal printed, run as printed.
    #[track_caller]
    pub fn run_sh(&self, command: &str, dir: &Path) {
        let out = self
            .command("sh")
            .args(["-c", command])
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{command}: {out:?}");
    }

    /// A command with the isolated environment.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        isolate(&mut cmd, &self.home);
        cmd
    }

    /// Runs git in `dir`, asserting success; returns stdout.
    pub fn run_git(&self, dir: &Path, args: &[&str]) -> String {
        let out = self
            .command("git")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs git in the repository, asserting success; returns trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        self.run_git(&self.repo, args).trim_end().to_owned()
    }

    /// Runs git in the repository with hooks bypassed (the agent acting
    /// around them), asserting success.
    pub fn git_nohooks(&self, args: &[&str]) -> String {
        let mut all = vec!["-c", "core.hooksPath=/dev/null"];
        all.extend_from_slice(args);
        self.git(&all)
    }

    /// Runs git in `dir` without asserting success.
    #[allow(dead_code)]
    pub fn try_git_in(&self, dir: &Path, args: &[&str]) -> Output {
        self.command("git")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs git in the repository without asserting.
    pub fn try_git(&self, args: &[&str]) -> Output {
        self.command("git")
            .current_dir(&self.repo)
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs git in the repository with `GIT_INDEX_FILE=index` (a scratch
    /// index), asserting success; returns trimmed stdout.
    pub fn git_with_index(&self, index: &Path, args: &[&str]) -> String {
        let out = self
            .command("git")
            .current_dir(&self.repo)
            .env("GIT_INDEX_FILE", index)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?} failed: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Runs git with stdin, asserting success; returns trimmed stdout.
    pub fn git_stdin(&self, args: &[&str], stdin: &str) -> String {
        let mut cmd = self.command("git");
        cmd.current_dir(&self.repo).args(args);
        let out = output_with_stdin(cmd, stdin);
        assert!(out.status.success(), "git {args:?} failed");
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    }

    /// The (major, minor) version of the git on `PATH`.
    pub fn git_version(&self) -> (u32, u32) {
        let text = self.git(&["version"]);
        let mut numbers = text
            .trim_start_matches("git version ")
            .split('.')
            .map(|n| n.parse::<u32>().unwrap_or(0));
        (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
    }

    /// Writes a file in the worktree, creating directories.
    pub fn write(&self, rel: &str, content: &str) {
        let p = self.repo.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    /// Writes, stages and commits one file with hooks bypassed.
    pub fn commit_file(&self, rel: &str, content: &str, message: &str) -> String {
        self.write(rel, content);
        self.git_nohooks(&["add", "--", rel]);
        self.git_nohooks(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Writes a grant file into the sandbox root.
    pub fn grant(&self, paths: &[&str], min: u32, max: u32) -> PathBuf {
        let path = self.root.join("grant.json");
        let doc = serde_json::json!({"repository_grant": {
            "version": "1", "allowed_paths": paths,
            "commit_count": {"min": min, "max": max}, "publish": false}});
        std::fs::write(&path, doc.to_string()).unwrap();
        path
    }

    /// Runs the grantguard binary in the repository directory.
    pub fn grantguard(&self, args: &[&str]) -> Output {
        self.command(env!("CARGO_BIN_EXE_grantguard"))
            .current_dir(&self.repo)
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs `grantguard arm` of the repository into `state`.
    pub fn arm_output(&self, grant: &Path, state: &Path) -> Output {
        self.arm_worktree(&self.repo, grant, state)
    }

    /// Runs `grantguard arm` of the worktree at `dir` (a linked one, say)
    /// into `state`.
    pub fn arm_worktree(&self, dir: &Path, grant: &Path, state: &Path) -> Output {
        self.grantguard(&[
            "arm",
            "--repo",
            dir.to_str().unwrap(),
            "--grant",
            grant.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ])
    }

    /// The command `verify --state <state> --json`, run in the repository.
    pub fn verify_command(&self, state: &Path) -> Command {
        let mut cmd = self.command(env!("CARGO_BIN_EXE_grantguard"));
        cmd.current_dir(&self.repo)
            .args(["verify", "--state", state.to_str().unwrap(), "--json"]);
        cmd
    }

    /// Runs `verify --json` of `state` (another worktree's, say): the exit
    /// code and the result, checked against the ToolResult schema.
    #[allow(dead_code)]
    pub fn verify_state(&self, state: &Path) -> (i32, Value) {
        let out = self.verify_command(state).output().unwrap();
        (out.status.code().unwrap(), tool_result(&out))
    }

    /// The path of the loose object `id` (hex) in the repository's store.
    #[allow(dead_code)]
    pub fn loose_object(&self, id: &str) -> PathBuf {
        self.git_dir().join("objects").join(&id[..2]).join(&id[2..])
    }

    /// Arms the repository under `grant`, asserting success.
    pub fn arm(&self, grant: &Path) {
        let out = self.arm_output(grant, &self.state);
        assert!(
            out.status.success(),
            "arm failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `verify --json`; returns the exit code and the parsed result.
    pub fn verify(&self) -> (i32, Value) {
        let out = self.grantguard(&["verify", "--state", self.state.to_str().unwrap(), "--json"]);
        let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "verify printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap(), result)
    }

    /// The `.git` directory of the repository.
    pub fn git_dir(&self) -> PathBuf {
        self.repo.join(".git")
    }

    /// The hub `arm` created for this sandbox's repository (under the
    /// sandbox's HOME), if any.
    #[allow(dead_code)]
    pub fn hub(&self) -> Option<PathBuf> {
        let root = self.home.join(".local/state/grantguard/hubs");
        let mut dirs = std::fs::read_dir(root).ok()?.map(|e| e.unwrap().path());
        let hub = dirs.next()?;
        assert!(dirs.next().is_none(), "more than one hub");
        Some(hub)
    }

    /// The directory of the hook stubs git runs while armed.
    #[allow(dead_code)]
    pub fn stubs(&self) -> PathBuf {
        self.hub().expect("armed: a hub exists").join("hooks")
    }
}

/// Writes `task.json` in the sandbox root: a TaskSpec that edits the docs
/// under a grant of `docs/` and exactly one commit (what the restore tests
/// run).
pub fn docs_task(sb: &Sandbox) -> PathBuf {
    let task = sb.root.join("task.json");
    let spec = serde_json::json!({"id": "edit-docs", "title": "Edit the docs",
        "objective": "Improve the guide", "task_type": "change",
        "required_capabilities": ["repo.read"], "side_effect_class": "reversible",
        "risk_class": "low", "worker": "coder",
        "repository_grant": {"version": "1", "allowed_paths": ["docs/"],
            "commit_count": {"min": 1, "max": 1}, "publish": false}});
    std::fs::write(&task, spec.to_string()).unwrap();
    task
}

/// Runs `cmd` with `stdin` piped in, capturing stdout and stderr.
pub fn output_with_stdin(mut cmd: Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A child that exits without reading its input is fine.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

/// `text` (a `git ls-tree` listing or `packed-refs`) with every line that
/// ends in `suffix` replaced by `line`; each line ends in a newline.
pub fn replace_lines_ending(text: &str, suffix: &str, line: &str) -> String {
    text.lines()
        .map(|l| {
            if l.ends_with(suffix) {
                format!("{line}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// The messages of `result`'s violations, in order.
pub fn violation_messages(result: &Value) -> Vec<String> {
    result["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["message"].as_str().unwrap().to_owned())
        .collect()
}

/// The rule ids of a result's violations, sorted and unique.
pub fn rules(result: &Value) -> Vec<String> {
    let mut out: Vec<String> = result["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["rule"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Asserts that verify accepted.
#[track_caller]
pub fn assert_accepted(code: i32, result: &Value) {
    assert_eq!(
        (code, result["status"].as_str()),
        (0, Some("succeeded")),
        "expected acceptance, got {result:#}"
    );
}

/// Asserts that verify rejected with exactly these rules.
#[track_caller]
pub fn assert_rejected(code: i32, result: &Value, expected: &[&str]) {
    assert_eq!(code, 1, "expected exit 1, got {code}: {result:#}");
    assert_eq!(result["status"], "failed_permanent", "{result:#}");
    assert_eq!(rules(result), expected, "{result:#}");
}

/// Rebuilds the agent's end state from a `preserved/<run id>/` directory
/// alone, in `checkout` (a fresh clone of the baseline, submodules checked
/// out), step by step as "Rebuilding preserved work" in
/// docs/guide/preserved-work.md says.
pub fn rebuild_preserved(sb: &Sandbox, preserved: &Path, checkout: &Path) {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(preserved.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["schema"], "grantguard.preserved/1");
    let text = |v: &Value| v.as_str().map(str::to_owned);
    // 1. The commits.
    let bundle = preserved.join(manifest["bundle"].as_str().unwrap());
    sb.run_git(
        checkout,
        &[
            "fetch",
            "-q",
            "--no-tags",
            "--no-recurse-submodules",
            bundle.to_str().unwrap(),
            "refs/grantguard/*:refs/grantguard/*",
        ],
    );
    // 2. The branch.
    if let Some(branch) = text(&manifest["branch"]) {
        match text(&manifest["branch_tip"]) {
            Some(tip) => {
                sb.run_git(checkout, &["update-ref", &branch, &tip]);
            }
            None => {
                let _ = sb
                    .command("git")
                    .current_dir(checkout)
                    .args(["update-ref", "-d", &branch])
                    .output();
            }
        }
    }
    // 3. HEAD.
    let head = &manifest["head"];
    match (text(&head["ref"]), text(&head["commit"])) {
        (Some(r), commit) => {
            if Some(&r) != text(&manifest["branch"]).as_ref()
                && let Some(c) = commit
            {
                sb.run_git(checkout, &["update-ref", &r, &c]);
            }
            sb.run_git(checkout, &["symbolic-ref", "HEAD", &r]);
        }
        (None, Some(c)) => {
            sb.run_git(checkout, &["update-ref", "--no-deref", "HEAD", &c]);
        }
        (None, None) => panic!("a detached HEAD without a commit"),
    }
    // 4. The index.
    sb.run_git(
        checkout,
        &["read-tree", manifest["index_commit"].as_str().unwrap()],
    );
    // 5. The worktree: remove, then copy the raw entries in.
    let remove = std::fs::read(preserved.join(manifest["remove"].as_str().unwrap())).unwrap();
    for rel in remove.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        use std::os::unix::ffi::OsStrExt;
        let p = checkout.join(std::ffi::OsStr::from_bytes(rel));
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p).unwrap(),
            Ok(_) => std::fs::remove_file(&p).unwrap(),
            Err(_) => {}
        }
    }
    let copies = preserved.join(manifest["worktree"].as_str().unwrap());
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", copies.display()))
        .arg(checkout)
        .status()
        .unwrap();
    assert!(status.success());
    // 6. Each submodule, the same way in its checkout.
    for sub in manifest["submodules"].as_array().unwrap() {
        rebuild_preserved(
            sb,
            &preserved.join(sub["dir"].as_str().unwrap()),
            &checkout.join(sub["path"].as_str().unwrap()),
        );
    }
    // 7. The other refs the agent changed.
    for (n, r) in manifest["refs"].as_array().unwrap().iter().enumerate() {
        let name = r["name"].as_str().unwrap();
        match r["agent"].as_str() {
            Some(v) if v.starts_with("ref:") => {
                sb.run_git(
                    checkout,
                    &["symbolic-ref", name, v.trim_start_matches("ref:")],
                );
            }
            Some(_) => {
                sb.run_git(
                    checkout,
                    &["update-ref", name, &format!("refs/grantguard/ref/{n}")],
                );
            }
            None => {
                sb.run_git(checkout, &["update-ref", "-d", name]);
            }
        }
    }
    // 8. Stat data only; then drop the helper refs.
    let _ = sb
        .command("git")
        .current_dir(checkout)
        .args(["update-index", "-q", "--refresh"])
        .output();
    let helpers = sb.run_git(
        checkout,
        &["for-each-ref", "--format=%(refname)", "refs/grantguard/"],
    );
    for r in helpers.lines() {
        sb.run_git(checkout, &["update-ref", "-d", r]);
    }
}

/// Where `tests/compat/setup.sh` installs the compatibility suite's tools:
/// `$GRANTGUARD_COMPAT_DIR`, else `target/compat` in the checkout. Relative
/// to the manifest, as the script's own default is, never to
/// `CARGO_TARGET_DIR` or one machine's path.
pub fn compat_dir() -> PathBuf {
    std::env::var_os("GRANTGUARD_COMPAT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/compat"))
}

/// Writes `agent.sh` in the sandbox root: `#!/bin/sh`, `set -e`, `body`.
pub fn agent_script(sb: &Sandbox, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = sb.root.join("agent.sh");
    std::fs::write(&path, format!("#!/bin/sh\nset -e\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The command of a `grantguard run --json` of the docs task
/// ([`docs_task`]) on the sandbox's checkout with the state directory
/// `state`, `repo.read` granted and `extra` options, running `agent`.
pub fn docs_run_command(sb: &Sandbox, state: &Path, extra: &[&str], agent: &Path) -> Command {
    let task = docs_task(sb);
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json"])
        .args(extra)
        .arg("--")
        .arg(agent);
    cmd
}

/// [`docs_run_command`] with `--isolate` (the sealed workspace).
pub fn sealed_run_command(sb: &Sandbox, agent: &Path) -> Command {
    docs_run_command(sb, &sb.state, &["--isolate"], agent)
}

/// Runs `cmd` (a `grantguard run --json`) and returns the result it
/// printed ([`tool_result`]).
pub fn run_result(mut cmd: Command) -> Value {
    tool_result(&cmd.output().unwrap())
}

/// The ToolResult a `--json` command printed: its stdout must be exactly
/// one JSON document, and that document must match the published
/// `schemas/tool_result.schema.json` (so every suite that reads results
/// checks the schema on its real outputs).
#[track_caller]
pub fn tool_result(out: &Output) -> Value {
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {:?}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_tool_result_schema(&result);
    result
}

/// Panics unless `result` validates against the published ToolResult
/// schema.
pub fn assert_tool_result_schema(result: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/tool_result.schema.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(result)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "the result does not match schemas/tool_result.schema.json:\n{}\n{result:#}",
        errors.join("\n")
    );
}

/// A bind mount on the machine, undone when dropped (also on a panic): the
/// sealed-workspace tests show a directory under a second path, as a
/// user's environment can.
pub struct BindMount {
    /// Where `source` is seen now.
    pub target: PathBuf,
    _dir: tempfile::TempDir,
}

impl BindMount {
    /// Binds `source` at a fresh temp dir; `None` when `mount` fails.
    pub fn new(source: &Path) -> Option<BindMount> {
        let dir = tempfile::tempdir().ok()?;
        let target = dir.path().canonicalize().ok()?.join("alias");
        std::fs::create_dir(&target).ok()?;
        let out = Command::new("mount")
            .arg("--bind")
            .arg(source)
            .arg(&target)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "mount --bind failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        Some(BindMount { target, _dir: dir })
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let plain = Command::new("umount").arg(&self.target).status();
        if !plain.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.target).status();
        }
    }
}

/// Writes an executable `#!/bin/sh` script at `path` (no `set -e` unless
/// the body says so: each line of an attack says what it tolerates).
pub fn script(path: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// A shell line that runs `attempt` (stderr into the log) and logs
/// `<name> written` or `<name> refused`.
pub fn attempt(log: &Path, name: &str, attempt: &str) -> String {
    let log = log.display();
    format!(
        "if ( {attempt} ) 2>>'{log}'; then echo '{name} written'; else echo '{name} refused'; \
         fi >> '{log}'"
    )
}

/// The file's text, or nothing when it cannot be read.
pub fn read_or_empty(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `git fsck --strict` passes in `dir`.
#[track_caller]
pub fn assert_fsck_clean(sb: &Sandbox, dir: &Path) {
    let out = sb.try_git_in(dir, &["fsck", "--strict", "--no-progress"]);
    assert!(
        out.status.success(),
        "git fsck --strict failed in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Spawns `cmd` with piped output and waits at most `limit`; `None` when
/// it had to be killed (so that a test of a hang never hangs itself).
pub fn bounded(mut cmd: Command, limit: Duration) -> (Option<Output>, Duration) {
    let start = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, start, limit)
}

/// Waits for `child`, started at `start`, until `limit` has passed since;
/// then kills it and answers `None`.
pub fn finish(mut child: Child, start: Instant, limit: Duration) -> (Option<Output>, Duration) {
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = start.elapsed();
    (Some(child.wait_with_output().unwrap()), elapsed)
}

/// Starts `verify` with piped output, to pause at `steps` (one, or several
/// joined by `,`: see `fsutil::pause_point`); returns it and the pause
/// file, which names the step while it is there.
pub fn verify_pausing_at(
    sb: &Sandbox,
    mut verify: std::process::Command,
    steps: &str,
) -> (std::process::Child, std::path::PathBuf) {
    let pause = sb.state.with_extension("paused");
    let child = verify
        .env(
            grantguard::fsutil::PAUSE_ENV,
            format!("{steps}:{}", pause.display()),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, pause)
}

/// The exit code and result of a verify started with piped output.
pub fn result_of(child: std::process::Child) -> (i32, serde_json::Value) {
    let out = child.wait_with_output().unwrap();
    let r = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), r)
}

/// Waits until a process started with `grantguard::fsutil::PAUSE_ENV`
/// has written `pause`, the sign that it stopped at `step` (60 s at most).
pub fn wait_for_pause(pause: &Path, step: &str) {
    let started = Instant::now();
    while !pause.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never reached {step}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {}",
        path.display()
    );
}
