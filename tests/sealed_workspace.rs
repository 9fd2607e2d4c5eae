//! `grantguard run --isolate` with the sealed workspace (the default there,
//! `--workspace sealed`): the agent works on an overlay of the checkout in
//! its own mount namespace, and the host repository changes only when a run
//! is accepted, and then only by the accepted commits (their objects, the
//! branch, its reflog, the index and the files the commits changed).
//!
//! Every test fingerprints the host (every file, directory and symlink of
//! the checkout and its git dirs: path, type, mode, owner and bytes) before
//! and after the run: a rejected run must leave it byte-identical, an
//! accepted one may change nothing but what the import writes. Real git,
//! real kernel (overlayfs, mount and user namespaces), scripted agents.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Sandbox, assert_fsck_clean};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const CAP: &str = "repo.read";
const BIN: &str = env!("CARGO_BIN_EXE_grantguard");
/// A granted change: one commit in `docs/`, hooks and all.
const DOCS_COMMIT: &str = "echo 'better guide' > docs/guide.md && git commit -q -am docs";

// ---------------------------------------------------------------------------
// The host fingerprint.

/// One entry of the host: its type, mode, owner and content (a regular
/// file's SHA-256, a symlink's target, a special file's device number).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    mode: u32,
    uid: u32,
    gid: u32,
    content: String,
}

/// Every entry under the roots (the roots included), by absolute path.
type Fingerprint = BTreeMap<PathBuf, Entry>;

