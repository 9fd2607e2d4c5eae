//! Red-team reproductions for issue 16's restore (`run --on-reject
//! restore`) and verify's nested-repository check, two rounds, kept as
//! regression tests: each failed on the commit the red team attacked for
//! the reason its comment names, and passes since.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::Sandbox;
use serde_json::Value;

/// Runs `body` as the agent in the sandbox's checkout (see
/// [`run_restore_in`]).
fn run_restore(sb: &Sandbox, body: &str) -> Value {
    run_restore_in(sb, &sb.repo, body)
}

/// Runs `body` as the agent in `repo` under `run --on-reject restore --json`.
fn run_restore_in(sb: &Sandbox, repo: &Path, body: &str) -> Value {
    let agent = sb.root.join("agent.sh");
    std::fs::write(&agent, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&agent, PermissionsExt::from_mode(0o755)).unwrap();
    let task = common::docs_task(sb);
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json"])
        .args(["--on-reject", "restore", "--run-id", "r1", "--"])
        .arg(&agent)
        .output()
        .unwrap();
    common::tool_result(&out)
}

const DOCS_COMMIT: &str =
    "echo better > docs/guide.md && git -c core.hooksPath=/dev/null commit -q -am guide";

/// A baseline whose submodule `sub` is registered but not checked out.
fn with_unpopulated_submodule() -> (Sandbox, PathBuf) {
    let sb = Sandbox::new();
    std::fs::write(
        sb.home.join(".gitconfig"),
        "[protocol \"file\"]\n\tallow = always\n",
    )
    .unwrap();
    let seed = sb.root.join("sub-seed");
    sb.run_git(&sb.root, &["init", "-q", "-b", "main", "sub-seed"]);
    std::fs::write(seed.join("sub.txt"), "in the submodule\n").unwrap();
    sb.run_git(&seed, &["add", "."]);
    sb.run_git(&seed, &["commit", "-q", "-m", "sub"]);
    sb.run_git(&sb.root, &["clone", "-q", "--bare", "sub-seed", "sub.git"]);
    let url = sb.root.join("sub.git");
    sb.git(&["submodule", "add", "-q", url.to_str().unwrap(), "sub"]);
    sb.git(&["commit", "-q", "-m", "submodule"]);
    sb.git(&["push", "-q", "origin", "main"]);
    sb.git(&["submodule", "deinit", "-q", "-f", "sub"]);
    std::fs::remove_dir_all(sb.git_dir().join("modules")).unwrap();
    assert_eq!(std::fs::read_dir(sb.repo.join("sub")).unwrap().count(), 0);
    (sb, url)
}

#[test]
fn restore_runs_no_program_of_a_repository_the_agent_made_in_an_unpopulated_submodule() {
    let (sb, url) = with_unpopulated_submodule();
    let marker = sb.root.join("PWNED");
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit update-index --force-remove sub\ngit clone -q '{url}' sub\n\
             git -C sub config filter.evil.smudge \"sh -c 'touch {m}; cat'\"\n\
             mkdir -p sub/.git/info && echo '* filter=evil' > sub/.git/info/attributes\n\
             echo changed >> sub/sub.txt",
            url = url.display(),
            m = marker.display()
        ),
    );
    assert!(
        !marker.exists(),
        "restore ran the agent's smudge filter: {r:#}"
    );
    // The submodule was not checked out at arm: what is in its directory now
    // is the agent's, preserved and removed; git never runs there.
    let c = &r["evidence"]["compensation"];
    assert_eq!(c["done"], true, "{r:#}");
    assert_eq!(
        std::fs::read_dir(sb.repo.join("sub")).unwrap().count(),
        0,
        "{r:#}"
    );
    let preserved = Path::new(c["preserved"]["dir"].as_str().unwrap());
    assert!(preserved.join("worktree/sub/.git").exists(), "{r:#}");
    assert!(preserved.join("worktree/sub/sub.txt").exists(), "{r:#}");
}

#[test]
fn restore_writes_nothing_outside_the_checkout_through_an_agent_made_submodule_repository() {
    let (sb, url) = with_unpopulated_submodule();
    let victim = sb.root.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("important.txt"), "operator data\n").unwrap();
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit update-index --force-remove sub\ngit clone -q '{url}' sub\n\
             git -C sub config core.worktree '{v}'\ngit -C sub add important.txt",
            url = url.display(),
            v = victim.display()
        ),
    );
    assert_eq!(r["evidence"]["compensation"]["action"], "restore", "{r:#}");
    assert_eq!(
        std::fs::read(victim.join("important.txt")).ok().as_deref(),
        Some(&b"operator data\n"[..]),
        "restore deleted a file outside the checkout: {r:#}"
    );
    assert!(!victim.join("sub.txt").exists(), "{r:#}");
}

