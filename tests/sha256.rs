//! SHA-256 repositories (`git init --object-format=sha256`), end to end
//! exactly like SHA-1 ones: arm, the three hooks, verify (ref store, object
//! store with its caches, git's own view), run and disarm. Object ids are 64
//! hex digits here, the reference-transaction hook's zero id is 64 zeros,
//! and every file git writes (index, packs, `.rev`, commit-graph,
//! multi-pack-index) holds 32-byte ids: each test shows git's view next to
//! grantguard's decision.

mod common;

use std::path::{Path, PathBuf};

use common::{Sandbox, assert_accepted, assert_rejected, output_with_stdin, rules};
use serde_json::Value;

/// A SHA-256 sandbox (origin, clone), armed with `docs/` granted.
fn armed(min: u32, max: u32) -> Sandbox {
    armed_in(Sandbox::with_object_format("sha256"), min, max)
}

/// [`armed`] with refs in loose files and `packed-refs` whatever git's
/// default ref format (Git 3.0's is reftable): for the tests about how the
/// files backend stores SHA-256 ids.
fn armed_files(min: u32, max: u32) -> Sandbox {
    armed_in(
        Sandbox::with_object_format_and_files_refs("sha256"),
        min,
        max,
    )
}

fn armed_in(sb: Sandbox, min: u32, max: u32) -> Sandbox {
    let git = sb.try_git(&["rev-parse", "--show-object-format"]);
    if git.status.success() {
        assert_eq!(String::from_utf8_lossy(&git.stdout).trim(), "sha256");
    } else {
        // A git built without Rust (2.55's NO_RUST) cannot open it at all.
        let stderr = String::from_utf8_lossy(&git.stderr);
        assert!(stderr.contains("compatibility hash"), "{stderr}");
    }
    assert_eq!(sb.git(&["rev-parse", "HEAD"]).len(), 64);
    sb.arm(&sb.grant(&["docs/"], min, max));
    sb
}

/// Runs a git command that must fail; returns its stderr.
#[track_caller]
fn assert_git_fails(sb: &Sandbox, args: &[&str]) -> String {
    let out = sb.try_git(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "git {args:?} must fail: {stderr}");
    stderr
}

/// Commits `content` to `rel` through git with its hooks; returns HEAD.
#[track_caller]
fn hooked_commit(sb: &Sandbox, rel: &str, content: &str) -> String {
    sb.write(rel, content);
    sb.git(&["add", "--", rel]);
    sb.git(&["commit", "-q", "-m", rel]);
    sb.git(&["rev-parse", "HEAD"])
}

/// For an accepted result: git resolves HEAD, the branch and
/// `baseline..tip` to what verify decided on, and `git fsck` is clean.
#[track_caller]
fn assert_git_agrees(sb: &Sandbox, result: &Value) {
    let tip = result["evidence"]["commits"]["tip"].as_str().unwrap();
    assert_eq!(tip.len(), 64, "{result:#}");
    assert_eq!(sb.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(sb.git(&["rev-parse", "main"]), tip);
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), tip);
    let base = result["evidence"]["baseline"]["commit"].as_str().unwrap();
    let listed: Vec<&str> = result["evidence"]["commits"]["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let range = format!("{base}..{tip}");
    assert_eq!(
        sb.git(&["rev-list", &range]).lines().collect::<Vec<_>>(),
        listed
    );
    let fsck = sb.try_git(&["fsck", "--no-dangling", "--no-progress"]);
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
}

#[track_caller]
fn assert_unsafe(code: i32, result: &Value, rule: &str) {
    assert_rejected(code, result, &[rule]);
    assert_eq!(result["failure_class"], "unsafe_state", "{result:#}");
    assert_eq!(result["evidence"]["metadata_intact"], false, "{result:#}");
}

fn objects(sb: &Sandbox) -> PathBuf {
    sb.git_dir().join("objects")
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect()
}

// --- hooks and verify ----------------------------------------------------

#[test]
fn accepts_a_granted_commit_through_the_real_hooks() {
    let sb = armed(1, 2);
    hooked_commit(&sb, "docs/guide.md", "better guide\n");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r);
}