fn fingerprint(roots: &[&Path]) -> Fingerprint {
    fn walk(path: &Path, out: &mut Fingerprint) {
        let meta = std::fs::symlink_metadata(path)
            .unwrap_or_else(|e| panic!("cannot stat {}: {e}", path.display()));
        let ft = meta.file_type();
        let (kind, content) = if ft.is_symlink() {
            let target = std::fs::read_link(path).unwrap();
            ("symlink", target.display().to_string())
        } else if ft.is_dir() {
            ("dir", String::new())
        } else if ft.is_file() {
            let bytes = std::fs::read(path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            ("file", hex(&Sha256::digest(&bytes)))
        } else {
            // Never opened: a fifo would block.
            ("special", format!("rdev {}", meta.rdev()))
        };
        out.insert(
            path.to_path_buf(),
            Entry {
                kind,
                mode: meta.mode(),
                uid: meta.uid(),
                gid: meta.gid(),
                content,
            },
        );
        if ft.is_dir() && is_reftable_stack(path) {
            ref_values(path, out);
        }
        if ft.is_dir() {
            let mut children: Vec<PathBuf> = std::fs::read_dir(path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            children.sort();
            for child in children {
                walk(&child, out);
            }
        }
    }
    let mut out = Fingerprint::new();
    for root in roots {
        walk(root, &mut out);
    }
    out
}

/// Whether `dir` is a git dir's reftable stack (`<git dir>/reftable`).
fn is_reftable_stack(dir: &Path) -> bool {
    dir.file_name().is_some_and(|n| n == "reftable")
        && dir.join("tables.list").is_file()
        && dir.parent().is_some_and(|g| g.join("HEAD").is_file())
}

/// Where the fingerprint keeps the ref values git reads from the reftable
/// stack `<git dir>/reftable`: `<git dir>/reftable.values/<ref name>`, a
/// path that exists nowhere on disk.
fn ref_values_dir(git_dir: &Path) -> PathBuf {
    git_dir.join("reftable.values")
}

/// The refs git reads through the reftable stack `stack` (HEAD and the
/// other root refs included), one fingerprint entry per ref whose content
/// is its value. Any ref update rewrites the stack's tables and
/// `tables.list` (and auto-compaction merges tables), so an import changes
/// those bytes as it changes `packed-refs` or a loose ref file in the files
/// format; what must not change is the value of any ref but the branch,
/// which these entries compare.
fn ref_values(stack: &Path, out: &mut Fingerprint) {
    let git_dir = stack.parent().unwrap();
    let listed = Command::new("git")
        .env_remove("GIT_DIR")
        .env_remove("GIT_COMMON_DIR")
        .env_remove("GIT_WORK_TREE")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .arg("--git-dir")
        .arg(git_dir)
        .args([
            "for-each-ref",
            "--include-root-refs",
            "--format=%(refname)%00%(objectname)%00%(symref)",
        ])
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "git for-each-ref in {}: {}",
        git_dir.display(),
        String::from_utf8_lossy(&listed.stderr)
    );
    let values = ref_values_dir(git_dir);
    let linked = git_dir.join("commondir").is_file();
    for line in String::from_utf8(listed.stdout).unwrap().lines() {
        let mut fields = line.split('\0');
        let (name, id, symref) = (
            fields.next().unwrap(),
            fields.next().unwrap_or_default(),
            fields.next().unwrap_or_default(),
        );
        // A linked worktree's stack holds only its own refs; git lists the
        // shared ones (the common dir's stack, fingerprinted there) too.
        let per_worktree = !name.starts_with("refs/")
            || ["refs/bisect/", "refs/worktree/", "refs/rewritten/"]
                .iter()
                .any(|p| name.starts_with(p));
        if linked && !per_worktree {
            continue;
        }
        let content = if symref.is_empty() {
            id.to_owned()
        } else {
            format!("ref:{symref}")
        };
        out.insert(
            values.join(name),
            Entry {
                kind: "ref",
                mode: 0,
                uid: 0,
                gid: 0,
                content,
            },
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Added,
    Removed,
    Changed,
}

fn diff(before: &Fingerprint, after: &Fingerprint) -> Vec<(PathBuf, Change)> {
    let paths: BTreeSet<&PathBuf> = before.keys().chain(after.keys()).collect();
    paths
        .into_iter()
        .filter_map(|p| match (before.get(p), after.get(p)) {
            (Some(a), Some(b)) if a == b => None,
            (Some(_), Some(_)) => Some((p.clone(), Change::Changed)),
            (None, Some(_)) => Some((p.clone(), Change::Added)),
            (Some(_), None) => Some((p.clone(), Change::Removed)),
            (None, None) => unreachable!(),
        })
        .collect()
}

fn describe(changes: &[(PathBuf, Change)], before: &Fingerprint, after: &Fingerprint) -> String {
    changes
        .iter()
        .map(|(p, c)| {
            format!(
                "  {c:?} {}\n    before: {:?}\n    after:  {:?}",
                p.display(),
                before.get(p),
                after.get(p)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[track_caller]
fn assert_identical(before: &Fingerprint, after: &Fingerprint) {
    let changes = diff(before, after);
    assert!(
        changes.is_empty(),
        "the host changed:\n{}",
        describe(&changes, before, after)
    );
}

/// What an import may change in a host: the branch (loose, or
/// `packed-refs` if it was packed there), its reflog and HEAD's, the
/// worktree's index, new files under the objects directory, and the
/// worktree files the accepted commits changed (and the directories that
/// hold them).
struct Allowed {
    /// May be added or changed.
    files: BTreeSet<PathBuf>,
    /// May be added, changed or removed.
    worktree: BTreeSet<PathBuf>,
    /// Directories that may be added or removed (parents of the above).
    dirs: BTreeSet<PathBuf>,
    /// Anything new under it may be added; nothing there may change.
    objects: PathBuf,
    /// Reftable stacks: their tables and `tables.list` may come, go and
    /// change (any ref update and compaction rewrites them); the refs' values
    /// are compared instead (see [`ref_values`]).
    ref_stacks: Vec<PathBuf>,
}

impl Allowed {
    fn check(&self, changes: &[(PathBuf, Change)]) -> Vec<(PathBuf, Change)> {
        changes
            .iter()
            .filter(|(p, c)| {
                let ok = (self.files.contains(p) && *c != Change::Removed)
                    || self.worktree.contains(p)
                    || (self.dirs.contains(p) && *c != Change::Changed)
                    || (p.starts_with(&self.objects) && p != &self.objects && *c == Change::Added)
                    || self
                        .ref_stacks
                        .iter()
                        .any(|stack| p.starts_with(stack) && p != stack);
                !ok
            })
            .cloned()
            .collect()
    }
}

/// Where a checkout's git data lives.
struct Layout {
    work_dir: PathBuf,
    git_dir: PathBuf,
    common_dir: PathBuf,
}

impl Layout {
    fn of(sb: &Sandbox, work_dir: &Path) -> Layout {
        let abs = |arg: &str| {
            PathBuf::from(
                sb.run_git(work_dir, &["rev-parse", "--path-format=absolute", arg])
                    .trim(),
            )
        };
        Layout {
            work_dir: work_dir.to_path_buf(),
            git_dir: abs("--git-dir"),
            common_dir: abs("--git-common-dir"),
        }
    }

    /// What importing `baseline..tip` onto `branch` (`refs/heads/...`) may
    /// change in this checkout.
    fn allowed(&self, sb: &Sandbox, branch: &str, baseline: &str, tip: &str) -> Allowed {
        let mut files = BTreeSet::new();
        files.insert(self.git_dir.join("index"));
        files.insert(self.git_dir.join("logs/HEAD"));
        files.insert(self.common_dir.join("logs").join(branch));
        files.insert(self.common_dir.join(branch));
        // In a reftable repository: the branch's value, as git reads it
        // through the stack of the common dir and of this worktree's git dir.
        files.insert(ref_values_dir(&self.common_dir).join(branch));
        files.insert(ref_values_dir(&self.git_dir).join(branch));
        let packed = self.common_dir.join("packed-refs");
        if std::fs::read_to_string(&packed).is_ok_and(|t| t.contains(branch)) {
            files.insert(packed);
        }
        let names = sb.run_git(
            &self.work_dir,
            &["diff", "--name-only", "--no-renames", "-z", baseline, tip],
        );
        let worktree: BTreeSet<PathBuf> = names
            .split('\0')
            .filter(|n| !n.is_empty())
            .map(|n| self.work_dir.join(n))
            .collect();
        let mut dirs = BTreeSet::new();
        for p in files.iter().chain(&worktree) {
            let mut at = p.parent();
            while let Some(d) = at {
                // Only new directories (or ones the commits emptied) come
                // and go: a `Changed` directory (its mode) is never allowed.
                dirs.insert(d.to_path_buf());
                if d == self.work_dir || d == self.common_dir {
                    break;
                }
                at = d.parent();
            }
        }
        Allowed {
            files,
            worktree,
            dirs,
            objects: self.common_dir.join("objects"),
            ref_stacks: vec![
                self.common_dir.join("reftable"),
                self.git_dir.join("reftable"),
            ],
        }
    }
}

#[track_caller]
fn assert_only_import_changes(before: &Fingerprint, after: &Fingerprint, allowed: &Allowed) {
    let changes = diff(before, after);
    let unexpected = allowed.check(&changes);
    assert!(
        unexpected.is_empty(),
        "the import changed more than the accepted commits:\n{}",
        describe(&unexpected, before, after)
    );
}

// ---------------------------------------------------------------------------
// Tasks, agents and runs.

/// Writes a TaskSpec granting `paths` and 1 to `max` commits to `<root>/<name>.json`.
fn task(sb: &Sandbox, name: &str, paths: &[&str], max: u32) -> PathBuf {
    let spec = json!({"id": name, "title": "Edit the docs",
        "objective": "Improve the guide", "task_type": "change",
        "required_capabilities": [CAP], "side_effect_class": "reversible",
        "risk_class": "low", "worker": "coder",
        "repository_grant": {"version": "1", "allowed_paths": paths,
            "commit_count": {"min": 1, "max": max}, "publish": false}});
    let path = sb.root.join(format!("{name}.json"));
    std::fs::write(&path, spec.to_string()).unwrap();
    path
}

/// Writes the agent script `<root>/<name>.sh` (no `set -e`: each line says
/// what it tolerates).
fn agent(sb: &Sandbox, name: &str, body: &str) -> PathBuf {
    let path = sb.root.join(format!("{name}.sh"));
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `grantguard run --json` of `task` on `repo` into `state`, `extra`
/// before `--`.
fn run_cmd(
    sb: &Sandbox,
    repo: &Path,
    state: &Path,
    task: &Path,
    extra: &[&str],
    agent: &Path,
) -> Command {
    let mut cmd = sb.command(BIN);
    cmd.current_dir(&sb.root)
        .arg("run")
        .arg("--task")
        .arg(task)
        .arg("--repo")
        .arg(repo)
        .arg("--state")
        .arg(state)
        .args(["--capability", CAP, "--json"])
        .args(extra)
        .arg("--")
        .arg(agent);
    cmd
}

struct Run {
    code: i32,
    r: Value,
    stderr: String,
}

fn parse(out: &Output) -> Run {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let r: Value = common::tool_result(out);
    Run {
        code: out.status.code().unwrap_or(-1),
        r,
        stderr,
    }
}

/// A sealed run (`--isolate`, the default workspace) of `task` on the
/// sandbox's checkout.
fn sealed_run(sb: &Sandbox, task: &Path, extra: &[&str], agent: &Path) -> Run {
    let mut args = vec!["--isolate"];
    args.extend_from_slice(extra);
    parse(
        &run_cmd(sb, &sb.repo, &sb.state, task, &args, agent)
            .output()
            .unwrap(),
    )
}

fn rules(r: &Value) -> Vec<String> {
    common::rules(r)
}

/// A rejected (or cancelled) sealed run: non-zero exit, not succeeded,
/// nothing imported, the workspace kept on disk and named in the result,
/// the host byte-identical and fsck-clean.
#[track_caller]
fn assert_sealed_off(sb: &Sandbox, run: &Run, before: &Fingerprint, roots: &[&Path]) {
    let after = fingerprint(roots);
    let r = &run.r;
    assert_ne!(run.code, 0, "{r:#}\n{}", run.stderr);
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert_identical(before, &after);
    let ws = &r["evidence"]["workspace"];
    assert_eq!(ws["mode"], "sealed", "{r:#}");
    assert_eq!(ws["kept"], true, "{r:#}");
    assert!(ws.get("import").is_none(), "{r:#}");
    let dir = Path::new(ws["dir"].as_str().expect("the workspace dir is named"));
    assert!(dir.is_dir(), "the kept workspace {} is gone", dir.display());
    assert!(dir.starts_with(&sb.state), "{}", dir.display());
    assert_eq!(r["evidence"]["isolation"]["workspace"], "sealed", "{r:#}");
    for root in roots {
        assert_fsck_clean(sb, root);
    }
}

/// An accepted sealed run whose commits were imported onto `branch` of the
/// checkout `layout`: the branch, HEAD and the result's tip agree, the
/// checkout is clean and fsck-clean, and nothing changed in the host but
/// what the import writes. Returns the tip.
#[track_caller]
fn assert_imported(
    sb: &Sandbox,
    run: &Run,
    layout: &Layout,
    branch: &str,
    baseline: &str,
    before: &Fingerprint,
    roots: &[&Path],
) -> String {
    let after = fingerprint(roots);
    let r = &run.r;
    assert_eq!(
        (run.code, r["status"].as_str()),
        (0, Some("succeeded")),
        "{r:#}\n{}",
        run.stderr
    );
    let ws = &r["evidence"]["workspace"];
    assert_eq!(ws["mode"], "sealed", "{r:#}");
    assert_eq!(r["evidence"]["isolation"]["workspace"], "sealed", "{r:#}");
    let import = &ws["import"];
    assert_eq!(import["branch"], branch, "{r:#}");
    assert_eq!(import["worktree_updated"], true, "{r:#}");
    let tip = import["tip"].as_str().expect("an imported tip").to_owned();
    assert_eq!(r["evidence"]["commits"]["tip"], tip.as_str(), "{r:#}");
    assert_eq!(
        import["commits"], r["evidence"]["commits"]["count"],
        "{r:#}"
    );
    assert_ne!(tip, baseline, "nothing was imported");
    // Imported and in place: the workspace had nothing more, and is gone.
    assert_eq!(ws["kept"], false, "{r:#}");
    let dir = Path::new(ws["dir"].as_str().expect("the workspace dir is named"));
    assert!(!dir.exists(), "{} is still there", dir.display());
    let allowed = layout.allowed(sb, branch, baseline, &tip);
    assert_only_import_changes(before, &after, &allowed);
    // git reads the host only now (status may refresh the index).
    let w = &layout.work_dir;
    assert_eq!(sb.run_git(w, &["rev-parse", branch]).trim(), tip);
    assert_eq!(sb.run_git(w, &["rev-parse", "HEAD"]).trim(), tip);
    assert_eq!(
        sb.run_git(w, &["symbolic-ref", "HEAD"]).trim(),
        branch,
        "HEAD still names the branch"
    );
    assert_eq!(sb.run_git(w, &["status", "--porcelain"]), "", "not clean");
    assert_fsck_clean(sb, w);
    tip
}

fn head(sb: &Sandbox, dir: &Path) -> String {
    sb.run_git(dir, &["rev-parse", "HEAD"]).trim().to_owned()
}

fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------
// Hostile agents: rejected, the host byte-identical, the workspace kept.

#[test]
fn keeps_the_host_identical_when_the_agent_deletes_dot_git() {
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 1);
    let a = agent(
        &sb,
        "agent",
        &format!(
            "{DOCS_COMMIT}\nrm -rf .git 2>/dev/null || true\nrm -rf docs src README.md\nexit 0"
        ),
    );
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    assert_sealed_off(&sb, &run, &before, &[&sb.repo]);
    // What the agent did is still there to look at, in the kept workspace.
    let upper =
        Path::new(run.r["evidence"]["workspace"]["dir"].as_str().unwrap()).join("work/upper");
    assert!(upper.is_dir(), "{}", upper.display());
}

#[test]
fn rejects_an_ungranted_commit_made_around_the_hooks_and_keeps_the_host_identical() {
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 3);
    let a = agent(
        &sb,
        "agent",
        "set -e\necho evil > src/lib.rs\n\
         git -c core.hooksPath=/dev/null commit -q --no-verify -am 'outside the grant'",
    );
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    assert_sealed_off(&sb, &run, &before, &[&sb.repo]);
    assert_eq!(run.r["failure_class"], "verification", "{:#}", run.r);
    assert_eq!(run.r["evidence"]["command"]["exit_code"], 0, "{:#}", run.r);
}

#[test]
fn rejects_history_rewriting_of_the_baseline_and_keeps_the_host_identical() {
    for (name, body) in [
        (
            "amend",
            "git -c core.hooksPath=/dev/null commit -q --no-verify --amend -m rewritten",
        ),
        (
            "reset",
            "git -c core.hooksPath=/dev/null reset -q --hard HEAD~",
        ),
        (
            "reset-and-commit",
            "git -c core.hooksPath=/dev/null reset -q --hard HEAD~ && \
             echo new > docs/new.md && git add docs/new.md && \
             git -c core.hooksPath=/dev/null commit -q --no-verify -m on-the-old-base",
        ),
        (
            "rebase-root",
            // A committer date of its own: the rewritten commits differ
            // from the originals even within the same second.
            "echo x > docs/x.md && git add docs/x.md && git commit -q -m x && \
             GIT_COMMITTER_DATE='2001-01-01T00:00:00Z' \
             git -c core.hooksPath=/dev/null rebase -q --force-rebase --root",
        ),
    ] {
        let sb = Sandbox::new();
        // A second commit, so that HEAD~ exists.
        sb.commit_file("docs/second.md", "second\n", "second");
        let t = task(&sb, "docs", &["docs/"], 3);
        let a = agent(&sb, "agent", &format!("set -e\n{body}"));
        let before = fingerprint(&[&sb.repo]);
        let run = sealed_run(&sb, &t, &[], &a);
        assert_eq!(
            run.r["evidence"]["command"]["exit_code"], 0,
            "{name}: the agent itself failed: {}",
            run.stderr
        );
        assert_ne!(run.r["status"], "succeeded", "{name}: {:#}", run.r);
        assert_sealed_off(&sb, &run, &before, &[&sb.repo]);
    }
}

#[test]
fn keeps_the_host_identical_when_the_agent_tampers_with_git_metadata_objects_and_refs() {
    let sb = Sandbox::new();
    // A loose object of the baseline (the clone has every object loose or
    // packed; make sure one is loose).
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "loose\n");
    sb.git_nohooks(&[
        "update-index",
        "--add",
        "--cacheinfo",
        "100644",
        &blob,
        "docs/loose.md",
    ]);
    sb.git_nohooks(&["commit", "-q", "-m", "loose"]);
    sb.git(&["checkout", "-q", "--", "docs/loose.md"]);
    sb.git(&["tag", "baseline-tag"]);
    sb.git(&["pack-refs", "--all"]);
    let t = task(&sb, "docs", &["docs/"], 3);
    let body = format!(
        "{DOCS_COMMIT}\n\
         echo '[core]\n\thooksPath = /dev/null' > .git/config 2>/dev/null || true\n\
         git config --local core.hooksPath /dev/null 2>/dev/null || true\n\
         rm -rf .git/hooks/* .git/hooks 2>/dev/null || true\n\
         o=.git/objects/$(echo {blob} | cut -c1-2)/$(echo {blob} | cut -c3-)\n\
         chmod u+w \"$o\" 2>/dev/null || true\n\
         printf 'garbage' > \"$o\" 2>/dev/null || true\n\
         for f in .git/objects/pack/*; do chmod u+w \"$f\" 2>/dev/null; printf x >> \"$f\" 2>/dev/null; done\n\
         echo \"{blob} refs/heads/main\" > .git/packed-refs 2>/dev/null || true\n\
         git rev-parse HEAD > .git/refs/heads/other 2>/dev/null || true\n\
         mkdir -p .git/refs/tags && git rev-parse HEAD > .git/refs/tags/x 2>/dev/null || true\n\
         head -c 4096 /dev/urandom > .git/index 2>/dev/null || true\n\
         echo 'ref: refs/heads/other' > .git/HEAD 2>/dev/null || true\n\
         echo '* filter=evil' > .git/info/attributes 2>/dev/null || true\n\
         exit 0"
    );
    let a = agent(&sb, "agent", &body);
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    assert_sealed_off(&sb, &run, &before, &[&sb.repo]);
}

#[test]
fn keeps_the_host_identical_when_the_agent_plants_special_files_and_symlinks() {
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 3);
    let body = format!(
        "{DOCS_COMMIT}\n\
         mkfifo docs/fifo .git/fifo .git/refs/heads/fifo 2>/dev/null || true\n\
         mknod docs/dev c 1 3 2>/dev/null || true\n\
         mknod .git/dev c 1 3 2>/dev/null || true\n\
         rm -f .git/config 2>/dev/null || true\n\
         ln -sf /etc/passwd .git/config 2>/dev/null || true\n\
         ln -s /etc/passwd docs/passwd 2>/dev/null || true\n\
         ln -s /etc/passwd .git/description.link 2>/dev/null || true\n\
         rm -f .git/description && ln -s /etc/passwd .git/description 2>/dev/null || true\n\
         rm -f .git/HEAD && ln -s refs/heads/main .git/HEAD 2>/dev/null || true\n\
         exit 0"
    );
    let a = agent(&sb, "agent", &body);
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    assert_sealed_off(&sb, &run, &before, &[&sb.repo]);
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd);
}

#[test]
fn keeps_the_host_identical_when_the_agent_reaches_for_the_host_through_proc() {
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 3);
    let host = sb.repo.display().to_string();
    let cwd_rel = sb
        .repo
        .strip_prefix(&sb.root)
        .unwrap()
        .display()
        .to_string();
    let log = sb.root.join("probe.log");
    let try_write = |name: &str, target: &str| {
        format!(
            "if ( echo pwned > \"{target}/marker-{name}\" && echo pwned > \"{target}/.git/marker-{name}\" && \
             echo pwned >> \"{target}/README.md\" ) 2>/dev/null; then echo '{name} written'; \
             else echo '{name} refused'; fi >> '{}'",
            log.display()
        )
    };
    // $PPID is grantguard (the command's parent); its parent is this test.
    let body = [
        DOCS_COMMIT.to_owned(),
        "GG=$PPID".to_owned(),
        "TEST=$(awk '/^PPid:/ {print $2}' /proc/$GG/status)".to_owned(),
        format!("echo \"grantguard $GG test $TEST\" >> '{}'", log.display()),
        try_write("init", &format!("/proc/1/root{host}")),
        try_write("grantguard", &format!("/proc/$GG/root{host}")),
        try_write("grantguard-cwd", &format!("/proc/$GG/cwd/{cwd_rel}")),
        try_write("test", &format!("/proc/$TEST/root{host}")),
        try_write("test-cwd", &format!("/proc/$TEST/cwd/{cwd_rel}")),
        // These two are the workspace itself: the writes land there.
        try_write("self-cwd", "/proc/self/cwd"),
        try_write("self-root", &format!("/proc/self/root{host}")),
        // A task failing on its own: whatever landed in the workspace is
        // not imported.
        "exit 3".to_owned(),
    ]
    .join("\n");
    let a = agent(&sb, "agent", &body);
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    for name in [
        "init",
        "grantguard",
        "grantguard-cwd",
        "test",
        "test-cwd",
        "self-cwd",
        "self-root",
    ] {
        assert!(
            sb.repo
                .join(format!("marker-{name}"))
                .symlink_metadata()
                .is_err()
                && sb
                    .repo
                    .join(format!(".git/marker-{name}"))
                    .symlink_metadata()
                    .is_err(),
            "the marker through {name} reached the host:\n{log}"
        );
    }
    // The ways out are closed (another process's root or cwd needs ptrace
    // access, which a command without capabilities lacks), and the ways
    // in are the workspace.
    for name in ["init", "grantguard", "grantguard-cwd", "test", "test-cwd"] {
        assert!(log.contains(&format!("{name} refused")), "{name}:\n{log}");
    }
    for name in ["self-cwd", "self-root"] {
        assert!(log.contains(&format!("{name} written")), "{name}:\n{log}");
    }
    assert_sealed_off(&sb, &run, &before, &[&sb.repo]);
    assert_eq!(run.r["evidence"]["command"]["exit_code"], 3, "{:#}", run.r);
    // The workspace got them, and keeps them.
    let upper =
        Path::new(run.r["evidence"]["workspace"]["dir"].as_str().unwrap()).join("work/upper");
    assert!(upper.join("marker-self-cwd").exists(), "{log}");
}

#[test]
fn keeps_the_host_identical_when_a_run_times_out() {
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 3);
    let a = agent(&sb, "agent", &format!("{DOCS_COMMIT}\nsleep 30"));
    let before = fingerprint(&[&sb.repo]);
    let started = Instant::now();
    let run = sealed_run(&sb, &t, &["--timeout", "2"], &a);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(run.r["status"], "cancelled", "{:#}", run.r);
    assert_eq!(run.code, 130, "{:#}", run.r);
    assert_sealed_off(&sb, &run, &before, &[&sb.repo]);
}

/// A hard link is one file under two names: one outside the checkout
/// (where the agent may write) shares its bytes with the host's objects.
/// `git clone` of a local path makes exactly that (its objects are hard
/// links of the origin's).
#[test]
fn keeps_the_host_identical_when_the_agent_writes_through_a_hard_link_to_a_host_object() {
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 3);
    let origin = sb.origin.display().to_string();
    let body = format!(
        "{DOCS_COMMIT}\n\
         for f in $(find '{origin}/objects' -type f); do chmod u+w \"$f\"; printf garbage > \"$f\"; done\n\
         exit 3"
    );
    let a = agent(&sb, "agent", &body);
    let before = fingerprint(&[&sb.repo]);
    let linked = before
        .keys()
        .filter(|p| p.starts_with(sb.repo.join(".git/objects")))
        .any(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.nlink() > 1));
    assert!(linked, "the clone has no hard-linked object (the premise)");
    let run = sealed_run(&sb, &t, &[], &a);
    assert_sealed_off(&sb, &run, &before, &[&sb.repo]);
}

