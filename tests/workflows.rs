//! The legitimate-workflow suite (issue 17): what an agent really does with
//! git, each run as a shell snippet in an armed sandbox (hooks active) and
//! judged by `grantguard verify` at the end. Every one must be accepted: a
//! refusal by a hook or a rejection by verify is a false refusal.
//!
//! The grant is `docs/`, `README.md`, `src/` with 1 to `max` commits (5
//! unless a row says otherwise). A row may have a `setup` snippet that runs
//! before `arm` (the harness's checkout: submodules, sparse checkout, LFS).
//! Snippets run under `bash -euo pipefail` in the worktree with:
//! `BASE` (the baseline commit), `SCRATCH` (a directory outside the
//! repository), `GIT_EDITOR=true`, `GIT_SEQUENCE_EDITOR=true`, and
//! `c PATH [CONTENT [MESSAGE]]`, which writes, stages and commits one file.
//!
//! Deliberately absent, because the grant forbids them (each has its own
//! refusal test elsewhere): new branches, tags, notes, replace refs, merge
//! commits (the new history must be linear), rewriting the baseline commit
//! (`rebase --root`), changing the repository's config, and any transport.

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::Sandbox;

struct Workflow {
    name: &'static str,
    max: u32,
    setup: &'static str,
    run: &'static str,
}

const fn w(name: &'static str, run: &'static str) -> Workflow {
    Workflow {
        name,
        max: 5,
        setup: "",
        run,
    }
}

/// A workflow at a commit limit of its own.
const fn at_max(name: &'static str, max: u32, run: &'static str) -> Workflow {
    Workflow {
        name,
        max,
        setup: "",
        run,
    }
}

/// A workflow on a checkout the harness prepared before arm.
const fn prepared(name: &'static str, setup: &'static str, run: &'static str) -> Workflow {
    Workflow {
        name,
        max: 5,
        setup,
        run,
    }
}

const PRELUDE: &str = r#"set -euo pipefail
c() { mkdir -p "$(dirname "$1")"; printf '%s\n' "${2:-content of $1}" > "$1"; git add -- "$1"; git commit -q -m "${3:-edit $1}"; }
"#;