#[test]
fn refuses_an_ungranted_commit_in_the_hooks_and_rejects_it_in_verify() {
    let sb = armed(1, 2);
    let before = sb.git(&["rev-parse", "HEAD"]);
    sb.write("src/lib.rs", "pub fn g() {}\n");
    sb.git(&["add", "src/lib.rs"]);
    for args in [
        &["commit", "-q", "-m", "src"][..],
        &["commit", "-q", "--no-verify", "-m", "src"],
    ] {
        let stderr = assert_git_fails(&sb, args);
        assert!(stderr.contains("[path_not_granted]"), "{stderr}");
        assert_eq!(
            sb.git(&["rev-parse", "HEAD"]),
            before,
            "{args:?} moved HEAD"
        );
    }
    // Around the hooks: verify is the authority.
    sb.git_nohooks(&["commit", "-q", "-m", "src"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
}

#[test]
fn refuses_a_branch_creation_and_deletion_sent_with_64_digit_zero_ids() {
    let sb = armed(1, 2);
    let tip = hooked_commit(&sb, "docs/guide.md", "better guide\n");
    // git's transaction says "<64 zeros> <tip> refs/heads/other": parsed,
    // and refused as a new branch.
    let stderr = assert_git_fails(&sb, &["branch", "other"]);
    assert!(stderr.contains("[ref_changed]"), "{stderr}");
    assert!(
        stderr.contains("refs/heads/other would be created"),
        "{stderr}"
    );
    // "<tip> <64 zeros> refs/heads/main": the granted branch must stay.
    let stderr = assert_git_fails(&sb, &["update-ref", "-d", "refs/heads/main", &tip]);
    assert!(stderr.contains("[not_descendant]"), "{stderr}");
    let refs = sb.git(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    assert!(!refs.contains("refs/heads/other"), "{refs}");
    assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), tip);
}

#[test]
fn refuses_a_push() {
    let sb = armed(1, 2);
    hooked_commit(&sb, "docs/guide.md", "better guide\n");
    let remote = sb.run_git(&sb.origin, &["rev-parse", "main"]);
    let out = sb.try_git(&[
        "-c",
        "protocol.file.allow=always",
        "push",
        "-q",
        "origin",
        "main",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[publish_not_granted]"), "{stderr}");
    assert_eq!(sb.run_git(&sb.origin, &["rev-parse", "main"]), remote);
}

#[test]
fn accepts_a_granted_commit_beside_a_sha256_submodule() {
    let sb = Sandbox::with_object_format("sha256");
    let lib = sb.root.join("lib");
    sb.run_git(
        &sb.root,
        &["init", "-q", "-b", "main", "--object-format=sha256", "lib"],
    );
    std::fs::write(lib.join("lib.c"), "int f;\n").unwrap();
    sb.run_git(&lib, &["add", "."]);
    sb.run_git(&lib, &["commit", "-q", "-m", "lib"]);
    sb.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        lib.to_str().unwrap(),
        "vendor/lib",
    ]);
    sb.git(&["commit", "-q", "-m", "submodule"]);
    // arm reads the submodule's index in its own (SHA-256) format.
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    hooked_commit(&sb, "docs/guide.md", "better guide\n");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r);
    // A change inside the submodule's checkout is not clean, as git says.
    std::fs::write(sb.repo.join("vendor/lib/lib.c"), "int g;\n").unwrap();
    assert!(!sb.git(&["status", "--porcelain"]).is_empty());
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
}

// --- storage git rewrites ------------------------------------------------