// ---------------------------------------------------------------------------
// Legitimate agents: accepted, and only the accepted commits imported.

#[test]
fn accepts_the_demo_agent_and_imports_only_its_commit() {
    let sb = Sandbox::new();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let layout = Layout::of(&sb, &sb.repo);
    let baseline = head(&sb, &sb.repo);
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &demo.join("task.json"), &[], &demo.join("agent.sh"));
    let tip = assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&sb.repo],
    );
    assert_eq!(run.r["evidence"]["workspace"]["import"]["commits"], 1);
    assert_eq!(
        sb.git(&["diff", "--name-only", &baseline, &tip]),
        "docs/guide.md"
    );
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("docs/guide.md")).unwrap(),
        "guide\n\nA better guide, written by the demo agent.\n"
    );
}

#[test]
fn accepts_and_imports_after_a_gc_with_bitmaps_and_bloom_filters_in_the_workspace() {
    let sb = Sandbox::new();
    let layout = Layout::of(&sb, &sb.repo);
    let baseline = head(&sb, &sb.repo);
    let t = task(&sb, "docs", &["docs/"], 3);
    let body = format!(
        "set -e\n{DOCS_COMMIT}\necho more > docs/more.md\ngit add docs/more.md\n\
         git commit -q -m more\n\
         git -c repack.writeBitmaps=true -c gc.writeCommitGraph=true \
         -c commitGraph.changedPaths=true -c core.commitGraph=true gc -q --prune=now\n\
         git commit-graph write --reachable --changed-paths\n\
         ls .git/objects/pack/*.bitmap .git/objects/info/commit-graph* >&2"
    );
    let a = agent(&sb, "agent", &body);
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    assert!(run.stderr.contains(".bitmap"), "{}", run.stderr);
    let tip = assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&sb.repo],
    );
    assert_eq!(run.r["evidence"]["workspace"]["import"]["commits"], 2);
    assert_eq!(sb.git(&["log", "-1", "--format=%s", &tip]), "more");
    // The host got neither the bitmap nor the commit-graph.
    let after = fingerprint(&[&sb.repo]);
    assert!(
        !after.keys().any(|p| {
            let s = p.to_string_lossy();
            s.ends_with(".bitmap") || s.contains("commit-graph")
        }),
        "a gc artefact of the workspace reached the host"
    );
}