#[rustfmt::skip]
const WORKFLOWS: &[Workflow] = &[
    // Commit variants.
    w("commit_one_file", r#"c docs/a.md"#),
    w("commit_all_tracked", r#"echo more >> README.md; git commit -qam readme"#),
    w("commit_message_file", r#"echo x >> src/lib.rs; printf 'subject\n\nbody\n' > "$SCRATCH/msg"; git commit -qa -F "$SCRATCH/msg""#),
    w("commit_message_stdin", r#"echo x >> src/lib.rs; echo from-stdin | git commit -qa -F -"#),
    w("commit_allow_empty", r#"git commit -q --allow-empty -m empty"#),
    w("commit_empty_message_allowed", r#"c docs/a.md; echo y >> docs/a.md; git commit -qa --allow-empty-message -m ''"#),
    w("commit_pathspec", r#"echo x >> docs/guide.md; echo y >> README.md; git commit -q -m only-guide -- docs/guide.md; git commit -qam rest"#),
    w("commit_include", r#"echo x >> docs/guide.md; echo y > docs/new.md; git add docs/new.md; git commit -q -i -m inc docs/guide.md"#),
    w("commit_only_with_other_staged", r#"echo x >> docs/guide.md; git add docs/guide.md; echo y >> README.md; git commit -q -o -m only README.md; git commit -qm guide"#),
    w("commit_trailer", r#"echo x >> README.md; git commit -qa -m t --trailer 'Reviewed-by: Someone <s@example.invalid>'"#),
    w("commit_signoff", r#"echo x >> README.md; git commit -qas -m signed-off"#),
    w("commit_editor_message", r#"echo x >> README.md; GIT_EDITOR='echo from-editor >' git commit -qa"#),
    w("commit_verbose_editor", r#"echo x >> README.md; GIT_EDITOR='echo verbose >' git commit -qav"#),
    w("commit_author_and_date", r#"echo x >> README.md; GIT_AUTHOR_DATE='2001-01-01T00:00:00Z' git commit -qa -m d --author 'Other <o@example.invalid>'"#),
    w("commit_cleanup_verbatim", r#"echo x >> README.md; git commit -qa --cleanup=verbatim -m '# not a comment'"#),
    w("commit_reuse_message", r#"echo x >> README.md; git commit -qa -C HEAD"#),
    w("commit_dry_run_first", r#"echo x >> README.md; git add README.md; git commit --dry-run >/dev/null; git commit -qm real"#),
    w("commit_no_verify_within_grant", r#"echo x >> README.md; git commit -qa --no-verify -m nv"#),
    w("commit_quiet_status_off", r#"echo x >> README.md; git -c commit.status=false commit -qa -m s"#),
    w("commit_many_files", r#"for i in 1 2 3 4 5 6 7 8 9; do echo $i > docs/f$i.md; done; git add docs; git commit -qm many"#),
    w("commit_delete", r#"git rm -q docs/guide.md; git commit -qm delete"#),
    w("commit_rename", r#"git mv docs/guide.md docs/manual.md; git commit -qm rename"#),
    w("commit_case_rename", r#"git mv docs/guide.md docs/Guide.md; git commit -qm case"#),
    w("commit_move_between_granted_dirs", r#"git mv docs/guide.md src/guide.md; git commit -qm move"#),
    w("commit_mode_change", r#"chmod +x src/lib.rs; git commit -qam exec"#),
    w("commit_update_index_chmod", r#"git update-index --chmod=+x src/lib.rs; git commit -qm exec; chmod +x src/lib.rs"#),
    w("commit_symlink", r#"ln -s guide.md docs/link.md; git add docs/link.md; git commit -qm link"#),
    w("commit_symlink_to_file_typechange", r#"rm docs/guide.md; ln -s ../README.md docs/guide.md; git commit -qam typechange"#),
    w("commit_deep_directory", r#"c docs/a/b/c/d/e/f.md"#),
    w("commit_binary", r#"head -c 4096 /dev/urandom > docs/blob.bin; git add docs/blob.bin; git commit -qm bin"#),
    w("commit_large_file", r#"head -c 3000000 /dev/urandom > docs/big.bin; git add docs/big.bin; git commit -qm big"#),
    w("commit_empty_file", r#": > docs/empty.md; git add docs/empty.md; git commit -qm empty-file"#),
    w("commit_crlf_content", r#"printf 'a\r\nb\r\n' > docs/crlf.md; git add docs/crlf.md; git commit -qm crlf"#),
    w("commit_nested_gitignore", r#"echo '*.tmp' > docs/.gitignore; echo junk > docs/x.tmp; git add docs/.gitignore; git commit -qm ignore"#),
    w("commit_intent_to_add_then_drop", r#"echo n > docs/n.md; git add -N docs/n.md; git rm -q --cached docs/n.md; rm docs/n.md; c docs/a.md"#),
    w("commit_add_patch", r#"printf 'one\ntwo\n' > docs/guide.md; printf 'y\n' | git add -p docs/guide.md >/dev/null; git commit -qm patch"#),
    w("commit_renormalize", r#"git add --renormalize .; c docs/a.md"#),
    w("commit_from_subdirectory", r#"cd docs; echo x >> guide.md; git commit -qam sub"#),
    w("commit_with_dash_c", r#"echo x >> docs/guide.md; git -C docs commit -qam dash-c"#),
    w("commit_with_git_dir_env", r#"echo x >> README.md; GIT_DIR=.git GIT_WORK_TREE=. git commit -qam env"#),
    w("commit_max_commits", r#"for i in 1 2 3 4 5; do c docs/n$i.md; done"#),
    at_max("commit_exactly_one", 1, r#"c docs/only.md"#),
    // Odd file names.
    w("name_spaces", r#"c 'docs/with space.md'"#),
    w("name_unicode_nfc", r#"c "docs/$(printf 'caf\xc3\xa9').md""#),
    w("name_unicode_nfd", r#"c "docs/$(printf 'cafe\xcc\x81').md""#),
    w("name_leading_dash", r#"c docs/-rf.md"#),
    w("name_only_dashes", r#"mkdir -p docs; echo x > docs/--; git add -- docs/--; git commit -qm dashes"#),
    w("name_newline", r#"f="$(printf 'docs/new\nline.md')"; echo x > "$f"; git add -- "$f"; git commit -qm nl"#),
    w("name_tab", r#"f="$(printf 'docs/tab\there.md')"; echo x > "$f"; git add -- "$f"; git commit -qm tab"#),
    w("name_quotes_and_backslash", r#"c 'docs/q"uote\back.md'"#),
    w("name_glob_characters", r#"c 'docs/[id]/page*.md'"#),
    w("name_emoji", r#"c "docs/$(printf '\xf0\x9f\x9a\x80').md""#),
    w("name_long", r#"c "docs/$(printf 'a%.0s' $(seq 1 200)).md""#),
    w("name_hash_and_percent", r#"c 'docs/#50%.md'"#),
    w("name_dotfile", r#"c docs/.hidden"#),
    w("name_latin1_bytes", r#"f="$(printf 'docs/l\xe9.md')"; echo x > "$f"; git add -- "$f"; git commit -qm latin1"#),
    // Amend.
    w("amend_message", r#"c docs/a.md; git commit -q --amend -m renamed"#),
    w("amend_no_edit", r#"c docs/a.md; echo more >> docs/a.md; git commit -qa --amend --no-edit"#),
    w("amend_reset_author", r#"c docs/a.md; git commit -q --amend --reset-author --no-edit"#),
    w("amend_date", r#"c docs/a.md; git commit -q --amend --no-edit --date='2002-02-02T00:00:00Z'"#),
    at_max("amend_at_limit", 1, r#"c docs/a.md; echo b >> docs/a.md; git commit -qa --amend --no-edit"#),
    at_max("amend_prefix_at_limit", 1, r#"c docs/a.md; echo b >> docs/a.md; git commit -qa --amen --no-edit"#),
    at_max("amend_alias_at_limit", 1, r#"c docs/a.md; echo b >> docs/a.md; git add docs/a.md; git -c alias.fix='commit --amend --no-edit' fix -q"#),
    at_max("amend_shell_alias_at_limit", 1, r#"c docs/a.md; echo b >> docs/a.md; git add docs/a.md; git -c alias.fix='!git commit --amend --no-edit -q' fix"#),
    at_max("amend_twice_at_limit", 1, r#"c docs/a.md; git commit -q --amend -m one; git commit -q --amend -m two"#),
    // Fixup and autosquash.
    w("fixup_autosquash", r#"c docs/a.md; c docs/b.md; echo fix >> docs/a.md; git add docs/a.md; git commit -q --fixup HEAD~1; git rebase -q -i --autosquash "$BASE""#),
    w("squash_autosquash", r#"c docs/a.md; echo s >> docs/a.md; git add docs/a.md; git commit -q --squash HEAD -m more; git rebase -q -i --autosquash "$BASE""#),
    w("fixup_amend_autosquash", r#"c docs/a.md; echo s >> docs/a.md; git add docs/a.md; git commit -q --fixup=amend:HEAD; git rebase -q -i --autosquash "$BASE""#),
    w("fixup_reword_autosquash", r#"c docs/a.md; git commit -q --fixup=reword:HEAD; git rebase -q -i --autosquash "$BASE""#),
    at_max("fixup_autosquash_within_max", 2, r#"c docs/a.md; echo fix >> docs/a.md; git add docs/a.md; git commit -q --fixup HEAD; git rebase -q -i --autosquash "$BASE""#),
    w("autosquash_config_rebase", r#"c docs/a.md; echo f >> docs/a.md; git commit -qa --fixup HEAD; git -c rebase.autoSquash=true rebase -q -i "$BASE""#),
    // Reset and restore.
    w("reset_soft_squash", r#"c docs/a.md; c docs/b.md; git reset -q --soft "$BASE"; git commit -qm squashed"#),
    w("reset_mixed_recommit", r#"c docs/a.md; c docs/b.md; git reset -q HEAD~1; git add docs/b.md; git commit -qm again"#),
    w("reset_hard_drop_last", r#"c docs/a.md; c docs/b.md; git reset -q --hard HEAD~1"#),
    w("reset_keep", r#"c docs/a.md; c docs/b.md; git reset -q --keep HEAD~1"#),
    w("reset_merge", r#"c docs/a.md; c docs/b.md; git reset -q --merge HEAD~1"#),
    w("reset_to_baseline_and_redo", r#"c docs/a.md; git reset -q --hard "$BASE"; c docs/b.md"#),
    w("reset_path_unstage", r#"echo x >> README.md; git add README.md; git reset -q -- README.md; git checkout -- README.md; c docs/a.md"#),
    w("restore_staged_and_worktree", r#"echo x >> README.md; git add README.md; git restore --staged README.md; git restore README.md; c docs/a.md"#),
    w("restore_from_baseline", r#"c docs/guide.md changed; git restore --source="$BASE" docs/guide.md; git commit -qam back"#),
    w("checkout_file_from_baseline", r#"c docs/guide.md changed; git checkout "$BASE" -- docs/guide.md; git commit -qm back"#),
    w("clean_untracked", r#"echo junk > junk.txt; mkdir -p target; echo o > target/out; git clean -fdq; c docs/a.md"#),
    w("ignored_build_output_left", r#"mkdir -p target; echo o > target/out; c docs/a.md"#),
    // Rebase.
    w("rebase_noop", r#"c docs/a.md; git rebase -q "$BASE""#),
    w("rebase_force", r#"c docs/a.md; c docs/b.md; git rebase -q --force-rebase "$BASE""#),
    w("rebase_apply_backend", r#"c docs/a.md; c docs/b.md; git rebase -q --apply --force-rebase "$BASE""#),
    w("rebase_interactive_noop", r#"c docs/a.md; c docs/b.md; git rebase -q -i "$BASE""#),
    w("rebase_reorder", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i -n '2p;1p'" git rebase -q -i "$BASE""#),
    w("rebase_drop", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i 1s/^pick/drop/" git rebase -q -i "$BASE""#),
    w("rebase_reword", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i 1s/^pick/reword/" GIT_EDITOR='echo reworded >' git rebase -q -i "$BASE""#),
    w("rebase_squash", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i 2s/^pick/squash/" git rebase -q -i "$BASE""#),
    w("rebase_fixup_c", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i 2s/^pick/fixup\ -C/" git rebase -q -i "$BASE""#),
    w("rebase_edit_amend_continue", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i 1s/^pick/edit/" git rebase -q -i "$BASE"; echo e >> docs/a.md; git commit -qa --amend --no-edit; git rebase --continue >/dev/null"#),
    w("rebase_edit_split", r#"c docs/a.md; echo b > docs/b.md; git add docs/b.md; git commit -q --amend --no-edit; GIT_SEQUENCE_EDITOR="sed -i 1s/^pick/edit/" git rebase -q -i "$BASE"; git reset -q HEAD~1; git add docs/a.md; git commit -qm a; git add docs/b.md; git commit -qm b; git rebase --continue >/dev/null"#),
    w("rebase_break_continue", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i '1a break'" git rebase -q -i "$BASE"; git rebase --continue >/dev/null"#),
    w("rebase_abort", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i '1a break'" git rebase -q -i "$BASE"; git rebase --abort"#),
    w("rebase_quit_then_reset", r#"c docs/a.md; c docs/b.md; GIT_SEQUENCE_EDITOR="sed -i '1a break'" git rebase -q -i "$BASE"; git rebase --quit; git checkout -q main"#),
    w("rebase_exec", r#"c docs/a.md; c docs/b.md; git rebase -q -x true "$BASE""#),
    w("rebase_autostash", r#"c docs/a.md; c docs/b.md; echo dirty >> README.md; git rebase -q --autostash --force-rebase "$BASE"; git commit -qam readme"#),
    w("rebase_rebase_merges", r#"c docs/a.md; c docs/b.md; git rebase -q -i --rebase-merges "$BASE""#),
    w("rebase_update_refs", r#"c docs/a.md; c docs/b.md; git rebase -q -i --update-refs "$BASE""#),
    w("rebase_keep_base", r#"c docs/a.md; git rebase -q --keep-base "$BASE""#),
    w("rebase_signoff", r#"c docs/a.md; c docs/b.md; git rebase -q --signoff "$BASE""#),
    w("rebase_committer_date", r#"c docs/a.md; git rebase -q --committer-date-is-author-date "$BASE""#),
    w("rebase_conflict_resolved", r#"c docs/a.md one; c docs/a.md two; GIT_SEQUENCE_EDITOR="sed -i 1s/^pick/drop/" git rebase -q -i "$BASE" || true; echo resolved > docs/a.md; git add docs/a.md; git rebase --continue >/dev/null"#),
    // Cherry-pick and revert of the agent's own commits.
    w("cherry_pick_own_commit", r#"c docs/a.md; x=$(git rev-parse HEAD); git reset -q --hard "$BASE"; git cherry-pick "$x" >/dev/null"#),
    w("cherry_pick_range", r#"c docs/a.md; c docs/b.md; x=$(git rev-parse HEAD); git reset -q --hard "$BASE"; git cherry-pick "$BASE..$x" >/dev/null"#),
    w("cherry_pick_x", r#"c docs/a.md; x=$(git rev-parse HEAD); git reset -q --hard "$BASE"; git cherry-pick -x "$x" >/dev/null"#),
    w("cherry_pick_no_commit", r#"c docs/a.md; c docs/b.md; x=$(git rev-parse HEAD); git reset -q --hard "$BASE"; git cherry-pick -n "$BASE..$x"; git commit -qm both"#),
    w("cherry_pick_from_detached", r#"git switch -q --detach; c docs/a.md; x=$(git rev-parse HEAD); git switch -q main; git cherry-pick "$x" >/dev/null"#),
    w("cherry_pick_abort", r#"c docs/a.md one; x=$(git rev-parse HEAD); c docs/a.md two; git cherry-pick "$x" >/dev/null 2>&1 || true; git cherry-pick --abort 2>/dev/null || true; git status --porcelain | grep -q . && exit 1 || true"#),
    w("revert_own_commit", r#"c docs/a.md; git revert --no-edit HEAD >/dev/null"#),
    w("revert_no_commit", r#"c docs/a.md; c docs/b.md; git revert -n HEAD; git commit -qm revert-b"#),
    w("revert_then_reset", r#"c docs/a.md; git revert --no-edit HEAD >/dev/null; git reset -q --hard HEAD~1"#),
    // Merges of the agent's own work (linear results).
    w("merge_fast_forward", r#"git switch -q --detach; c docs/a.md; x=$(git rev-parse HEAD); git switch -q main; git merge -q --ff-only "$x""#),
    w("merge_squash", r#"git switch -q --detach; c docs/a.md; c docs/b.md; x=$(git rev-parse HEAD); git switch -q main; git merge -q --squash "$x"; git commit -qm squashed"#),
    w("merge_autostash_ff", r#"git switch -q --detach; c docs/a.md; x=$(git rev-parse HEAD); git switch -q main; echo d >> README.md; git merge -q --autostash --ff-only "$x"; git commit -qam readme"#),
    w("merge_squash_autostash", r#"git switch -q --detach; c docs/a.md; x=$(git rev-parse HEAD); git switch -q main; echo d >> README.md; git -c merge.autoStash=true merge -q --squash "$x"; git commit -qm squash; git commit -qam readme"#),
    // Conflicts resolved and committed, or aborted: the operation's files
    // (MERGE_HEAD, MERGE_MSG, SQUASH_MSG, CHERRY_PICK_HEAD,
    // REVERT_HEAD) are gone when it ends. (A merge commit is refused on
    // purpose: the history must be linear.)
    w("merge_conflict_aborted", r#"git switch -q --detach; c docs/a.md one; x=$(git rev-parse HEAD); git switch -q main; c docs/a.md two; git merge -q "$x" >/dev/null 2>&1 || true; git merge --abort"#),
    w("merge_squash_conflict_resolved", r#"git switch -q --detach; c docs/a.md one; x=$(git rev-parse HEAD); git switch -q main; c docs/a.md two; git merge -q --squash "$x" >/dev/null 2>&1 || true; echo resolved > docs/a.md; git add docs/a.md; git commit -q --no-edit"#),
    w("cherry_pick_conflict_resolved", r#"c docs/a.md one; x=$(git rev-parse HEAD); git reset -q --hard "$BASE"; c docs/a.md two; git cherry-pick "$x" >/dev/null 2>&1 || true; git rev-parse -q --verify CHERRY_PICK_HEAD >/dev/null; echo resolved > docs/a.md; git add docs/a.md; git commit -q --no-edit"#),
    w("revert_conflict_resolved", r#"c docs/a.md one; c docs/a.md two; git revert --no-edit HEAD~1 >/dev/null 2>&1 || true; git rev-parse -q --verify REVERT_HEAD >/dev/null; echo resolved > docs/a.md; git add docs/a.md; git commit -q --no-edit"#),
    w("detach_experiment_and_return", r#"git switch -q --detach; c docs/try.md; git switch -q -; c docs/a.md"#),
    w("checkout_baseline_detached_and_back", r#"c docs/a.md; git checkout -q "$BASE"; git checkout -q main"#),
    // Patches.
    w("format_patch_am", r#"c docs/a.md; git format-patch -q -1 -o "$SCRATCH/p"; git reset -q --hard "$BASE"; git am -q "$SCRATCH"/p/*.patch"#),
    w("format_patch_am_3way", r#"c docs/a.md; c docs/b.md; git format-patch -q -2 -o "$SCRATCH/p"; git reset -q --hard "$BASE"; git am -q -3 "$SCRATCH"/p/*.patch"#),
    w("am_abort", r#"c docs/a.md; git format-patch -q -1 -o "$SCRATCH/p"; git am -q "$SCRATCH"/p/*.patch 2>/dev/null || git am --abort"#),
    w("apply_worktree", r#"echo x >> docs/guide.md; git diff > "$SCRATCH/d"; git checkout -- docs/guide.md; git apply "$SCRATCH/d"; git commit -qam applied"#),
    w("apply_index", r#"echo x >> docs/guide.md; git diff > "$SCRATCH/d"; git checkout -- docs/guide.md; git apply --index "$SCRATCH/d"; git commit -qm applied"#),
    w("apply_cached", r#"echo x >> docs/guide.md; git diff > "$SCRATCH/d"; git checkout -- docs/guide.md; git apply --cached "$SCRATCH/d"; git commit -qm applied; git checkout -- docs/guide.md"#),
    w("apply_reverse", r#"c docs/a.md; git show HEAD > "$SCRATCH/d"; git apply -R "$SCRATCH/d"; git commit -qam undo"#),
    w("format_patch_stdout_check", r#"c docs/a.md; git format-patch --stdout -1 | git apply --check -R"#),
    // Stash.
    w("stash_pop", r#"echo x >> README.md; git stash -q; c docs/a.md; git stash pop -q; git commit -qam readme"#),
    w("stash_untracked", r#"echo n > docs/n.md; git stash -q -u; c docs/a.md; git stash pop -q; git add docs/n.md; git commit -qm n"#),
    w("stash_apply_drop", r#"echo x >> README.md; git stash -q; git stash apply -q; git stash drop -q; git commit -qam readme"#),
    w("stash_keep_index", r#"echo x >> README.md; echo y >> docs/guide.md; git add docs/guide.md; git stash -q --keep-index; git commit -qm guide; git stash pop -q; git commit -qam readme"#),
    w("stash_message_list_show_clear", r#"echo x >> README.md; git stash push -q -m parked; git stash list >/dev/null; git stash show -p >/dev/null; git stash clear; c docs/a.md"#),
    w("stash_pathspec", r#"echo x >> README.md; echo y >> docs/guide.md; git stash push -q -- README.md; git commit -qam guide; git stash pop -q; git commit -qam readme"#),
    w("stash_staged", r#"echo x >> README.md; git add README.md; git stash push -q --staged; git stash pop -q --index; git commit -qm readme"#),
    w("stash_create_no_ref", r#"echo x >> README.md; s=$(git stash create); git reset -q --hard; git stash apply -q "$s"; git commit -qam readme"#),
    w("stash_twice_pop_both", r#"echo x >> README.md; git stash -q; echo y >> docs/guide.md; git stash -q; git stash pop -q; git stash pop -q; git commit -qam both"#),
    // Bisect.
    w("bisect_manual", r#"c docs/a.md; c docs/b.md; c docs/c.md; git bisect start HEAD "$BASE" >/dev/null; git bisect good >/dev/null; git bisect bad >/dev/null || true; git bisect reset >/dev/null"#),
    w("bisect_run", r#"c docs/a.md; c docs/b.md; c docs/c.md; git bisect start HEAD "$BASE" >/dev/null; git bisect run sh -c 'test ! -e docs/b.md' >/dev/null; git bisect reset >/dev/null"#),
    w("bisect_log_replay", r#"c docs/a.md; c docs/b.md; git bisect start HEAD "$BASE" >/dev/null; git bisect log > "$SCRATCH/log"; git bisect reset >/dev/null; git bisect replay "$SCRATCH/log" >/dev/null; git bisect reset >/dev/null"#),
    // Housekeeping.
    w("gc", r#"c docs/a.md; git gc -q"#),
    w("gc_aggressive_prune_now", r#"c docs/a.md; git reset -q --hard HEAD; git gc -q --aggressive --prune=now"#),
    w("gc_auto", r#"c docs/a.md; git gc -q --auto"#),
    w("repack_ad", r#"c docs/a.md; git repack -q -a -d"#),
    w("repack_adf", r#"c docs/a.md; git repack -q -a -d -f"#),
    w("repack_bitmap_then_delete_bitmap", r#"c docs/a.md; git repack -q -a -d --write-bitmap-index; rm -f .git/objects/pack/*.bitmap"#),
    w("repack_bitmap_kept", r#"c docs/a.md; git repack -q -a -d --write-bitmap-index"#),
    w("gc_write_bitmaps_bloom_filters", r#"git commit-graph write --reachable --changed-paths; c docs/a.md; git -c repack.writeBitmaps=true gc -q; git maintenance run --task=commit-graph >/dev/null"#),
    w("geometric_midx_bitmap", r#"c docs/a.md; git repack -q -d; c docs/b.md; git repack -q -d; git repack -q --geometric=2 -d --write-midx --write-bitmap-index"#),
    w("multi_pack_index_bitmap", r#"c docs/a.md; git repack -q -d; git multi-pack-index write --bitmap"#),
    w("commit_graph_changed_paths", r#"c docs/a.md; git commit-graph write --reachable --changed-paths >/dev/null 2>&1"#),
    w("repack_cruft", r#"c docs/a.md; git reset -q --hard HEAD; git repack -q -a -d --cruft"#),
    w("commit_graph_write", r#"c docs/a.md; git commit-graph write --reachable >/dev/null 2>&1"#),
    w("commit_graph_split", r#"c docs/a.md; git commit-graph write --reachable --split >/dev/null 2>&1"#),
    w("multi_pack_index", r#"c docs/a.md; git repack -q -d; git multi-pack-index write"#),
    w("maintenance_tasks", r#"c docs/a.md; git repack -q -d; git maintenance run --task=commit-graph --task=loose-objects --task=incremental-repack --task=pack-refs >/dev/null"#),
    w("maintenance_gc", r#"c docs/a.md; git maintenance run --task=gc >/dev/null 2>&1"#),
    w("pack_refs_all", r#"c docs/a.md; git pack-refs --all"#),
    w("prune", r#"c docs/a.md; git prune"#),
    w("reflog_expire_and_gc", r#"c docs/a.md; git reflog expire --expire=now --all; git gc -q --prune=now"#),
    w("fsck_and_count_objects", r#"c docs/a.md; git fsck --no-progress >/dev/null; git count-objects -v >/dev/null"#),
    w("read_only_inspection", r#"c docs/a.md; git log --oneline >/dev/null; git show --stat >/dev/null; git blame docs/a.md >/dev/null; git describe --always >/dev/null; git shortlog -s HEAD >/dev/null; git range-diff "$BASE" HEAD HEAD >/dev/null; git diff --cached --exit-code"#),
    w("status_and_diff_refresh_index", r#"c docs/a.md; touch README.md; git status >/dev/null; git diff --quiet"#),
    w("update_index_refresh", r#"c docs/a.md; touch docs/guide.md; git update-index --refresh -q"#),
    // Temporary index files.
    w("temp_index_commit", r#"cp .git/index "$SCRATCH/idx"; echo t > docs/t.md; GIT_INDEX_FILE="$SCRATCH/idx" git add docs/t.md; GIT_INDEX_FILE="$SCRATCH/idx" git commit -qm temp; git reset -q"#),
    w("temp_index_plumbing", r#"echo t > docs/t.md; b=$(git hash-object -w docs/t.md); export GIT_INDEX_FILE="$SCRATCH/idx"; git read-tree HEAD; git update-index --add --cacheinfo 100644 "$b" docs/t.md; t=$(git write-tree); unset GIT_INDEX_FILE; rm docs/t.md; c2=$(git commit-tree "$t" -p HEAD -m plumbing); git merge -q --ff-only "$c2""#),
    w("commit_tree_update_ref", r#"echo t > docs/t.md; git add docs/t.md; t=$(git write-tree); n=$(git commit-tree "$t" -p HEAD -m plumbing); git update-ref refs/heads/main "$n" HEAD"#),
    // Signed commits (offline, temporary keys).
    w("signed_ssh", r#"ssh-keygen -q -t ed25519 -N '' -f "$SCRATCH/key"; echo x >> README.md; git -c gpg.format=ssh -c user.signingKey="$SCRATCH/key" commit -qa -S -m signed"#),
    w("signed_gpg", r#"export GNUPGHOME="$SCRATCH/gnupg"; mkdir -m 700 "$GNUPGHOME"; gpg -q --batch --pinentry-mode loopback --passphrase '' --quick-gen-key 'Test Agent <agent@example.invalid>' ed25519 sign never 2>/dev/null; echo x >> README.md; git commit -qa -S -m signed"#),
    // Prepared checkouts.
    prepared("submodule_present",
        r#"git init -q "$SCRATCH/sub"; git -C "$SCRATCH/sub" commit -q --allow-empty -m s; git -c protocol.file.allow=always submodule -q add "$SCRATCH/sub" lib/sub; git commit -qm sub"#,
        r#"c docs/a.md; git submodule status >/dev/null; git submodule foreach -q true"#),
    prepared("sparse_checkout_cone",
        r#"git sparse-checkout set docs"#,
        r#"c docs/a.md"#),
    prepared("sparse_checkout_no_cone",
        r#"git sparse-checkout set --no-cone '/docs/' '/README.md'"#,
        r#"echo x >> README.md; git commit -qam readme"#),
    prepared("lfs_tracked_file",
        r#"git lfs install --local >/dev/null; git lfs track 'docs/*.bin' >/dev/null; git add .gitattributes; git commit -qm lfs"#,
        r#"head -c 2048 /dev/urandom > docs/x.bin; git add docs/x.bin; git commit -qm bin; git lfs ls-files >/dev/null"#),
    // A scratch worktree the agent adds and removes leaves nothing behind
    // (its hooks do not hinder it: it is not armed); one left in place is
    // rejected (tests/hooks.rs).
    w("scratch_linked_worktree_added_and_removed",
        r#"git worktree add -q --detach "$SCRATCH/wt"; git worktree remove "$SCRATCH/wt"; c docs/a.md"#),
    prepared("global_autocrlf_checkout",
        r#"git config --global core.autocrlf true; rm README.md docs/guide.md; git checkout -- ."#,
        r#"printf 'a\r\n' > docs/a.md; git add docs/a.md; git commit -qm crlf"#),
];

/// Workflows an agent might try that grantguard refuses on purpose or
/// cannot judge yet, each with its reason; the test keeps them refused, so
/// the list in docs/guide/compatibility.md stays exact. Not counted as legitimate workflows.
#[rustfmt::skip]
const KNOWN_REFUSALS: &[(Workflow, &str)] = &[];

/// Runs `script` with the prelude in the worktree; `Err` with its output.
fn bash(sb: &Sandbox, base: &str, scratch: &std::path::Path, script: &str) -> Result<(), String> {
    let out = sb
        .command("bash")
        .current_dir(&sb.repo)
        .arg("-c")
        .arg(format!("{PRELUDE}{script}"))
        .env("BASE", base)
        .env("SCRATCH", scratch)
        .env("GIT_EDITOR", "true")
        .env("GIT_SEQUENCE_EDITOR", "true")
        .env("GIT_MERGE_AUTOEDIT", "no")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exit {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Sets up, arms, runs and verifies one workflow; `Err` says where it failed.
fn run_one(workflow: &Workflow) -> Result<(), String> {
    let sb = Sandbox::new();
    let scratch = sb.root.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let base = sb.git(&["rev-parse", "HEAD"]);
    if !workflow.setup.is_empty() {
        bash(&sb, &base, &scratch, workflow.setup).map_err(|e| format!("setup: {e}"))?;
    }
    let base = sb.git(&["rev-parse", "HEAD"]);
    let grant = sb.grant(&["docs/", "README.md", "src/"], 1, workflow.max);
    let out = sb.arm_output(&grant, &sb.state);
    if !out.status.success() {
        return Err(format!("arm: {}", String::from_utf8_lossy(&out.stderr)));
    }
    bash(&sb, &base, &scratch, workflow.run).map_err(|e| format!("refused: {e}"))?;
    let (code, result) = sb.verify();
    if code != 0 {
        return Err(format!(
            "rejected: {}",
            serde_json::to_string(&result["violations"]).unwrap()
        ));
    }
    Ok(())
}

#[test]
fn workflow_names_are_unique() {
    let mut names: Vec<_> = WORKFLOWS.iter().map(|w| w.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before);
    assert!(before >= 100, "only {before} workflows");
}

#[test]
fn accepts_every_legitimate_workflow() {
    let only = std::env::var("WORKFLOW").ok();
    let selected: Vec<&Workflow> = WORKFLOWS
        .iter()
        .filter(|w| only.as_deref().is_none_or(|o| w.name.contains(o)))
        .collect();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                while let Some(w) = selected.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Err(e) = run_one(w) {
                        failures.lock().unwrap().push(format!("{}: {e}", w.name));
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {} workflows accepted; false refusals:\n{}",
        selected.len() - failures.len(),
        selected.len(),
        failures.join("\n")
    );
}

#[test]
fn known_refusals_stay_refused() {
    for (workflow, why) in KNOWN_REFUSALS {
        assert!(
            run_one(workflow).is_err(),
            "{} is accepted now; move it to WORKFLOWS and update docs/guide/compatibility.md ({why})",
            workflow.name
        );
    }
}