#[test]
fn accepts_git_gc_with_commit_graph_packs_and_reverse_indexes() {
    let sb = armed(1, 3);
    sb.git_stdin(&["hash-object", "-w", "--stdin"], "dangling\n");
    hooked_commit(&sb, "docs/a.md", "a\n");
    hooked_commit(&sb, "docs/b.md", "b\n");
    sb.git(&["gc", "-q", "--cruft"]);
    let pack_dir = objects(&sb).join("pack");
    assert!(
        !files_with_suffix(&pack_dir, ".rev").is_empty(),
        "gc wrote .rev"
    );
    assert!(objects(&sb).join("info/commit-graph").is_file());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r);
    // And a multi-pack-index, as `git repack --write-midx` writes it.
    sb.git(&["repack", "-adq", "--write-midx"]);
    assert!(objects(&sb).join("pack/multi-pack-index").is_file());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn accepts_git_pack_refs_all() {
    let sb = armed_files(1, 2);
    hooked_commit(&sb, "docs/guide.md", "better guide\n");
    sb.git(&["pack-refs", "--all"]);
    let packed = std::fs::read_to_string(sb.git_dir().join("packed-refs")).unwrap();
    assert!(packed.contains("refs/heads/main"), "{packed}");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r);
}

#[test]
fn rejects_a_rewritten_loose_object() {
    let sb = Sandbox::with_object_format("sha256");
    sb.commit_file("src/lib.rs", "pub fn baseline() {}\n", "baseline");
    let blob = sb.git(&["rev-parse", "HEAD:src/lib.rs"]);
    let path = |id: &str| objects(&sb).join(&id[..2]).join(&id[2..]);
    assert!(path(&blob).is_file(), "the blob is loose");
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    hooked_commit(&sb, "docs/guide.md", "granted\n");
    let evil = sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn evil() {}\n");
    let bytes = std::fs::read(path(&evil)).unwrap();
    std::fs::remove_file(path(&blob)).unwrap();
    std::fs::write(path(&blob), bytes).unwrap();
    assert_eq!(
        sb.git(&["cat-file", "-p", "HEAD:src/lib.rs"]),
        "pub fn evil() {}",
        "git reads the forgery"
    );
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "object_store_invalid");
}

#[test]
fn rejects_a_forged_reverse_index_with_a_sha256_trailer() {
    let sb = armed(1, 3);
    hooked_commit(&sb, "docs/a.md", "a\n");
    sb.git(&["gc", "-q"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    let rev = files_with_suffix(&objects(&sb).join("pack"), ".rev")
        .pop()
        .unwrap();
    let mut data = std::fs::read(&rev).unwrap();
    // Swap the first two positions and fix the 32-byte trailing checksum,
    // so only the order betrays it.
    let (a, b) = (data[12..16].to_vec(), data[16..20].to_vec());
    data[12..16].copy_from_slice(&b);
    data[16..20].copy_from_slice(&a);
    let body = data.len() - 32;
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha256);
    hasher.update(&data[..body]);
    let sum = hasher.try_finalize().unwrap();
    data[body..].copy_from_slice(sum.as_slice());
    std::fs::remove_file(&rev).unwrap();
    std::fs::write(&rev, &data).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "object_store_invalid");
    assert!(r.to_string().contains("not in pack order"), "{r:#}");
}

#[test]
fn rejects_a_ref_holding_a_40_digit_id() {
    let sb = armed_files(1, 2);
    hooked_commit(&sb, "docs/guide.md", "better guide\n");
    // Written around git: git itself reads it as a broken ref.
    let loose = sb.git_dir().join("refs/tags/short");
    std::fs::create_dir_all(loose.parent().unwrap()).unwrap();
    std::fs::write(&loose, format!("{}\n", "ab".repeat(20))).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "ref_store_invalid");
    assert!(r.to_string().contains("40-digit"), "{r:#}");
}