#[test]
fn restore_moves_no_ref_but_the_granted_branch() {
    let sb = Sandbox::new();
    sb.git(&["checkout", "-q", "-b", "release"]);
    let release = sb.commit_file("docs/rel.md", "rel\n", "release");
    sb.git(&["checkout", "-q", "main"]);
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit -c core.hooksPath=/dev/null symbolic-ref refs/heads/main \
             refs/heads/release"
        ),
    );
    assert_eq!(r["evidence"]["compensation"]["action"], "restore", "{r:#}");
    assert_eq!(
        sb.git(&["rev-parse", "refs/heads/release"]),
        release,
        "restore moved refs/heads/release: {r:#}"
    );
}

#[test]
fn preserves_an_ignored_file_that_the_reset_replaces_with_a_tracked_directory() {
    let sb = Sandbox::new();
    sb.write(".gitignore", "target/\n/build\n");
    sb.write("build/keep.txt", "keep\n");
    sb.git(&["add", "-f", ".gitignore", "build/keep.txt"]);
    sb.git(&["commit", "-q", "-m", "build dir"]);
    sb.git(&["push", "-q", "origin", "main"]);
    let r = run_restore(
        &sb,
        &format!("{DOCS_COMMIT}\nrm -rf build && printf 'precious\\n' > build"),
    );
    let c = &r["evidence"]["compensation"];
    assert_eq!(c["done"], true, "{r:#}");
    let preserved = Path::new(c["preserved"]["dir"].as_str().unwrap());
    let kept = std::fs::read(preserved.join("worktree/build")).ok();
    let in_place = std::fs::read(sb.repo.join("build")).ok();
    assert!(
        kept.as_deref() == Some(b"precious\n") || in_place.as_deref() == Some(b"precious\n"),
        "the agent's ignored file `build` is neither preserved nor left in place: {r:#}"
    );
}

#[test]
fn restore_refuses_over_a_skip_worktree_flag_and_resets_nothing() {
    let sb = Sandbox::new();
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit update-index --skip-worktree src/lib.rs\n\
             echo rewritten > src/lib.rs\necho extra >> README.md"
        ),
    );
    let c = &r["evidence"]["compensation"];
    // Refused before anything is reset: the flags would survive a reset.
    assert_eq!(c["done"], false, "{r:#}");
    assert!(r.to_string().contains("skip-worktree"), "{r:#}");
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("src/lib.rs")).unwrap(),
        "rewritten\n"
    );
}

#[test]
fn restore_refuses_over_a_rebase_in_progress_and_resets_nothing() {
    let sb = Sandbox::new();
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\necho evil > src/lib.rs && git -c core.hooksPath=/dev/null commit -q -am \
             evil\nGIT_SEQUENCE_EDITOR=\"sed -i 's/^pick/edit/'\" git -c core.hooksPath=/dev/null \
             rebase -q -i HEAD~2 >/dev/null 2>&1\ntrue"
        ),
    );
    let c = &r["evidence"]["compensation"];
    // Refused before anything is reset: the rebase's state cannot be kept.
    assert_eq!(c["done"], false, "{r:#}");
    assert!(r.to_string().contains("rebase is in progress"), "{r:#}");
    assert!(
        sb.git_dir().join("rebase-merge").exists(),
        "nothing is reset"
    );
}

#[test]
fn rejects_a_repository_the_agent_planted_in_a_tracked_directory() {
    // `git init docs` inside the granted directory: git never lists a
    // `.git` entry, and the next git command run in docs/ uses the agent's
    // config (here core.fsmonitor, a program).
    let sb = Sandbox::new();
    let marker = sb.root.join("PWNED");
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit init -q docs && git -C docs config core.fsmonitor \"touch {}; false\"",
            marker.display()
        ),
    );
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert!(
        !sb.repo.join("docs/.git").exists(),
        "docs/.git survived the run: {r:#}"
    );
}

// ---- round 2 (on 6da52ba)

const OUTSIDE_COMMIT: &str = "echo better > docs/guide.md && echo outside > README.md && \
     git -c core.hooksPath=/dev/null commit -q -am guide";

/// A seed repository for submodules; returns its path.
fn sub_seed(sb: &Sandbox) -> PathBuf {
    std::fs::write(
        sb.home.join(".gitconfig"),
        "[protocol \"file\"]\n\tallow = always\n",
    )
    .unwrap();
    let seed = sb.root.join("sub-seed");
    sb.run_git(&sb.root, &["init", "-q", "-b", "main", "sub-seed"]);
    std::fs::write(seed.join("f"), "original\n").unwrap();
    std::fs::write(seed.join(".gitignore"), "target/\n").unwrap();
    sb.run_git(&seed, &["add", "."]);
    sb.run_git(&seed, &["commit", "-q", "-m", "sub"]);
    seed
}