#[test]
fn accepts_and_imports_after_a_plain_gc_and_pack_refs_in_the_workspace() {
    // The workspace's objects all packed (the host's loose ones whited out
    // in the upper layer), its refs packed: the import reads the workspace
    // through git, whatever its layout.
    let sb = Sandbox::new();
    let layout = Layout::of(&sb, &sb.repo);
    let baseline = head(&sb, &sb.repo);
    let t = task(&sb, "docs", &["docs/"], 3);
    let body = format!(
        "set -e\n{DOCS_COMMIT}\necho more > docs/more.md\ngit add docs/more.md\n\
         git commit -q -m more\ngit gc -q --prune=now 2>/dev/null\ngit pack-refs --all\n\
         test -z \"$(find .git/objects -type f -path '*/objects/??/*')\""
    );
    let a = agent(&sb, "agent", &body);
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    assert_eq!(
        run.r["evidence"]["command"]["exit_code"], 0,
        "{}",
        run.stderr
    );
    assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&sb.repo],
    );
    assert_eq!(run.r["evidence"]["workspace"]["import"]["commits"], 2);
}

/// A file the accepted commits change whose stat data differs from the
/// host's index, its content unchanged (touched, restored from a backup,
/// chowned): nothing would be overwritten, as `git checkout` (which
/// refreshes first) agrees.
#[test]
fn accepts_an_import_over_a_host_file_that_was_only_touched() {
    let sb = Sandbox::new();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let layout = Layout::of(&sb, &sb.repo);
    let baseline = head(&sb, &sb.repo);
    let touch = Command::new("touch")
        .args(["-d", "2001-01-01 00:00:00"])
        .arg(sb.repo.join("docs/guide.md"))
        .status()
        .unwrap();
    assert!(touch.success());
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &demo.join("task.json"), &[], &demo.join("agent.sh"));
    assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&sb.repo],
    );
}