#[test]
fn refuses_to_arm_a_repository_with_a_second_object_format() {
    let sb = Sandbox::with_object_format("sha256");
    // git (2.42+) then keeps a SHA-1 id beside each new object's SHA-256.
    sb.git(&["config", "extensions.compatObjectFormat", "sha1"]);
    let git = sb.try_git(&["rev-parse", "--show-object-format"]);
    if git.status.success() {
        assert_eq!(String::from_utf8_lossy(&git.stdout).trim(), "sha256");
    } else {
        // A git built without Rust (2.55's NO_RUST) cannot open it at all.
        let stderr = String::from_utf8_lossy(&git.stderr);
        assert!(stderr.contains("compatibility hash"), "{stderr}");
    }
    let out = sb.arm_output(&sb.grant(&["docs/"], 1, 2), &sb.state);
    assert!(!out.status.success(), "arm must refuse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("compatObjectFormat"), "{stderr}");
    assert!(!sb.state.join("baseline.json").exists());
}

// --- run and disarm ------------------------------------------------------

#[test]
fn disarm_restores_the_config_byte_for_byte() {
    let sb = Sandbox::with_object_format("sha256");
    let config = sb.git_dir().join("config");
    let before = std::fs::read(&config).unwrap();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    assert_ne!(
        std::fs::read(&config).unwrap(),
        before,
        "arm installs hooks"
    );
    let out = sb.grantguard(&["disarm", "--state", sb.state.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&config).unwrap(), before);
}

/// `grantguard run --json` of a task granting `docs/` (exactly one commit)
/// with `sh -c agent` as the command; returns the exit code and result.
fn run(sb: &Sandbox, agent: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let task = sb.root.join("task.json");
    let doc = serde_json::json!({
        "id": "edit-docs", "title": "Edit the docs", "objective": "Improve the guide",
        "task_type": "change", "required_capabilities": ["repo.read"],
        "side_effect_class": "reversible", "risk_class": "low", "worker": "coder",
        "repository_grant": {"version": "1", "allowed_paths": ["docs/"],
                             "commit_count": {"min": 1, "max": 1}, "publish": false}});
    std::fs::write(&task, doc.to_string()).unwrap();
    let metrics = sb.root.join("metrics/metrics.jsonl");
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json"])
        .args(["--metrics", metrics.to_str().unwrap()])
        .args(extra)
        .args(["--", "sh", "-c", agent]);
    let out = output_with_stdin(cmd, "");
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), r)
}

#[test]
fn accepts_a_granted_run_end_to_end() {
    let sb = Sandbox::with_object_format("sha256");
    let config = sb.git_dir().join("config");
    let before = std::fs::read(&config).unwrap();
    let agent = "echo 'better guide' > docs/guide.md && git commit -q -am docs";
    let (code, r) = run(&sb, agent, &[]);
    assert_eq!(
        (code, r["status"].as_str()),
        (Some(0), Some("succeeded")),
        "{r:#}"
    );
    assert!(rules(&r).is_empty(), "{r:#}");
    assert_eq!(sb.git(&["show", "HEAD:docs/guide.md"]), "better guide");
    assert_eq!(sb.git(&["rev-parse", "HEAD"]).len(), 64);
    assert_eq!(std::fs::read(&config).unwrap(), before, "run disarms");
    let lines = std::fs::read_to_string(sb.root.join("metrics/metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1, "one metrics line: {lines}");
}

#[test]
fn restore_preserves_rejected_work_on_an_unborn_sha256_branch() {
    let sb = Sandbox::empty();
    sb.run_git(
        &sb.root,
        &["init", "-q", "-b", "main", "--object-format=sha256", "repo"],
    );
    // No commit: the work is preserved against the empty tree, in the
    // repository's SHA-256 object format.
    let (code, r) = run(
        &sb,
        "mkdir docs && echo draft > docs/draft.md",
        &["--on-reject", "restore"],
    );
    assert_eq!(code, Some(1), "{r:#}");
    assert_eq!(
        rules(&r),
        ["commit_count_out_of_bounds", "worktree_not_clean"],
        "{r:#}"
    );
    let c = &r["evidence"]["compensation"];
    assert_eq!(c["done"], true, "{r:#}");
    let dir = std::path::Path::new(c["preserved"]["dir"].as_str().unwrap());
    assert!(
        !sb.repo.join("docs/draft.md").exists(),
        "restore cleaned up"
    );
    // The untracked directory is kept raw, and the bundle holds the (empty)
    // index commit in SHA-256.
    assert_eq!(
        std::fs::read_to_string(dir.join("worktree/docs/draft.md")).unwrap(),
        "draft\n"
    );
    assert_eq!(c["preserved"]["index_commit"].as_str().unwrap().len(), 64);
    sb.git(&[
        "bundle",
        "verify",
        "-q",
        dir.join("commits.bundle").to_str().unwrap(),
    ]);
}