/// Baseline with submodule `B` checked out and `A` registered but not.
fn with_a_unpopulated_b_populated() -> (Sandbox, PathBuf) {
    let sb = Sandbox::new();
    let seed = sub_seed(&sb);
    let url = seed.to_str().unwrap();
    sb.git(&["submodule", "add", "-q", url, "A"]);
    sb.git(&["submodule", "add", "-q", url, "B"]);
    sb.git(&["commit", "-q", "-m", "submodules"]);
    sb.git(&["push", "-q", "origin", "main"]);
    sb.git(&["submodule", "deinit", "-q", "-f", "A"]);
    std::fs::remove_dir_all(sb.git_dir().join("modules/A")).unwrap();
    (sb, seed)
}

/// The agent makes `git_dir` (relative to the checkout) a git dir of its
/// own with a smudge filter and a core.worktree outside the checkout, and
/// points the unpopulated submodule `A` at it.
fn plant_git_dir_for_a(sb: &Sandbox, seed: &Path, git_dir: &str) -> Value {
    let marker = sb.root.join("PWNED");
    let outside = sb.root.join("outside");
    std::fs::create_dir(&outside).unwrap();
    run_restore_in(
        sb,
        &sb.repo,
        &format!(
            "{OUTSIDE_COMMIT}\ngit update-index --force-remove A\n\
             G={git_dir}\ngit init -q --bare $G && git -C $G fetch -q '{seed}' main\n\
             git -C $G config core.bare false\ngit -C $G config core.worktree '{o}'\n\
             git -C $G config filter.evil.smudge \"sh -c 'touch {m}; cat'\"\n\
             mkdir -p $G/info && echo '* filter=evil' > $G/info/attributes\n\
             printf 'gitdir: ../%s\\n' $G > A/.git",
            seed = seed.display(),
            o = outside.display(),
            m = marker.display()
        ),
    )
}

#[test]
fn restore_runs_no_program_through_a_gitfile_naming_the_modules_dir_itself() {
    let (sb, seed) = with_a_unpopulated_b_populated();
    let r = plant_git_dir_for_a(&sb, &seed, ".git/modules");
    assert_eq!(r["evidence"]["compensation"]["action"], "restore", "{r:#}");
    assert!(
        !sb.root.join("PWNED").exists(),
        "restore ran the agent's smudge filter: {r:#}"
    );
    assert!(
        !sb.root.join("outside/f").exists(),
        "restore wrote outside the checkout: {r:#}"
    );
}

#[test]
fn restore_runs_no_program_through_a_git_dir_made_inside_a_modules_object_store() {
    let (sb, seed) = with_a_unpopulated_b_populated();
    let r = plant_git_dir_for_a(&sb, &seed, ".git/modules/B/objects/evil");
    assert_eq!(r["evidence"]["compensation"]["action"], "restore", "{r:#}");
    assert!(
        !sb.root.join("PWNED").exists(),
        "restore ran the agent's smudge filter: {r:#}"
    );
    assert!(
        !sb.root.join("outside/f").exists(),
        "restore wrote outside the checkout: {r:#}"
    );
}

#[test]
fn restore_in_a_linked_worktree_leaves_the_main_checkouts_submodule_alone() {
    let sb = Sandbox::new();
    let seed = sub_seed(&sb);
    sb.git(&["submodule", "add", "-q", seed.to_str().unwrap(), "sub"]);
    sb.git(&["commit", "-q", "-m", "submodule"]);
    sb.git(&["push", "-q", "origin", "main"]);
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "wt"]);
    // The user's uncommitted work in the main checkout's submodule.
    std::fs::write(sb.repo.join("sub/f"), "precious\n").unwrap();
    let r = run_restore_in(
        &sb,
        &wt,
        &format!(
            "{DOCS_COMMIT}\ngit update-index --force-remove sub\n\
             printf 'gitdir: {}\\n' > sub/.git",
            sb.git_dir().join("modules/sub").display()
        ),
    );
    assert_eq!(r["evidence"]["compensation"]["action"], "restore", "{r:#}");
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("sub/f")).unwrap(),
        "precious\n",
        "restore of the linked worktree reset the main checkout's submodule: {r:#}"
    );
}

#[test]
fn restores_a_linked_worktree_whose_submodule_was_checked_out_there() {
    let sb = Sandbox::new();
    let seed = sub_seed(&sb);
    sb.git(&["submodule", "add", "-q", seed.to_str().unwrap(), "sub"]);
    sb.git(&["commit", "-q", "-m", "submodule"]);
    sb.git(&["push", "-q", "origin", "main"]);
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "wt"]);
    sb.run_git(&wt, &["submodule", "update", "-q", "--init"]);
    let r = run_restore_in(&sb, &wt, OUTSIDE_COMMIT);
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
}