#[test]
fn accepts_and_imports_into_a_sha256_host() {
    let sb = Sandbox::with_object_format("sha256");
    assert_eq!(sb.git(&["rev-parse", "--show-object-format"]), "sha256");
    let layout = Layout::of(&sb, &sb.repo);
    let baseline = head(&sb, &sb.repo);
    let t = task(&sb, "docs", &["docs/"], 3);
    let a = agent(&sb, "agent", &format!("set -e\n{DOCS_COMMIT}"));
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    let tip = assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&sb.repo],
    );
    assert_eq!(tip.len(), 64, "{tip}");
}

#[test]
fn accepts_a_linked_worktree_and_moves_only_its_branch() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "feature", "../wt"]);
    let main_before = sb.git(&["rev-parse", "refs/heads/main"]);
    let layout = Layout::of(&sb, &wt);
    assert_ne!(layout.git_dir, layout.common_dir);
    let baseline = head(&sb, &wt);
    let t = task(&sb, "docs", &["docs/"], 3);
    let a = agent(&sb, "agent", &format!("set -e\n{DOCS_COMMIT}"));
    let roots = [sb.repo.as_path(), wt.as_path()];
    let before = fingerprint(&roots);
    let run = parse(
        &run_cmd(&sb, &wt, &sb.state, &t, &["--isolate"], &a)
            .output()
            .unwrap(),
    );
    assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/feature",
        &baseline,
        &before,
        &roots,
    );
    assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), main_before);
    assert_eq!(sb.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("docs/guide.md")).unwrap(),
        "guide\n",
        "the main worktree's files changed"
    );
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
}