#[test]
fn rejects_a_repository_planted_inside_an_unpopulated_submodule_directory() {
    let (sb, _) = with_a_unpopulated_b_populated();
    let r = run_restore_in(
        &sb,
        &sb.repo,
        &format!("{DOCS_COMMIT}\nmkdir -p A/deep && git -C A/deep init -q"),
    );
    assert_ne!(
        r["status"], "succeeded",
        "a planted A/deep/.git was accepted: {r:#}"
    );
}

#[test]
fn rejects_a_repository_planted_in_an_ignored_directory_of_a_submodule() {
    let (sb, _) = with_a_unpopulated_b_populated();
    let r = run_restore_in(
        &sb,
        &sb.repo,
        &format!("{DOCS_COMMIT}\nmkdir -p B/target/deep && git -C B/target/deep init -q"),
    );
    assert_ne!(
        r["status"], "succeeded",
        "a planted B/target/deep/.git was accepted: {r:#}"
    );
}

#[test]
fn rejects_a_bare_repository_planted_in_a_granted_directory() {
    let sb = Sandbox::new();
    let r = run_restore_in(
        &sb,
        &sb.repo,
        &format!(
            "{DOCS_COMMIT}\ngit init -q --bare docs/x.git && echo '*' > docs/x.git/.gitignore"
        ),
    );
    assert_ne!(
        r["status"], "succeeded",
        "a planted bare repository docs/x.git was accepted: {r:#}"
    );
}

#[test]
fn restore_refuses_a_rebase_in_progress_in_a_submodule() {
    let (sb, _) = with_a_unpopulated_b_populated();
    let r = run_restore_in(
        &sb,
        &sb.repo,
        &format!(
            "{DOCS_COMMIT}\ncd B && echo one > f && git commit -qam one && echo two > f && \
             git commit -qam two && GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/edit/' \
             git rebase -q -i HEAD~2"
        ),
    );
    assert_eq!(r["evidence"]["compensation"]["action"], "restore", "{r:#}");
    let left = sb.git_dir().join("modules/B/rebase-merge").exists();
    assert!(
        !(left && r["evidence"]["compensation"]["done"] == true),
        "restore reported done with a rebase in progress in the submodule: {r:#}"
    );
}

#[test]
fn a_bare_repository_in_an_ignored_directory_is_accepted_named_and_restored_away() {
    // Round 2 found a bare target/x.git accepted without a word. Issue 25:
    // git at the checkout never reads an ignored directory (build tools
    // leave repositories there), so the run is accepted, with a warning
    // that names it; git run inside it would use its config.
    let sb = Sandbox::new();
    let r = run_restore_in(
        &sb,
        &sb.repo,
        &format!("{DOCS_COMMIT}\ngit init -q --bare target/x.git"),
    );
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("target/x.git")),
        "the warning names it: {r:#}"
    );
    // Rejected for another reason, the restore takes it away with the rest
    // of the agent's work (preserved in the state directory).
    let sb = Sandbox::new();
    let r = run_restore_in(
        &sb,
        &sb.repo,
        &format!("{OUTSIDE_COMMIT}\ngit init -q --bare target/x.git"),
    );
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
    assert!(!sb.repo.join("target/x.git").exists(), "{r:#}");
}

#[test]
fn restore_refuses_before_any_reset_over_an_assume_unchanged_entry_in_a_submodule() {
    let (sb, _) = with_a_unpopulated_b_populated();
    let r = run_restore_in(
        &sb,
        &sb.repo,
        &format!(
            "{OUTSIDE_COMMIT}\ncd B && git update-index --assume-unchanged f && \
             echo 'agent bytes' > f"
        ),
    );
    let rules = common::rules(&r);
    // At the top level the same state is refused before anything is
    // preserved or reset (preserve_failed); in a submodule it is reset.
    assert!(
        !rules.iter().any(|rule| rule == "reset_failed"),
        "restore reset the checkout over a hidden submodule entry: {r:#}"
    );
}

#[test]
fn restores_a_sparse_linked_worktree() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "wt"]);
    sb.run_git(&wt, &["sparse-checkout", "set", "docs"]);
    let r = run_restore_in(&sb, &wt, OUTSIDE_COMMIT);
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
}

#[test]
fn restores_a_checkout_whose_submodule_has_an_embedded_git_dir() {
    let sb = Sandbox::new();
    let seed = sub_seed(&sb);
    sb.run_git(&sb.repo, &["clone", "-q", seed.to_str().unwrap(), "sub"]);
    sb.git(&["submodule", "add", "-q", seed.to_str().unwrap(), "sub"]);
    sb.git(&["commit", "-q", "-m", "submodule"]);
    sb.git(&["push", "-q", "origin", "main"]);
    assert!(sb.repo.join("sub/.git").is_dir());
    let r = run_restore_in(&sb, &sb.repo, OUTSIDE_COMMIT);
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
}