#[test]
fn accepts_two_parallel_runs_in_two_linked_worktrees_and_imports_both() {
    let sb = Sandbox::new();
    let mut runs = Vec::new();
    for n in ["one", "two"] {
        let wt = sb.root.join(format!("wt-{n}"));
        sb.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            &format!("feature-{n}"),
            wt.to_str().unwrap(),
        ]);
        runs.push((n, wt));
    }
    let roots: Vec<&Path> = std::iter::once(sb.repo.as_path())
        .chain(runs.iter().map(|(_, wt)| wt.as_path()))
        .collect();
    let baseline = head(&sb, &sb.repo);
    let before = fingerprint(&roots);
    let mut children = Vec::new();
    for (n, wt) in &runs {
        let other = if *n == "one" { "two" } else { "one" };
        let t = task(&sb, &format!("docs-{n}"), &["docs/"], 3);
        let started = |n: &str| sb.root.join(format!("started-{n}"));
        let overlapped = sb.root.join(format!("overlapped-{n}"));
        // Each agent says it started, works a second, and notes whether
        // the other one had started meanwhile: the two runs overlap.
        let a = agent(
            &sb,
            &format!("agent-{n}"),
            &format!(
                "set -e\ntouch '{}'\nsleep 1\nif [ -e '{}' ]; then touch '{}'; fi\n\
                 echo '{n}' > docs/{n}.md\ngit add docs/{n}.md\ngit commit -q -m '{n}'",
                started(n).display(),
                started(other).display(),
                overlapped.display()
            ),
        );
        let state = sb.root.join(format!("state-{n}"));
        let child = run_cmd(&sb, wt, &state, &t, &["--isolate"], &a)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        children.push((*n, wt.clone(), overlapped, child));
    }
    let finished: Vec<(&str, PathBuf, PathBuf, Run)> = children
        .into_iter()
        .map(|(n, wt, overlapped, child)| {
            (n, wt, overlapped, parse(&child.wait_with_output().unwrap()))
        })
        .collect();
    let summary: String = finished
        .iter()
        .map(|(n, _, _, run)| format!("{n}: {}\n", run.stderr))
        .collect();
    let mut tips = Vec::new();
    for (n, wt, overlapped, run) in finished {
        assert_eq!(
            (run.code, run.r["status"].as_str()),
            (0, Some("succeeded")),
            "{n}: {:#}\n{summary}",
            run.r,
        );
        assert!(overlapped.exists(), "{n}: the runs did not overlap");
        let branch = format!("refs/heads/feature-{n}");
        let import = &run.r["evidence"]["workspace"]["import"];
        assert_eq!(import["branch"], branch.as_str(), "{:#}", run.r);
        let tip = import["tip"].as_str().unwrap().to_owned();
        tips.push((n, wt, branch, tip));
    }
    let after = fingerprint(&roots);
    // Everything that changed is one of the two imports'.
    let layouts: Vec<(Layout, Allowed)> = tips
        .iter()
        .map(|(_, wt, branch, tip)| {
            let layout = Layout::of(&sb, wt);
            let allowed = layout.allowed(&sb, branch, &baseline, tip);
            (layout, allowed)
        })
        .collect();
    let changes = diff(&before, &after);
    let unexpected: Vec<(PathBuf, Change)> = changes
        .iter()
        .filter(|c| {
            layouts
                .iter()
                .all(|(_, allowed)| !allowed.check(std::slice::from_ref(*c)).is_empty())
        })
        .cloned()
        .collect();
    assert!(
        unexpected.is_empty(),
        "the imports changed more than their commits:\n{}",
        describe(&unexpected, &before, &after)
    );
    for (n, wt, branch, tip) in &tips {
        assert_eq!(sb.git(&["rev-parse", branch]), *tip);
        assert_eq!(head(&sb, wt), *tip);
        assert_eq!(
            std::fs::read_to_string(wt.join(format!("docs/{n}.md"))).unwrap(),
            format!("{n}\n")
        );
        assert_eq!(sb.run_git(wt, &["status", "--porcelain"]), "", "{n}");
        assert_eq!(
            sb.git(&["log", "--format=%s", &format!("{baseline}..{tip}")]),
            *n
        );
    }
    assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), baseline);
    assert_fsck_clean(&sb, &sb.repo);
}

/// Runs a granted docs commit whose agent sleeps 2 s after committing,
/// while the test, outside, commits `host_commit` on the host's branch;
/// returns that commit, the run, and the host's fingerprint right after
/// the commit.
fn run_while_the_host_branch_moves(
    sb: &Sandbox,
    host_commit: impl FnOnce(&Sandbox) -> String,
) -> (String, Run, Fingerprint) {
    let t = task(sb, "docs", &["docs/"], 3);
    let started = sb.root.join("started");
    let a = agent(
        sb,
        "agent",
        &format!(
            "set -e\n{DOCS_COMMIT}\ntouch '{}'\nsleep 2",
            started.display()
        ),
    );
    let child = run_cmd(sb, &sb.repo, &sb.state, &t, &["--isolate"], &a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&started, Duration::from_secs(10));
    // The user commits on the host's branch while the agent works.
    let commit = host_commit(sb);
    let before = fingerprint(&[&sb.repo]);
    let run = parse(&child.wait_with_output().unwrap());
    (commit, run, before)
}

#[track_caller]
fn assert_import_conflict(sb: &Sandbox, host_commit: &str, run: &Run, before: &Fingerprint) {
    assert!(
        rules(&run.r).contains(&"import_conflict".to_owned()),
        "{:#}\n{}",
        run.r,
        run.stderr
    );
    assert_eq!(run.r["failure_class"], "conflict", "{:#}", run.r);
    assert_eq!(run.r["evidence"]["verify"], "accepted", "{:#}", run.r);
    assert_sealed_off(sb, run, before, &[&sb.repo]);
    assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), host_commit);
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
}

#[test]
fn rejects_the_import_with_a_conflict_when_the_host_branch_moves_during_the_run() {
    let sb = Sandbox::new();
    let (host_commit, run, before) = run_while_the_host_branch_moves(&sb, |sb| {
        sb.git_nohooks(&["commit", "-q", "--allow-empty", "-m", "host"]);
        sb.git(&["rev-parse", "HEAD"])
    });
    assert_import_conflict(&sb, &host_commit, &run, &before);
}

/// The same with a commit that changes a file of the host's worktree (one
/// the agent never touches). overlayfs shows changes to the live host
/// checkout to the workspace (documented: leave the checkout alone during
/// a sealed run), so verify may reject the agent for a file it never
/// touched; the run then says the host moved (`import_conflict`), nothing
/// is imported, and the host keeps its own commit.
#[test]
fn rejects_and_names_the_host_change_when_the_host_commits_a_file_during_the_run() {
    let sb = Sandbox::new();
    let (host_commit, run, _before) = run_while_the_host_branch_moves(&sb, |sb| {
        sb.commit_file("README.md", "# demo, edited on the host\n", "host")
    });
    assert!(
        rules(&run.r).contains(&"import_conflict".to_owned()),
        "{:#}\n{}",
        run.r,
        run.stderr
    );
    assert_ne!(run.r["status"], "succeeded", "{:#}", run.r);
    assert!(
        run.r["evidence"]["workspace"].get("import").is_none(),
        "{:#}",
        run.r
    );
    assert_eq!(run.r["evidence"]["workspace"]["kept"], true, "{:#}", run.r);
    assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), host_commit);
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    sb.run_git(&sb.repo, &["fsck", "--strict"]);
}

/// `program` as user and group 65534 (through `setpriv`), with the
/// sandbox's environment.
fn as_nobody(sb: &Sandbox, program: &str) -> Command {
    let mut cmd = sb.command("/usr/bin/setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", program]);
    cmd
}

/// As an unprivileged user (65534, through `setpriv`), the workspace is an
/// overlay in a user namespace (`userxattr`). Needs root to drop to that
/// user; elsewhere it says so and checks nothing.
#[test]
fn accepts_an_unprivileged_sealed_run_and_imports_it() {
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv to run as an unprivileged user");
        return;
    }
    let sb = Sandbox::new();
    std::fs::set_permissions(&sb.root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let layout = Layout::of(&sb, &sb.repo);
    let baseline = head(&sb, &sb.repo);
    let t = task(&sb, "docs", &["docs/"], 3);
    let a = agent(
        &sb,
        "agent",
        &format!("set -e\nid -u > '{}/uid'\n{DOCS_COMMIT}", sb.root.display()),
    );
    // The test itself (root) reads the host with git afterwards.
    sb.git(&["config", "--global", "safe.directory", "*"]);
    let chown = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&sb.root)
        .status()
        .unwrap();
    assert!(chown.success());
    // chown changed every file's ctime: the user's own git refreshes the
    // index's stat data, as any `git status` would.
    let refresh = as_nobody(&sb, "git")
        .current_dir(&sb.repo)
        .args(["update-index", "-q", "--refresh"])
        .status()
        .unwrap();
    assert!(refresh.success());
    let before = fingerprint(&[&sb.repo]);
    let mut cmd = as_nobody(&sb, BIN);
    cmd.current_dir(&sb.root)
        .arg("run")
        .arg("--task")
        .arg(&t)
        .arg("--repo")
        .arg(&sb.repo)
        .arg("--state")
        .arg(&sb.state)
        .args(["--capability", CAP, "--isolate", "--json", "--"])
        .arg(&a);
    let run = parse(&cmd.output().unwrap());
    assert_eq!(
        std::fs::read_to_string(sb.root.join("uid")).unwrap().trim(),
        "65534",
        "{}",
        run.stderr
    );
    let tip = assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&sb.repo],
    );
    // What the import wrote belongs to the user, like the rest of the host.
    let meta = std::fs::metadata(sb.repo.join("docs/guide.md")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    assert_eq!(sb.git(&["log", "-1", "--format=%s", &tip]), "docs");
}

#[test]
fn accepts_the_in_place_workspace_under_isolate() {
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 3);
    let a = agent(&sb, "agent", &format!("set -e\n{DOCS_COMMIT}"));
    let run = sealed_run(&sb, &t, &["--workspace", "in-place"], &a);
    assert_eq!(
        (run.code, run.r["status"].as_str()),
        (0, Some("succeeded")),
        "{:#}\n{}",
        run.r,
        run.stderr
    );
    assert_eq!(
        run.r["evidence"]["workspace"]["mode"], "in-place",
        "{:#}",
        run.r
    );
    assert_eq!(
        run.r["evidence"]["isolation"]["workspace"], "in-place",
        "{:#}",
        run.r
    );
    assert!(
        !sb.state.join("workspaces").exists(),
        "a workspace was made"
    );
    assert_eq!(
        sb.git(&["rev-parse", "HEAD"]),
        run.r["evidence"]["commits"]["tip"].as_str().unwrap()
    );
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
}

#[test]
fn rejects_workspace_sealed_without_isolate_as_a_usage_error() {
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 3);
    let ran = sb.root.join("ran");
    let a = agent(&sb, "agent", &format!("touch '{}'", ran.display()));
    let before = fingerprint(&[&sb.repo]);
    for mode in ["sealed", "in-place"] {
        let out = run_cmd(&sb, &sb.repo, &sb.state, &t, &["--workspace", mode], &a)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Under --json a usage error still answers on stdout (issue 30).
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["violations"][0]["rule"], "usage_error", "{r:#}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--isolate"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(!ran.exists(), "the command ran");
    assert!(!sb.state.exists(), "a usage error wrote state");
    assert_identical(&before, &fingerprint(&[&sb.repo]));
}

/// The state directory (where the upper layer lives) on a small file
/// system that the agent fills: the agent's writes fail, the run ends with
/// a result and does not accept, and the host is untouched. Root only: the
/// test mounts a 4 MiB tmpfs in a private mount namespace of its own
/// (`unshare -m`), in which grantguard runs.
#[test]
fn keeps_the_host_identical_when_the_agent_fills_the_workspace_disk() {
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } != 0 || Command::new("unshare").arg("--help").output().is_err() {
        eprintln!("skipped: needs root and unshare to mount a small file system");
        return;
    }
    let sb = Sandbox::new();
    let t = task(&sb, "docs", &["docs/"], 1);
    let a = agent(
        &sb,
        "agent",
        &format!(
            "{DOCS_COMMIT}\ndd if=/dev/zero of=docs/big bs=1M count=16 2>/dev/null; \
             git add docs/big 2>/dev/null; git commit -qm big 2>/dev/null; exit 0"
        ),
    );
    std::fs::create_dir_all(&sb.state).unwrap();
    let before = fingerprint(&[&sb.repo]);
    let inner = run_cmd(&sb, &sb.repo, &sb.state, &t, &["--isolate"], &a);
    let mut line = format!(
        "mount -t tmpfs -o size=4m tmpfs '{}' && exec",
        sb.state.display()
    );
    line.push(' ');
    line.push_str(&shell_words(&inner));
    let started = Instant::now();
    let out = sb
        .command("unshare")
        .args(["-m", "sh", "-c", &line])
        .current_dir(&sb.root)
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(60), "the run hung");
    let said = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{said}");
    // grantguard ran the command (the mount worked) and said why it did not accept.
    let r: Value = serde_json::from_str(&said).expect("a result on stdout");
    assert_eq!(r["evidence"]["command"]["started"], true, "{r:#}");
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert_identical(&before, &fingerprint(&[&sb.repo]));
    assert_fsck_clean(&sb, &sb.repo);
}

/// `cmd`'s program and arguments as one shell line (single-quoted).
fn shell_words(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Host shapes beyond the plain clone, each accepted and imported with
/// nothing else of the host changed: a populated submodule (its git dir
/// under `.git/modules`), a sparse checkout (cone mode, `docs/` only) and a
/// repository whose git dir is elsewhere (`--separate-git-dir`).
#[test]
fn accepts_and_imports_into_a_host_with_a_populated_submodule() {
    let sb = Sandbox::new();
    let sub = sb.root.join("sub-origin");
    sb.run_git(&sb.root, &["init", "-q", "-b", "main", "sub-origin"]);
    std::fs::write(sub.join("lib.txt"), "sub\n").unwrap();
    sb.run_git(&sub, &["add", "."]);
    sb.run_git(&sub, &["commit", "-q", "-m", "sub"]);
    sb.run_git(
        &sb.repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub.to_str().unwrap(),
            "vendor/sub",
        ],
    );
    sb.git_nohooks(&["commit", "-q", "-m", "add submodule"]);
    let t = task(&sb, "docs", &["docs/"], 1);
    let a = agent(&sb, "agent", DOCS_COMMIT);
    let layout = Layout::of(&sb, &sb.repo);
    let baseline = head(&sb, &sb.repo);
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&sb.repo],
    );
    assert_eq!(
        sb.run_git(&sb.repo.join("vendor/sub"), &["status", "--porcelain"]),
        ""
    );
}

#[test]
fn accepts_and_imports_into_a_sparse_checkout() {
    let sb = Sandbox::new();
    sb.git(&["sparse-checkout", "set", "--cone", "docs"]);
    assert!(
        !sb.repo.join("src/lib.rs").exists(),
        "src/ is outside the cone"
    );
    let t = task(&sb, "docs", &["docs/"], 1);
    let a = agent(&sb, "agent", DOCS_COMMIT);
    let layout = Layout::of(&sb, &sb.repo);
    let baseline = head(&sb, &sb.repo);
    let before = fingerprint(&[&sb.repo]);
    let run = sealed_run(&sb, &t, &[], &a);
    assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&sb.repo],
    );
    assert!(!sb.repo.join("src/lib.rs").exists(), "the cone is kept");
}

#[test]
fn accepts_and_imports_into_a_repository_with_a_separate_git_dir() {
    let sb = Sandbox::empty();
    let git_dir = sb.root.join("elsewhere.git");
    let repo = sb.root.join("checkout");
    sb.run_git(
        &sb.root,
        &[
            "init",
            "-q",
            "-b",
            "main",
            "--separate-git-dir",
            git_dir.to_str().unwrap(),
            repo.to_str().unwrap(),
        ],
    );
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    std::fs::write(repo.join("docs/guide.md"), "guide\n").unwrap();
    sb.run_git(&repo, &["add", "."]);
    sb.run_git(&repo, &["commit", "-q", "-m", "initial"]);
    let t = task(&sb, "docs", &["docs/"], 1);
    let a = agent(&sb, "agent", DOCS_COMMIT);
    let layout = Layout::of(&sb, &repo);
    let baseline = head(&sb, &repo);
    let before = fingerprint(&[&repo, &git_dir]);
    let run = parse(
        &run_cmd(&sb, &repo, &sb.state, &t, &["--isolate"], &a)
            .output()
            .unwrap(),
    );
    assert_imported(
        &sb,
        &run,
        &layout,
        "refs/heads/main",
        &baseline,
        &before,
        &[&repo, &git_dir],
    );
}

/// A host whose refs are in the reftable format (git 2.45 and newer can
/// make one; Git 3.0 makes it the default) is accepted and imported with
/// every git that makes one: the workspace keeps the reftable copy, which
/// grantguard reads in process, and the host's refs are written by git.
#[test]
fn accepts_and_imports_into_a_reftable_host() {
    let mut gits: Vec<Option<PathBuf>> = vec![None];
    for dir in ["/opt/git3/bin", "/opt/git-2.55/bin"] {
        if Path::new(dir).join("git").is_file() {
            gits.push(Some(PathBuf::from(dir)));
        }
    }
    for bin in gits {
        reftable_host_run(bin.as_deref());
    }
}

fn reftable_host_run(bin: Option<&Path>) {
    let sb = Sandbox::empty();
    let path = match bin {
        Some(dir) => {
            let mut p = dir.as_os_str().to_owned();
            p.push(":");
            p.push(std::env::var_os("PATH").unwrap_or_default());
            p
        }
        None => std::env::var_os("PATH").unwrap_or_default(),
    };
    let git = |dir: &Path, args: &[&str]| {
        let out = sb
            .command("git")
            .env("PATH", &path)
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let repo = sb.root.join("reftable");
    let init = sb
        .command("git")
        .env("PATH", &path)
        .args(["init", "-q", "-b", "main", "--ref-format=reftable"])
        .arg(&repo)
        .output()
        .unwrap();
    if !init.status.success() {
        eprintln!("skipped: this git cannot make a reftable repository");
        return;
    }
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    std::fs::write(repo.join("docs/guide.md"), "guide\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    git(&repo, &["tag", "v1"]);
    assert!(repo.join(".git/reftable").is_dir());
    let version = git(&repo, &["version"]);
    let t = task(&sb, "docs", &["docs/"], 1);
    let a = agent(&sb, "agent", DOCS_COMMIT);
    let baseline = git(&repo, &["rev-parse", "HEAD"]);
    let mut cmd = run_cmd(&sb, &repo, &sb.state, &t, &["--isolate"], &a);
    cmd.env("PATH", &path);
    let run = parse(&cmd.output().unwrap());
    assert_eq!(
        run.r["status"], "succeeded",
        "{version}: {:#}\n{}",
        run.r, run.stderr
    );
    let tip = run.r["evidence"]["workspace"]["import"]["tip"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]).trim(), tip);
    assert_eq!(git(&repo, &["rev-parse", "HEAD~1"]), baseline);
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&repo, &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main\nrefs/tags/v1\n"
    );
    assert!(repo.join(".git/reftable").is_dir(), "still reftable");
    git(&repo, &["fsck", "--strict"]);
}
