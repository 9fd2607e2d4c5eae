//! Final acceptance: does the repository, as the agent left it, satisfy the
//! grant recorded in the baseline? The rules, in the order they are checked:
//!
//! | rule | holds when |
//! | --- | --- |
//! | `protected_metadata_changed` | protected metadata equals the baseline (checked first; when it fails the worktree is not read) |
//! | `ref_store_invalid` | the ref store is canonical, gix reads it as git does, and nothing git resolves first shadows the branch |
//! | `head_not_on_branch` | HEAD is still a symref to the baseline branch |
//! | `not_descendant` | the branch tip descends from the baseline commit |
//! | `merge_commit` | every new commit has exactly one parent |
//! | `commit_count_out_of_bounds` | `min <= count(baseline..tip) <= max` |
//! | `path_not_granted` | every path every new commit changed is granted |
//! | `dotgit_path` | no new commit changes a path with a `.git` component |
//! | `symlink_escapes_repository` | no new commit makes a granted path a symlink leaving the worktree |
//! | `object_invalid` | every new commit, and every tree and special blob it introduces, is in the canonical shape git writes and fsck accepts |
//! | `ref_changed` / `remote_tracking_ref_changed` | every other ref equals the baseline |
//! | `worktree_not_clean` | index and worktree equal the tip, nothing untracked, no operation in progress |
//! | `changed_during_verify` | HEAD, refs and metadata read at the end equal what was read at the start |
//!
//! Every violation is reported (at most [`MAX_LISTED`] per rule, with the
//! totals in the evidence), never only the first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use serde_json::json;

use crate::baseline::Baseline;
use crate::digest::sha256_hex;
use crate::grant::{Grant, PathMatcher, has_dotgit_component};
use crate::peers::{Peers, Snapshot};
use crate::repo::{self, ChangedPath, Head, RefMap, refname, refs_since_arm, refstore};
use crate::result::{FailureClass, MAX_LISTED, ToolResult, Violation};

/// Stable rule ids. Control flow and other programs depend on these names.
pub mod rule {
    /// Protected `.git` metadata differs from the baseline.
    pub const PROTECTED_METADATA_CHANGED: &str = "protected_metadata_changed";
    /// HEAD is detached or points to another branch.
    pub const HEAD_NOT_ON_BRANCH: &str = "head_not_on_branch";
    /// The branch tip does not descend from the baseline commit.
    pub const NOT_DESCENDANT: &str = "not_descendant";
    /// A new commit does not have exactly one parent.
    pub const MERGE_COMMIT: &str = "merge_commit";
    /// Too few or too many new commits.
    pub const COMMIT_COUNT_OUT_OF_BOUNDS: &str = "commit_count_out_of_bounds";
    /// A new commit changed a path the grant does not allow.
    pub const PATH_NOT_GRANTED: &str = "path_not_granted";
    /// A new commit changed a path with a `.git` component.
    pub const DOTGIT_PATH: &str = "dotgit_path";
    /// A ref other than the granted branch was created, deleted or moved.
    pub const REF_CHANGED: &str = "ref_changed";
    /// A `refs/remotes/*` ref was created, deleted or moved.
    pub const REMOTE_TRACKING_REF_CHANGED: &str = "remote_tracking_ref_changed";
    /// The index or worktree differs from the tip, or an operation is in
    /// progress.
    pub const WORKTREE_NOT_CLEAN: &str = "worktree_not_clean";
    /// The repository changed while it was being verified.
    pub const CHANGED_DURING_VERIFY: &str = "changed_during_verify";
    /// The baseline record is missing, unreadable or altered.
    pub const BASELINE_INVALID: &str = "baseline_invalid";
    /// The repository could not be read.
    pub const REPOSITORY_UNREADABLE: &str = "repository_unreadable";
    /// `--repo` names another repository than the armed one (`validation`;
    /// the id `run` uses for its own invalid arguments).
    pub const INVALID_ARGUMENT: &str = "invalid_argument";
    /// The system's temporary directory cannot take a scratch file
    /// (`dependency`; the machine's problem, not the repository's).
    pub const TEMP_DIR_UNUSABLE: &str = "temp_dir_unusable";
    /// `verify` did not finish within its deadline (`--timeout`).
    pub const VERIFY_TIMED_OUT: &str = "verify_timed_out";
    /// A new commit makes a granted path a symlink whose target leaves the
    /// worktree (absolute, `..` past the root, or into `.git`).
    pub const SYMLINK_ESCAPES_REPOSITORY: &str = "symlink_escapes_repository";
    /// The ref store is not canonical (a symlink, a non-canonical loose ref
    /// or `packed-refs`, a ref gix and git read differently), a name git
    /// resolves before the granted branch shadows it, or git resolves HEAD,
    /// the branch, its short name or a ref to something other than what
    /// verify read.
    pub const REF_STORE_INVALID: &str = "ref_store_invalid";
    /// The object store does not read to git as verify read it: a file
    /// written since arm cannot be proven to hold what git will read from it
    /// (a loose object or pack entry that does not hash to its id, a forged
    /// commit-graph or reverse index, a cache grantguard cannot verify), or
    /// git reads other commits, trees or changed paths for the new history.
    pub const OBJECT_STORE_INVALID: &str = "object_store_invalid";
    /// A new commit, or a tree or special blob it introduces, is not in the
    /// canonical shape git writes (git fsck's rules, git's tree depth
    /// limit): two readers could read it differently.
    pub const OBJECT_INVALID: &str = "object_invalid";
}

/// Rules whose violation means the on-disk storage itself is hostile: no
/// git command may be run on it (see the `metadata_intact` evidence).
const STORAGE_RULES: &[&str] = &[
    rule::REPOSITORY_UNREADABLE,
    rule::REF_STORE_INVALID,
    rule::OBJECT_STORE_INVALID,
    rule::OBJECT_INVALID,
];

/// Most new commits whose paths are diffed. A valid history has at most 32;
/// past this bound the result is a rejection already, and diffing a hostile
/// history of thousands of commits would only cost time.
const MAX_DIFFED_COMMITS: usize = 256;

/// Files larger than this are worth a human's eye.
const LARGE_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Violations with a cap per rule and a total per rule.
#[derive(Default, Debug)]
pub struct Findings {
    /// Listed violations, at most [`MAX_LISTED`] per rule.
    pub listed: Vec<Violation>,
    /// Total per rule, listed or not.
    pub totals: BTreeMap<String, usize>,
    /// Warnings, deduplicated.
    pub warnings: BTreeSet<String>,
    /// The worktree holds a special file where git would open one (a FIFO
    /// `.gitattributes`): git run on it would hang, so the storage counts as
    /// hostile (`metadata_intact` false) though the rule is
    /// `worktree_not_clean`.
    pub hostile_worktree: bool,
    /// git listed the refs otherwise than verify read them while they
    /// moved: a move, or a store git reads two ways, verify cannot tell
    /// which; the rule is `changed_during_verify`, but the storage is not
    /// vouched for (`metadata_intact` false: nothing runs git on it).
    pub storage_unconfirmed: bool,
    /// The object store kept changing while a `git gc` named in `gc.pid`
    /// ran (a commit starts one in the background): when that is all,
    /// verify again once it ends (`conflict`, retryable).
    pub busy_with_gc: bool,
}

impl Findings {
    /// Records a violation.
    pub fn push(&mut self, v: Violation) {
        let n = self.totals.entry(v.rule.clone()).or_default();
        *n += 1;
        if *n <= MAX_LISTED {
            self.listed.push(v);
        }
    }

    /// Whether a rule was violated.
    pub fn has(&self, rule: &str) -> bool {
        self.totals.contains_key(rule)
    }

    /// Whether nothing was violated.
    pub fn is_empty(&self) -> bool {
        self.totals.is_empty()
    }
}

/// What the history checks learned, for evidence and `status`.
#[derive(Debug, Default)]
pub struct HistoryFacts {
    /// New commits, newest first (all of them when `count` is exact).
    pub commits: Vec<ObjectId>,
    /// `count(baseline..tip)`.
    pub count: usize,
    /// Whether the tip descends from the baseline.
    pub descends: bool,
    /// Every path changed by the diffed commits, sorted and unique.
    pub paths: BTreeSet<BString>,
    /// The diffed commits, newest first: id, tree, parents.
    pub trees: Vec<(ObjectId, ObjectId, Vec<ObjectId>)>,
    /// What each diffed commit changed against its first parent.
    pub changes: Vec<(ObjectId, Vec<ChangedPath>)>,
}

/// Which commit-count bounds apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountCheck {
    /// `min <= count <= max`: final acceptance.
    Full,
    /// `count <= max`: while the agent is still working.
    MaxOnly,
}

/// Checks the commits in `baseline..tip` against the grant: descent, linear
/// history, count and paths. Shared by `verify` and the
/// `reference-transaction` hook, so both decide alike.
pub fn check_history(
    repo: &gix::Repository,
    baseline: Option<ObjectId>,
    tip: Option<ObjectId>,
    grant: &Grant,
    matcher: &PathMatcher,
    counting: CountCheck,
    findings: &mut Findings,
) -> Result<HistoryFacts> {
    let mut facts = HistoryFacts::default();
    let Some(tip) = tip else {
        // Still unborn (or the branch was deleted): no new commits.
        facts.descends = baseline.is_none();
        if !facts.descends {
            findings.push(Violation::new(
                rule::NOT_DESCENDANT,
                "the branch no longer points to a commit; it must descend from the baseline",
            ));
        }
        check_count(0, grant, counting, findings);
        return Ok(facts);
    };
    let history = match repo::new_history(repo, baseline, tip, grant.max_commits() as usize) {
        Ok(history) => history,
        Err(e) => match e.downcast_ref::<repo::canonical::NonCanonicalCommit>() {
            // Its parents cannot be trusted, so the walk stops here.
            Some(bad) => {
                findings.push(object_invalid(
                    bad.id,
                    &format!(
                        "commit {} is not in the shape git writes: {}",
                        bad.id, bad.message
                    ),
                ));
                return Ok(facts);
            }
            None => return Err(e),
        },
    };
    facts.descends = history.descends;
    facts.count = history.commits.len();
    facts.commits = history.commits.iter().map(|c| c.id).collect();
    if !history.descends {
        let base = baseline.map_or_else(|| "the baseline".into(), |b| b.to_string());
        findings.push(if history.commits.is_empty() {
            // `baseline..tip` is empty: the tip is one of the baseline's
            // ancestors, a commit the agent did not make; it is not named.
            Violation::new(
                rule::NOT_DESCENDANT,
                format!(
                    "the branch was moved below the baseline commit {base}, to one of its \
                     ancestors (a reset?); move it back with `git reset --hard {base}` and build \
                     new commits on top of it"
                ),
            )
        } else {
            Violation::new(
                rule::NOT_DESCENDANT,
                format!(
                    "the branch tip {tip} does not descend from the baseline commit {base}: its {} \
                     new commit(s) (baseline..tip) sit on another base (an amend or rebase of the \
                     baseline?); rebuild them on top of the baseline",
                    history.commits.len()
                ),
            )
            .with_commit(tip.to_string())
        });
    }
    // A tip that does not descend from the baseline is rejected for that
    // alone. Its new commits' parents are not the baseline's line, so what
    // they "change" against those parents includes the baseline's own work:
    // diagnosing them would blame commits the agent never made.
    let checked: &[repo::NewCommit] = if history.descends {
        &history.commits
    } else {
        &[]
    };
    for commit in checked {
        let root_of_unborn = baseline.is_none() && commit.parents.is_empty();
        if commit.parents.len() != 1 && !root_of_unborn {
            findings.push(
                Violation::new(
                    rule::MERGE_COMMIT,
                    format!(
                        "commit {} has {} parents; new history must be linear (rebase instead of merging)",
                        commit.id,
                        commit.parents.len()
                    ),
                )
                .with_commit(commit.id.to_string()),
            );
        }
    }
    if history.descends {
        let count = if history.truncated {
            usize::MAX
        } else {
            facts.count
        };
        check_count(count, grant, counting, findings);
    }
    if checked.len() > MAX_DIFFED_COMMITS {
        findings.warnings.insert(format!(
            "only the newest {MAX_DIFFED_COMMITS} of {} new commits were checked for paths",
            history.commits.len()
        ));
    }
    let checked = &checked[..checked.len().min(MAX_DIFFED_COMMITS)];
    let (invalid, too_deep) = check_objects(repo, checked, findings)?;
    for commit in checked {
        // A tree past git's depth limit would make an enormous diff: the
        // commit is rejected as it is.
        if too_deep.contains(&commit.id) {
            continue;
        }
        let parent = commit.parents.first().copied();
        let changes = match repo::changed_paths(repo, commit.id, parent) {
            Ok(changes) => changes,
            // Already rejected: a tree gix cannot diff adds nothing.
            Err(_) if invalid.contains(&commit.id) => continue,
            Err(e) => return Err(e),
        };
        for change in &changes {
            check_path(repo, commit.id, change, matcher, findings);
            facts.paths.insert(change.path.clone());
        }
        let tree = repo::tree_id_of(repo, Some(commit.id))?;
        facts.trees.push((commit.id, tree, commit.parents.clone()));
        facts.changes.push((commit.id, changes));
    }
    Ok(facts)
}

/// Applies git fsck's rules to the objects `commits` introduce
/// ([`repo::canonical`]); returns the commits found invalid, and those of
/// them with trees past git's depth limit.
fn check_objects(
    repo: &gix::Repository,
    commits: &[repo::NewCommit],
    findings: &mut Findings,
) -> Result<(BTreeSet<ObjectId>, BTreeSet<ObjectId>)> {
    let (mut invalid, mut too_deep) = (BTreeSet::new(), BTreeSet::new());
    for defect in repo::canonical::check_new_objects(repo, commits)? {
        invalid.insert(defect.commit);
        if defect.too_deep {
            too_deep.insert(defect.commit);
        }
        let mut v = object_invalid(defect.commit, &defect.message);
        if let Some(path) = defect.path {
            v = v.with_path(path.to_str_lossy().into_owned());
        }
        findings.push(v);
    }
    Ok((invalid, too_deep))
}

fn object_invalid(commit: ObjectId, what: &str) -> Violation {
    Violation::new(
        rule::OBJECT_INVALID,
        format!(
            "{what}; git and other readers could see different content. Recreate commit \
             {commit} with git's porcelain (git add, git commit) instead of crafted objects"
        ),
    )
    .with_commit(commit.to_string())
}

fn check_count(count: usize, grant: &Grant, counting: CountCheck, findings: &mut Findings) {
    let (min, max) = (grant.min_commits() as usize, grant.max_commits() as usize);
    let too_few = counting == CountCheck::Full && count < min;
    if too_few || count > max {
        let shown = if count == usize::MAX {
            format!("more than {}", crate::repo::FULL_WALK_LIMIT)
        } else {
            count.to_string()
        };
        let advice = if too_few {
            "commit your work"
        } else {
            "squash commits (e.g. git reset --soft to the baseline and commit again)"
        };
        findings.push(Violation::new(
            rule::COMMIT_COUNT_OUT_OF_BOUNDS,
            format!("{shown} new commit(s); the grant requires between {min} and {max}: {advice}"),
        ));
    }
}

fn check_path(
    repo: &gix::Repository,
    commit: ObjectId,
    change: &ChangedPath,
    matcher: &PathMatcher,
    findings: &mut Findings,
) {
    let shown = change.path.to_str_lossy().into_owned();
    if has_dotgit_component(&change.path) {
        findings.push(
            Violation::new(
                rule::DOTGIT_PATH,
                format!("commit {commit} changes {shown:?}, which has a .git component"),
            )
            .with_commit(commit.to_string())
            .with_path(shown),
        );
        return;
    }
    if !matcher.is_granted(&change.path) {
        findings.push(
            Violation::new(
                rule::PATH_NOT_GRANTED,
                format!("commit {commit} changes {shown:?}, which the grant does not allow"),
            )
            .with_commit(commit.to_string())
            .with_path(shown),
        );
        return;
    }
    warn_about(repo, commit, change, matcher, findings);
}

/// Symlinks leaving the worktree (a violation), and warnings for granted
/// changes that are legal but worth a look.
///
/// A committed symlink whose target leaves the worktree turns a granted path
/// into a window on the host: whoever later reads or writes the granted path
/// in a checkout (the harness, a build, the next run, a human) reads or
/// writes the file outside instead, and the grant no longer describes what a
/// change to the repository can touch. No repository change needs one, so it
/// is refused. A target inside the worktree only changes which tracked file
/// is read; writes through it show up as changes to the target's own path,
/// which the grant checks, so that is a warning.
fn warn_about(
    repo: &gix::Repository,
    commit: ObjectId,
    change: &ChangedPath,
    matcher: &PathMatcher,
    findings: &mut Findings,
) {
    let (Some(mode), Some(id)) = (change.new_mode, change.new_id) else {
        return;
    };
    let shown = change.path.to_str_lossy();
    if mode.is_link() {
        let mut buf = Vec::new();
        let escape = match repo::read_verified(repo, id, &mut buf) {
            // Judge the target git creates: symlink(2) stops at a NUL (a
            // target with one is also `object_invalid`).
            Ok(blob) => {
                let target = blob.data.split(|&b| b == 0).next().unwrap_or_default();
                symlink_escape(&change.path, target, matcher)
                    .map(|why| (why, format!("{:?}", target.to_str_lossy())))
            }
            Err(e) => Some((
                Escape::Outside("its target cannot be read"),
                format!("{e:#}"),
            )),
        };
        match escape {
            None => {}
            Some((Escape::Ungranted(why), target)) => {
                findings
                    .warnings
                    .insert(format!("symlink {shown:?} points to {target}: {why}"));
            }
            Some((Escape::Outside(why), target)) => findings.push(
                Violation::new(
                    rule::SYMLINK_ESCAPES_REPOSITORY,
                    format!(
                        "commit {commit} makes {shown:?} a symlink to {target}: {why}; a \
                         symlink may only point inside the worktree"
                    ),
                )
                .with_commit(commit.to_string())
                .with_path(shown.clone().into_owned()),
            ),
        }
    } else if mode.is_commit() {
        findings.warnings.insert(format!(
            "{shown:?} is a gitlink to commit {id} of another repository; its content is not \
             checked"
        ));
    } else if mode.is_executable() && !change.old_mode.is_some_and(|m| m.is_executable()) {
        findings
            .warnings
            .insert(format!("{shown:?} is a new executable file"));
    }
    if mode.is_blob()
        && let Ok(header) = repo.find_header(id)
        && header.size() > LARGE_FILE_BYTES
    {
        findings.warnings.insert(format!(
            "{shown:?} is {} bytes (over 10 MiB)",
            header.size()
        ));
    }
}

/// Where a symlink's target lands, when that is worth reporting.
#[derive(Debug, PartialEq, Eq)]
enum Escape {
    /// Outside the worktree: absolute, past its root, into `.git`, or the
    /// root itself (which holds `.git`).
    Outside(&'static str),
    /// Inside the worktree, on a path the grant does not cover.
    Ungranted(&'static str),
}

/// Why a symlink's target is worth a look: absolute, leaving the repository,
/// entering a `.git` directory, or landing on a path the grant does not cover.
fn symlink_escape(link: &[u8], target: &[u8], matcher: &PathMatcher) -> Option<Escape> {
    if target.starts_with(b"/") {
        return Some(Escape::Outside("an absolute target outside the repository"));
    }
    let mut parts: Vec<&[u8]> = link.split(|&b| b == b'/').collect();
    parts.pop();
    let mut descended = false;
    for part in target.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            // Climbing back out of a directory the target entered (`s/../x`)
            // is resolved by the file system, not lexically: if `s` is itself
            // a symlink (say to `../..`), `s/..` is not where it looks. Only
            // leading `..` climb real directories (the link's own parents).
            b".." if descended => {
                return Some(Escape::Outside(
                    "the target climbs out of a directory it entered (x/..), which a symlink \
                     on the way could redirect anywhere",
                ));
            }
            b".." => {
                if parts.pop().is_none() {
                    return Some(Escape::Outside("the target leaves the repository"));
                }
            }
            p => {
                descended = true;
                parts.push(p);
            }
        }
    }
    let resolved = parts.join(&b'/');
    // The worktree root itself (`docs/x -> ..`) holds `.git`: the granted
    // path `docs/x/.git/config` is then the repository's config, the same
    // escape as `docs/x -> ../.git` (issue 24, decided: refused alike).
    if resolved.is_empty() {
        return Some(Escape::Outside(
            "the target is the worktree root, through which the link reaches .git (x/.git/...) \
             as a link to ../.git would",
        ));
    }
    if has_dotgit_component(&resolved) {
        return Some(Escape::Outside("the target is inside a .git directory"));
    }
    (!matcher.is_granted(&resolved))
        .then_some(Escape::Ungranted("the target is outside the granted paths"))
}

/// Runs final acceptance for the state directory `state`. `repo_dir`, when
/// given, must be the armed repository.
///
/// While armed beside other worktrees, every verdict, early rejections
/// included, is recorded for `disarm` ([`crate::peers::Verdict`]): a stale
/// acceptance must not outlive a later rejection.
pub fn verify(state: &Path, repo_dir: Option<&Path>) -> ToolResult {
    verify_as(state, repo_dir, Site::InPlace)
}

/// Where the checkout `verify` judges lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// The repository itself: everything it holds is what git will read.
    InPlace,
    /// A sealed workspace ([`crate::workspace`]): only the commits cross,
    /// through `git fetch` with fsck and a second check of the grant on
    /// the host side, so the workspace's object store structures (bitmaps,
    /// commit-graphs with Bloom filters, multi-pack-indexes) never reach
    /// the host and are not judged.
    SealedWorkspace,
}

/// [`verify`] for a checkout at `site`.
pub fn verify_as(state: &Path, repo_dir: Option<&Path>, site: Site) -> ToolResult {
    let mut result = judge(state, repo_dir, site);
    if crate::baseline::path_in(state).exists() {
        let verdict = crate::peers::Verdict {
            accepted: result.is_success(),
            branch_value: result
                .evidence
                .get("commits")
                .and_then(|c| c.get("tip"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        };
        if let Err(e) = crate::peers::Verdict::record(state, &verdict) {
            result.warnings.push(format!(
                "cannot record the verdict for disarm ({e:#}); disarm will release the branch \
                 at the value it finds"
            ));
        }
    }
    result
}

/// [`verify`] without recording the verdict.
fn judge(state: &Path, repo_dir: Option<&Path>, site: Site) -> ToolResult {
    // The record and its refs (a file of their own) are one baseline.
    // (The refs are parsed only when verify reads every ref, entry by
    // entry: see `Baseline::for_each_ref`.)
    let read = Baseline::read_live_or_retired(state).and_then(|record| {
        let refs_file = record.0.refs_file_check()?;
        let loose_list = record.0.loose_list_check()?;
        Ok((record, refs_file, loose_list))
    });
    let (record, refs_file, loose_list) = match read {
        Ok(read) => read,
        Err(e) => return baseline_invalid(&e),
    };
    // The refs file and the list of loose refs are checked against their
    // digests beside everything else (8 and 12 MB for 100,000 refs, hashed
    // on another core; parsed only if verify needs them), and the answer
    // comes first: a damaged baseline is refused as that, whatever else
    // was found, as when it was checked before anything else.
    let checking = (refs_file.is_some() || loose_list.is_some()).then(|| {
        std::thread::spawn(move || {
            if let Some(check) = refs_file {
                check.run()?;
            }
            loose_list.map_or(Ok(()), |check| check.run())
        })
    });
    let result = judge_baseline(record, state, repo_dir, site);
    match checking.map(std::thread::JoinHandle::join) {
        None | Some(Ok(Ok(()))) => result,
        Some(Ok(Err(e))) => baseline_invalid(&e),
        Some(Err(_)) => baseline_invalid(&anyhow::anyhow!(
            "the check of the baseline's refs file failed"
        )),
    }
}

/// The refusal of a baseline that cannot be read or fails its check.
fn baseline_invalid(e: &anyhow::Error) -> ToolResult {
    ToolResult::rejected(
        "verify",
        FailureClass::UnsafeState,
        Violation::new(rule::BASELINE_INVALID, format!("{e:#}")),
    )
    .with_evidence("metadata_intact", false)
}

/// The refusal of a `--repo` that is not the armed repository's worktree
/// or a directory in it: a mistyped argument, judged before anything
/// reads the repository (a new user's finding: it was reported as an
/// unreadable repository, `unsafe_state`).
fn not_the_armed_repository(dir: &Path, baseline: &Baseline) -> Option<ToolResult> {
    let message = match dir.canonicalize() {
        Ok(resolved) if resolved.starts_with(&baseline.repo.work_dir) => return None,
        Ok(resolved) => format!(
            "--repo {} is not the armed repository {}: give the worktree the state directory \
             was armed for, or leave --repo out",
            resolved.display(),
            baseline.repo.work_dir.display()
        ),
        Err(e) => format!("cannot resolve --repo {}: {e}", dir.display()),
    };
    Some(
        ToolResult::rejected(
            "verify",
            FailureClass::Validation,
            Violation::new(rule::INVALID_ARGUMENT, message),
        )
        .with_evidence("metadata_intact", false),
    )
}

/// [`judge`] of the baseline it read.
fn judge_baseline(
    (mut baseline, grant, armed): (Baseline, Grant, bool),
    state: &Path,
    repo_dir: Option<&Path>,
    site: Site,
) -> ToolResult {
    // The refs that can have moved since arm, read before anything else
    // opens the repository: the strict walk refuses every loose ref file
    // git could hang on, so the special-file scan need not list them again
    // (100,000 loose refs are listed once less; issue 29). Any problem,
    // and the scan lists them as before, and the read is proven afresh.
    if let Some(refused) = repo_dir.and_then(|dir| not_the_armed_repository(dir, &baseline)) {
        return refused;
    }
    let early_refs = early_refs(&baseline);
    let loose_refs = match early_refs {
        EarlyRefs::Read(_) => repo::special_files::LooseRefs::ReadStrictly,
        EarlyRefs::AllRefs | EarlyRefs::Unsure => repo::special_files::LooseRefs::Scan,
    };
    if matches!(early_refs, EarlyRefs::AllRefs) {
        // Not needed by the full read: 100,000 listed loose refs were a
        // fifth of its peak memory (arm's copy of `packed-refs`, read to
        // compare with a file that changed too much, another 6 MB).
        baseline.release_refs_at_arm();
    }
    if let Some(rejected) = special_files(&baseline.repo, loose_refs) {
        return rejected;
    }
    // The rest of the worktree is walked for special files meanwhile; its
    // answer is awaited before gix reads the worktree (in `evaluate`).
    let worktree_scan = repo::special_files::spawn_worktree_scan(baseline.repo.work_dir.clone());
    let mut findings = Findings::default();
    // The other worktrees armed beside this one (see `peers`): a hub that
    // no longer routes this worktree's hooks to this state is a switched-off
    // hook, like a changed `core.hooksPath`.
    let peers = match Snapshot::for_verify(state, armed).and_then(|s| {
        if let Some(s) = &s
            && armed
        {
            own_entry_is_this_state(&s.own, state)?;
        }
        Ok(s)
    }) {
        Ok(snapshot) => Peers::confirm(snapshot, &baseline),
        Err(e) => {
            findings.push(Violation::new(
                rule::PROTECTED_METADATA_CHANGED,
                format!(
                    "the repository's hub does not route this worktree's hooks to this grant: {e:#}"
                ),
            ));
            Peers::default()
        }
    };
    for warning in &peers.unconfirmed {
        findings.warnings.insert(warning.clone());
    }
    // Protected metadata first: before anything reads the worktree (where a
    // changed config could make a program run). Metadata that cannot be read
    // counts as changed.
    let metadata = match repo::metadata_digests(&baseline.repo, &baseline.hooks) {
        Ok(now) => {
            compare_metadata(
                &Expected::of(&baseline, armed, &peers).with_config_texts(&baseline, state),
                &now,
                &mut findings,
            );
            Some(now)
        }
        Err(e) => {
            findings.push(Violation::new(
                rule::PROTECTED_METADATA_CHANGED,
                format!("protected git metadata cannot be read: {e:#}"),
            ));
            None
        }
    };
    let metadata_intact = findings.is_empty();
    // The verified index's resolve-undo records whose objects the object
    // check looked for (`None`: it looked for none).
    let mut looked_for_resolve_undo = None;
    if site == Site::InPlace {
        looked_for_resolve_undo = check_object_store(&baseline, state, &mut findings);
        crate::fsutil::pause_point("verify-objects-checked");
        // The proof of a rewritten store is verify's largest use of memory
        // on many threads; none of it outlives the proof.
        crate::allocator::release_free_memory();
    }
    // Whatever goes wrong below, the findings so far stand: an error adds
    // `repository_unreadable`, it never replaces what was already found.
    let observed = evaluate(
        &baseline,
        &grant,
        &peers,
        state,
        metadata.as_ref().filter(|_| metadata_intact),
        worktree_scan,
        early_refs,
        looked_for_resolve_undo.as_deref(),
        &mut findings,
    );
    let observed = match observed {
        Ok(observed) => observed,
        Err(e) => {
            findings.push(Violation::new(
                rule::REPOSITORY_UNREADABLE,
                format!("{e:#}"),
            ));
            Observed::default()
        }
    };
    // Positive evidence for whoever acts on the result (run's restore runs
    // git in the checkout only when this is true).
    // Storage or objects git would read differently from us are hostile.
    let intact = metadata_intact
        && !findings.hostile_worktree
        && !findings.storage_unconfirmed
        && !STORAGE_RULES.iter().any(|r| findings.has(r));
    // Only refs that are nobody's changed, while other worktrees were armed
    // beside this one: the change may well be a peer's (in place, a ref
    // store is shared and a bypassed hook leaves no trace of who wrote
    // it). Not this task's failure for good: a `conflict` that names the
    // peers (issue 30). Any finding of this worktree's own keeps it
    // `verification`.
    let ref_rules = [rule::REF_CHANGED, rule::REMOTE_TRACKING_REF_CHANGED];
    let listed_ref_changes: Vec<&Violation> = findings
        .listed
        .iter()
        .filter(|v| ref_rules.contains(&v.rule.as_str()))
        .collect();
    let peers_in_question = intact
        && !peers.describe().is_empty()
        && !findings.totals.is_empty()
        && findings.totals.keys().all(|r| ref_rules.contains(&r.as_str()))
        // Every change listed (none beyond the list) and none of them a
        // peer's branch, whose rules are the peers' own (red-team cases).
        && findings.totals.values().sum::<usize>() == listed_ref_changes.len()
        && listed_ref_changes
            .iter()
            .all(|v| v.reference.as_deref().is_some_and(|r| !peers.own_branch(r)));
    // A store git's own background gc kept changing, and nothing else:
    // not the agent's doing, and gone once gc ends (new user, nineteenth
    // stop on issue 29: a harness escalated it to a human).
    let only_a_running_gc = findings.busy_with_gc
        && findings.totals.len() == 1
        && findings.totals.get(rule::OBJECT_STORE_INVALID) == Some(&1)
        && !findings.hostile_worktree
        && !findings.storage_unconfirmed;
    let class = if only_a_running_gc {
        FailureClass::Conflict
    } else if !intact {
        FailureClass::UnsafeState
    } else if peers_in_question {
        FailureClass::Conflict
    } else {
        FailureClass::Verification
    };
    let mut result = if findings.is_empty() {
        ToolResult::succeeded("verify")
    } else {
        ToolResult::failed("verify", class)
    };
    let facts = &observed.facts;
    let paths_joined = facts
        .paths
        .iter()
        .map(|p| p.as_slice())
        .collect::<Vec<_>>()
        .join(&b'\n');
    let listed: Vec<String> = facts
        .commits
        .iter()
        .take(MAX_LISTED)
        .map(ToString::to_string)
        .collect();
    result = result
        .with_evidence("grant", grant.evidence())
        .with_evidence(
            "baseline",
            json!({"branch": refname::encode(&baseline.branch), "commit": baseline.commit}),
        )
        .with_evidence(
            "policy",
            json!({"min_commits": grant.min_commits(), "max_commits": grant.max_commits(), "publish": false}),
        )
        .with_evidence(
            "commits",
            json!({"count": facts.count, "ids": listed, "tip": observed.tip.map(|t| t.to_string())}),
        )
        .with_evidence(
            "paths",
            json!({"count": facts.paths.len(), "digest": format!("sha256:{}", sha256_hex(&paths_joined))}),
        )
        .with_evidence("metadata_intact", intact);
    if let Some(refs) = &observed.refs {
        result = result.with_evidence("refs", refs);
    }
    if !findings.is_empty() {
        result = result.with_evidence("violation_totals", &findings.totals);
    }
    if peers_in_question {
        result = result.with_evidence("peers", peers.describe());
        findings.warnings.insert(
            "only refs that no armed worktree owns changed, while other worktrees were armed \
             beside this one (evidence.peers): the change may be theirs, so this is a \
             conflict, not this task's failure; once the ref is back (its owner's restore, or \
             by hand), run again"
                .to_owned(),
        );
    }
    result.violations = findings.listed;
    result.warnings = findings.warnings.into_iter().collect();
    result
}

/// Whether the protected metadata is as `verify` expects it now, with the
/// same allowances for peers armed beside this worktree. `run` asks again
/// right before its restore runs git in the checkout.
pub fn metadata_intact(state: &Path) -> bool {
    let Ok((baseline, _, armed)) = Baseline::read_live_or_retired(state) else {
        return false;
    };
    let Ok(snapshot) = Snapshot::for_verify(state, armed) else {
        return false;
    };
    let peers = Peers::confirm(snapshot, &baseline);
    let Ok(now) = repo::metadata_digests(&baseline.repo, &baseline.hooks) else {
        return false;
    };
    let mut findings = Findings::default();
    compare_metadata(&Expected::of(&baseline, armed, &peers), &now, &mut findings);
    findings.is_empty()
}

/// A rejection when a FIFO or device sits in the git dirs or the worktree
/// root, where opening the repository reads ([`repo::special_files`]):
/// checked before anything opens the repository, since opening one would
/// hang `verify`. Unsafe state: git run on this checkout (run's restore)
/// would hang too. The rest of the worktree is scanned on a thread and
/// awaited before gix reads it (see `evaluate`).
fn special_files(
    location: &repo::Location,
    loose_refs: repo::special_files::LooseRefs,
) -> Option<ToolResult> {
    let mut violations: Vec<Violation> = repo::special_files::in_git_dirs(location, loose_refs)
        .into_iter()
        .map(|m| Violation::new(rule::REPOSITORY_UNREADABLE, m))
        .collect();
    violations.extend(
        repo::special_files::at_worktree_root(&location.work_dir)
            .into_iter()
            .map(|m| Violation::new(rule::WORKTREE_NOT_CLEAN, m)),
    );
    if violations.is_empty() {
        return None;
    }
    violations.truncate(MAX_LISTED);
    let mut result = ToolResult::failed("verify", FailureClass::UnsafeState)
        .with_evidence("metadata_intact", false);
    result.violations = violations;
    Some(result)
}

/// Proves what was written to the object store since arm (see
/// [`repo::objects`]); anything unproven is `object_store_invalid`.
/// Returns the verified index's resolve-undo records whose objects it
/// looked for, as [`repo::objects::Checked::verified_resolve_undo`].
fn check_object_store(
    baseline: &Baseline,
    state: &Path,
    findings: &mut Findings,
) -> Option<Vec<repo::resolve_undo::Record>> {
    let checked = repo::objects::read_recorded(state, &baseline.object_inventory)
        .and_then(|before| {
            let (repo, _) = repo::layout::open_armed(&baseline.repo)?;
            repo::objects::check(&repo, &baseline.repo.common_dir, &before)
        })
        .unwrap_or_else(|e| {
            repo::objects::Checked::of(vec![format!("the object store cannot be checked: {e:#}")])
        });
    findings.busy_with_gc = checked.busy_with_gc;
    for problem in checked.problems {
        findings.push(Violation::new(rule::OBJECT_STORE_INVALID, problem));
    }
    checked.verified_resolve_undo
}

/// What the repository checks saw, for the evidence.
#[derive(Default)]
struct Observed {
    facts: HistoryFacts,
    tip: Option<ObjectId>,
    /// How the refs were read (evidence `refs`): `"all"` of them, or
    /// `"since_arm"`, only those that can have moved (see
    /// [`refs_since_arm`]), and how many were compared.
    refs: Option<serde_json::Value>,
}

/// Runs every check after the metadata comparison. `metadata` is the digest
/// map read at the start when it was intact (`None`: do not read the
/// worktree, and skip the end-of-run metadata re-check).
#[allow(clippy::too_many_arguments)] // one per input verify decides on
fn evaluate(
    baseline: &Baseline,
    grant: &Grant,
    peers: &Peers,
    state: &Path,
    metadata: Option<&BTreeMap<String, String>>,
    worktree_scan: std::thread::JoinHandle<Result<repo::special_files::Scan, String>>,
    early_refs: EarlyRefs,
    looked_for_resolve_undo: Option<&[repo::resolve_undo::Record]>,
    findings: &mut Findings,
) -> Result<Observed> {
    let (mut repo, location) = repo::layout::open_armed(&baseline.repo)?;
    // Cleanliness as git judges it with the global settings of arm.
    let _applied = match &baseline.clean_settings {
        Some(settings) => Some(repo::clean_settings::apply(&mut repo, settings, state)?),
        None => None,
    };
    if location != baseline.repo {
        anyhow::bail!(
            "the repository at {} is no longer the armed one (git dir {} instead of {})",
            baseline.repo.work_dir.display(),
            location.git_dir.display(),
            baseline.repo.git_dir.display()
        );
    }

    // Snapshot HEAD and refs once, decide on that snapshot, and re-read at
    // the end: a state that moved while we looked is never accepted.
    // The ref store first: unless gix provably reads the refs git reads,
    // nothing decided on them would hold for git.
    // (The ref store is proven before HEAD is read: a reftable store that
    // does not parse is a finding about the store, not an unreadable
    // repository.)
    // Every ref read: git lists them for the cross-check while verify
    // reads and judges them (see `git_view::Listing`); only with the
    // metadata intact and nothing found yet, as the cross-check itself
    // runs. When the start already knows that every ref is read, git
    // starts now, beside the strict read (a listing made before a wait for
    // a running git command is dropped in `read_refs`); else once the read
    // says so. A listing that cannot start is started again by the
    // cross-check, which reports why if it is still needed then.
    let may_list = metadata.is_some() && findings.is_empty();
    let mut listing = match early_refs {
        EarlyRefs::AllRefs if may_list => {
            let started = repo::git_view::Listing::start(&location, state).ok();
            crate::fsutil::pause_point("verify-listing-started");
            started
        }
        _ => None,
    };
    let extra = lookups(baseline);
    let read = match read_refs(&repo, baseline, &extra, early_refs, &mut listing)? {
        Ok(read) => read,
        Err(invalid) => {
            for problem in invalid.problems {
                findings.push(Violation::new(rule::REF_STORE_INVALID, problem));
            }
            return Ok(Observed::default());
        }
    };
    crate::fsutil::pause_point("verify-refs-read");
    let listing = match &read {
        RefsRead::All(_) if may_list => {
            listing.or_else(|| repo::git_view::Listing::start(&location, state).ok())
        }
        _ => None,
    };
    let head = repo::head(&repo)?;
    let refs = read.now();
    let shadows = refstore::shadows(
        &location.git_dir,
        &location.common_dir,
        baseline.branch.as_ref(),
        refs,
    );
    for shadow in shadows {
        findings.push(
            Violation::new(
                rule::REF_STORE_INVALID,
                format!(
                    "{shadow}: git resolves {} to it before {}, so `git push REMOTE {}` would \
                     not publish the branch. Remove it",
                    short_branch(&baseline.branch),
                    refname::shown(&baseline.branch),
                    short_branch(&baseline.branch)
                ),
            )
            .with_ref(refname::encode(&baseline.branch)),
        );
    }
    // Files in the git dir git would read instead of a ref named short.
    // (`$GIT_DIR/<the branch's short name>` is `refstore::shadows`'s, below.)
    let own_short: Vec<std::path::PathBuf> = baseline
        .branch
        .strip_prefix(b"refs/heads/")
        .map(|short| {
            use std::os::unix::ffi::OsStrExt;
            let short = std::ffi::OsStr::from_bytes(short);
            vec![
                location.git_dir.join(short),
                location.common_dir.join(short),
            ]
        })
        .unwrap_or_default();
    let shadowing = refstore::shadowing_files(&location.git_dir, &location.common_dir);
    for (file, hidden) in shadowing.iter().filter(|&(f, _)| !own_short.contains(f)) {
        findings.push(
            Violation::new(
                rule::REF_STORE_INVALID,
                format!(
                    "{} hides {} from every git command that names it short (git reads \
                     the file first, whatever it holds). Remove it",
                    file.display(),
                    refname::shown(hidden)
                ),
            )
            .with_ref(refname::encode(hidden)),
        );
    }
    let hash = repo.object_hash();
    for problem in repo::root_refs::problems(&location.common_dir, &location.git_dir, hash) {
        findings.push(Violation::new(rule::REF_STORE_INVALID, problem));
    }
    check_head(&head, baseline.branch.as_ref(), findings);
    let tip = match refs.get(&baseline.branch) {
        None => None,
        Some(v) => match std::str::from_utf8(v).ok().map(repo::parse_id) {
            Some(Ok(id)) => Some(id),
            _ => {
                findings.push(
                    Violation::new(
                        rule::NOT_DESCENDANT,
                        format!(
                            "the branch was replaced by a symbolic ref ({})",
                            refname::shown(v)
                        ),
                    )
                    .with_ref(refname::encode(&baseline.branch)),
                );
                None
            }
        },
    };
    let facts = check_history(
        &repo,
        baseline.commit_id(),
        tip,
        grant,
        &grant.matcher(),
        CountCheck::Full,
        findings,
    )?;
    let excused = |name: &BStr, before: Option<&BString>, now: Option<&BString>| {
        peers.excuse_ref(name, before, now)
    };
    match &read {
        RefsRead::All(_) => {
            let mut comparison = RefComparison::new(refs, baseline.branch.as_ref(), &excused);
            baseline.for_each_ref(&mut |name, old| comparison.before(name, old, findings))?;
            comparison.finish(findings);
        }
        RefsRead::Moved(moved) => compare_refs(
            &moved.before,
            refs,
            baseline.branch.as_ref(),
            &excused,
            findings,
        ),
    }
    // The index half of the worktree check reads no worktree file: it runs
    // while the special-file scan is still walking. Its findings count only
    // if the scan finds nothing (as before, a hostile worktree stops here).
    let mut index_findings = Vec::new();
    let index_half = metadata.is_some().then(|| {
        check_index(
            &repo,
            &location,
            state,
            worktree_base(&head, baseline.branch.as_ref(), tip),
            &mut index_findings,
        )
    });
    crate::fsutil::pause_point("verify-index-judged");
    // What git's reading must equal: the index verify judged, and the copy
    // of the file it was decoded from (`None` inside: there was no index
    // file), which git reads and the last look holds against the index.
    let (judged_index, judged_copy) = match &index_half {
        Some(Ok(Some(judged))) => (Some(judged.dirt.judged_index()), Some(judged.copy.clone())),
        _ => (None, None),
    };
    // Records of the judged index whose objects nobody looked for: the
    // object check read the index earlier, by path, and another file may
    // have answered then (an index swapped out and back).
    let resolve_undo_unwalked = match (&index_half, looked_for_resolve_undo) {
        (Some(Ok(Some(judged))), Some(walked)) => {
            !repo::resolve_undo::all_among(&judged.resolve_undo, walked)
        }
        _ => false,
    };
    // git's readings of the copy for the cross-check, started now, to run
    // while the scan ends and gix reads the worktree (see
    // `git_view::IndexReading`; neither reads a worktree file); only with
    // the metadata intact and nothing found yet, as the cross-check itself
    // runs. One that cannot start is started again by the cross-check,
    // which reports why.
    let early_index = match &judged_copy {
        Some(Some(copy)) if findings.is_empty() && index_findings.is_empty() => {
            repo::git_view::IndexReading::start(&location, copy.clone()).ok()
        }
        _ => None,
    };
    crate::fsutil::pause_point("verify-index-copied");
    // gix opens every `.gitignore` and `.gitattributes` it walks past: not
    // before the special-file scan has answered.
    let mut nested_git = Vec::new();
    let mut worktree_listing = None;
    let special = match worktree_scan.join() {
        Ok(Ok(found)) => {
            nested_git = found.nested_git;
            worktree_listing = Some(found.listing);
            found
                .problems
                .into_iter()
                .map(|m| Violation::new(rule::WORKTREE_NOT_CLEAN, m))
                .collect()
        }
        Ok(Err(m)) => vec![Violation::new(rule::REPOSITORY_UNREADABLE, m)],
        Err(_) => vec![Violation::new(
            rule::REPOSITORY_UNREADABLE,
            "the worktree scan for special files failed",
        )],
    };
    if !special.is_empty() {
        findings.hostile_worktree = true;
        for v in special {
            findings.push(v);
        }
        return Ok(Observed {
            facts,
            tip,
            refs: Some(read.evidence()),
        });
    }
    if let Some(metadata) = metadata {
        check_nested_repositories(
            &repo,
            &location,
            &nested_git,
            judged_index.as_ref(),
            metadata,
            findings,
        );
    }
    for v in index_findings {
        findings.push(v);
    }
    if let Some(index_half) = index_half
        && let Err(e) = index_half.and_then(|judged| match judged {
            Some(judged) => {
                let dirt = match worktree_listing {
                    Some(listing) => judged.dirt.with_listing(listing),
                    None => judged.dirt,
                };
                check_worktree_files(&repo, &location, dirt, &grant.matcher(), findings)
            }
            None => Ok(()),
        })
    {
        // A tip git itself refuses to check out (a crafted `.git` entry)
        // cannot be compared with a worktree: that is not clean, and the
        // other findings still stand.
        findings.push(Violation::new(
            rule::WORKTREE_NOT_CLEAN,
            format!("the worktree cannot be compared with the tip: {e:#}"),
        ));
    }
    let metadata_moved = match metadata {
        Some(before) => repo::metadata_digests(&baseline.repo, &baseline.hooks)? != *before,
        None => false,
    };
    // The strict reader alone suffices here: gix agreed with this exact
    // store at the start, and any byte of it that changed (a peeled line
    // included; in reftable, a record's peel claim) shows as a different
    // view.
    // Armed peers' branches move with their agents' work while this one is
    // verified: theirs to judge, not a change of this state.
    // A peer may have armed while this verify ran: read the hub again.
    let mut in_flight = peers.in_flight();
    if let Ok(Some(now)) = Snapshot::for_verify(state, true) {
        in_flight.extend(Peers::confirm(Some(now), baseline).in_flight());
    }
    let refs_moved = || refs_moved_since(&read, &location, baseline, &extra, &in_flight);
    // The index verify judged and git reads is a copy: it must still be
    // the index.
    let index_moved = match &judged_copy {
        Some(Some(copy)) => !copy.still_the_index(&location.git_dir)?,
        Some(None) => !repo::index_copy::still_no_index(&location.git_dir),
        None => false,
    };
    if repo::head(&repo)? != head
        || refs_moved()
        || metadata_moved
        || index_moved
        || resolve_undo_unwalked
    {
        findings.push(Violation::new(
            rule::CHANGED_DURING_VERIFY,
            "HEAD, refs, the index or protected metadata changed while verify ran; verify again \
             once the repository is quiet",
        ));
    }
    // The last word on a state about to be accepted: git itself must see it
    // as verify did. Only then, since it costs a few git processes and a
    // rejection needs no proof.
    if findings.is_empty() {
        // The index as verify judged it, against git's reading of the
        // same bytes (verify's copy) with the repository's reading config
        // (issue 24).
        let (judged, copy) = judged_index
            .zip(judged_copy)
            .context("the index was not judged, yet verify found nothing")?;
        let index = match copy {
            Some(copy) => {
                let reading = match early_index {
                    Some(reading) => reading,
                    None => repo::git_view::IndexReading::start(&location, copy)?,
                };
                let tree = repo::tree_id_of(&repo, tip)?;
                Some((
                    repo::git_view::IndexView::read(&repo, judged, tree)?,
                    reading,
                ))
            }
            // No index file: git reads none either, and the last look saw
            // none.
            None => None,
        };
        cross_check_with_git(
            baseline,
            &location,
            tip,
            &read,
            &in_flight,
            &facts,
            index,
            listing,
            &refs_moved,
            findings,
        )?;
    }
    // Last, after git's own look: a file that hides a ref, made or removed
    // while verify ran (red team: written just after the first look, it
    // was accepted). Only the git dir's top and what lies below a packed or
    // loose ref's short name are listed again.
    if refstore::shadowing_files(&location.git_dir, &location.common_dir) != shadowing {
        findings.push(Violation::new(
            rule::CHANGED_DURING_VERIFY,
            "a file in the git dir that hides a ref from its short name was made or removed \
             while verify ran; verify again once the repository is quiet",
        ));
    }

    Ok(Observed {
        facts,
        tip,
        refs: Some(read.evidence()),
    })
}

/// The refs verify judges: every ref, or, when `packed-refs` is what arm
/// read, only those that can have moved since (see [`refs_since_arm`]).
enum RefsRead {
    All(refstore::StrictRefs),
    Moved(refs_since_arm::Moved),
}

impl RefsRead {
    /// The refs read and their values now.
    fn now(&self) -> &RefMap {
        match self {
            RefsRead::All(strict) => &strict.refs,
            RefsRead::Moved(moved) => &moved.now,
        }
    }

    /// How the refs were read, for the evidence (see [`Observed::refs`]).
    fn evidence(&self) -> serde_json::Value {
        let read = match self {
            RefsRead::All(_) => "all",
            RefsRead::Moved(_) => "since_arm",
        };
        json!({"read": read, "compared": self.now().len()})
    }

    /// The names read, when not every ref was (see [`refs_since_arm::Moved::asked`]).
    fn asked(&self) -> Option<&BTreeSet<BString>> {
        match self {
            RefsRead::All(_) => None,
            RefsRead::Moved(moved) => Some(&moved.asked),
        }
    }
}

/// What the strict read of the refs that can have moved since arm
/// ([`refs_since_arm::read`], made at the start, no waiting) found.
enum EarlyRefs {
    /// Those refs, nothing wrong with them.
    Read(Box<refs_since_arm::Moved>),
    /// `packed-refs` changed since arm (or the store is reftable): only
    /// the full read can judge. (It reads `packed-refs` afresh: parsing
    /// the bytes read here made a `pack-refs` in between, which changed no
    /// ref, look like a move at the end: red team.)
    AllRefs,
    /// The baseline does not allow the read, or it found a problem (a
    /// running git command's lock, say): read again later, waiting.
    Unsure,
}

fn early_refs(baseline: &Baseline) -> EarlyRefs {
    let Some(at_arm) = baseline.refs_at_arm() else {
        return EarlyRefs::Unsure;
    };
    let location = &baseline.repo;
    match refs_since_arm::read(
        &location.git_dir,
        &location.common_dir,
        &at_arm,
        &lookups(baseline),
    ) {
        Ok(Some(moved)) => EarlyRefs::Read(Box::new(moved)),
        Ok(None) => EarlyRefs::AllRefs,
        Err(_) => EarlyRefs::Unsure,
    }
}

/// Reads the refs: only those that can have moved when the baseline allows
/// it and `packed-refs` is unchanged, else every ref (proven as arm proved
/// them). `early`: what the strict read of those refs at the start found
/// ([`early_refs`]). Refs it read are proven here; anything wrong with
/// them, and they are read and proven again, waiting as ever for running
/// git commands. (The re-read at the end of verify compares with the read
/// that is judged, early or not.) `listing`: git's, started before the
/// full read; dropped when that read had to wait, since git may then have
/// listed what the read did not judge.
fn read_refs(
    repo: &gix::Repository,
    baseline: &Baseline,
    extra: &[BString],
    early: EarlyRefs,
    listing: &mut Option<repo::git_view::Listing>,
) -> Result<std::result::Result<RefsRead, refstore::Invalid>> {
    let since_arm = match early {
        EarlyRefs::Read(moved) => match refs_since_arm::confirm(repo, *moved)? {
            Ok(moved) => return Ok(Ok(RefsRead::Moved(moved))),
            Err(_) => true,
        },
        EarlyRefs::AllRefs => false,
        EarlyRefs::Unsure => true,
    };
    // (Not asked for the full read: the loose refs listed at arm, which
    // it does not need, would be read again.)
    let at_arm = match since_arm {
        true => baseline.refs_at_arm(),
        false => None,
    };
    if let Some(at_arm) = at_arm {
        match refs_since_arm::prove_settled(repo, &at_arm, extra, REF_STORE_PATIENCE)? {
            Ok(Some(moved)) => return Ok(Ok(RefsRead::Moved(moved))),
            Ok(None) => {}
            Err(invalid) => return Ok(Err(invalid)),
        }
    }
    let (answer, reads) = refstore::prove_settled_counted(repo, REF_STORE_PATIENCE)?;
    if reads > 1 {
        *listing = None;
    }
    Ok(answer.map(RefsRead::All))
}

/// Whether the refs moved since `read` (HEAD aside), but for the refs of
/// `in_flight` (peers' branches): read again, and compared with it.
fn refs_moved_since(
    read: &RefsRead,
    location: &repo::Location,
    baseline: &Baseline,
    extra: &[BString],
    in_flight: &BTreeSet<BString>,
) -> bool {
    match read {
        RefsRead::All(strict) => refstore::moved_since(
            &location.git_dir,
            &location.common_dir,
            strict,
            in_flight,
            REF_STORE_PATIENCE,
        ),
        // `packed-refs` rewritten meanwhile (`Ok(None)`) is a move too.
        RefsRead::Moved(moved) => !matches!(
            baseline.refs_at_arm().map(|at_arm| refs_since_arm::read_settled(
                &location.git_dir,
                &location.common_dir,
                &at_arm,
                extra,
                REF_STORE_PATIENCE,
            )),
            Some(Ok(Some(again))) if again.same_as(moved, in_flight)
        ),
    }
}

/// The names verify looks up beside the refs that moved: the branch, and
/// the refs that would shadow its short name (see [`refstore::shadows`]).
fn lookups(baseline: &Baseline) -> Vec<BString> {
    let mut names = vec![baseline.branch.clone()];
    if let Some(short) = baseline.branch.strip_prefix(b"refs/heads/") {
        for prefix in [&b"refs/"[..], b"refs/tags/"] {
            let mut name = BString::from(prefix);
            name.extend_from_slice(short);
            names.push(name);
        }
    }
    names
}

/// What the agent can do about an index git could read two ways: write a
/// new one from the tip, as git does from scratch.
const INDEX_ADVICE: &str = "Rebuild the index from the tip: remove the index file (`rm \
     \"$(git rev-parse --git-path index)\"`) and run `git reset -q`; changes in the worktree \
     stay, unstaged";

/// Asks git for its view of the state (see [`repo::git_view`]) and turns
/// every difference into a violation. `refs_moved`: whether the refs moved
/// since they were read; asked when git lists them otherwise, since a ref
/// that moved after verify's last look differs too, and is a move, not a
/// store read two ways (red team: two commits during one verify were
/// refused as a broken store, for good).
#[allow(clippy::too_many_arguments)]
fn cross_check_with_git(
    baseline: &Baseline,
    location: &repo::Location,
    tip: Option<ObjectId>,
    read: &RefsRead,
    in_flight: &BTreeSet<BString>,
    facts: &HistoryFacts,
    index: Option<(repo::git_view::IndexView, repo::git_view::IndexReading)>,
    listing: Option<repo::git_view::Listing>,
    refs_moved: &dyn Fn() -> bool,
    findings: &mut Findings,
) -> Result<()> {
    let decided = repo::git_view::Decided {
        index,
        listing,
        location,
        branch: baseline.branch.as_bstr(),
        tip,
        baseline: baseline.commit_id(),
        refs: read.now(),
        asked: read.asked(),
        in_flight,
        commits: facts.trees.clone(),
        changes: &facts.changes,
    };
    let differences = repo::git_view::differences(decided)?;
    let refs_differ = differences
        .iter()
        .any(|d| d.area == repo::git_view::Area::Refs);
    let moved = refs_differ && refs_moved();
    if moved {
        findings.storage_unconfirmed = true;
        findings.push(Violation::new(
            rule::CHANGED_DURING_VERIFY,
            "refs changed while git listed them for verify's cross-check; verify again once \
             the repository is quiet",
        ));
    }
    for difference in differences {
        if moved && difference.area == repo::git_view::Area::Refs {
            continue;
        }
        let id = match difference.area {
            repo::git_view::Area::Refs => rule::REF_STORE_INVALID,
            repo::git_view::Area::History => rule::OBJECT_STORE_INVALID,
            repo::git_view::Area::Index => rule::WORKTREE_NOT_CLEAN,
        };
        let message = if difference.area == repo::git_view::Area::Index {
            format!(
                "{}; git reads the index differently from verify, so the state cannot be \
                 accepted. {INDEX_ADVICE}",
                difference.message
            )
        } else {
            format!(
                "{}; the repository's storage reads differently to git than to verify, so \
                 the state cannot be accepted (restore the repository from the baseline)",
                difference.message
            )
        };
        findings.push(Violation::new(id, message));
    }
    Ok(())
}

/// What the protected metadata must be.
struct Expected<'a> {
    /// As recorded (armed, or before arm after disarm).
    metadata: &'a BTreeMap<String, String>,
    /// After a disarm while other worktrees stayed armed, a value may also
    /// be the armed one: the shared config and stubs stay until the last
    /// disarm.
    also: Option<&'a BTreeMap<String, String>>,
    /// Linked worktrees other armed worktrees own, whose appearing or
    /// going is theirs (see [`crate::peers`]).
    peer_worktrees: crate::peers::PeerWorktrees,
    /// An operation is under way in this worktree's git dir (reported as
    /// such by the worktree check): its `MERGE_MSG` and the like are part
    /// of it, not leftovers.
    operation_in_progress: bool,
    /// The keys of the chained hooks (and the hooks directory at arm) that
    /// live in the worktree, outside the git dir: a build tool's generated
    /// directory such as husky's `.husky/_`, which `git clean -xdf` or a
    /// fresh `npm install` removes. Their deletion is accepted with a
    /// warning: a hook that is not there runs nothing (issue 25).
    deletable_hooks: BTreeSet<String>,
    /// Config texts whose digest the baseline may expect (`config` and
    /// `config.worktree` as arm wrote them and as they were before, from
    /// the hub): a change to them is reported key by key, old and new
    /// value, with the copy to restore it from.
    config_texts: Vec<KeptConfig>,
    /// Where the worktree's metadata is, to name it ([`repo::Location::shown`]).
    location: &'a repo::Location,
}

/// A config text the hub kept ([`Expected::config_texts`]).
struct KeptConfig {
    /// The metadata key (`config`, `config.worktree`).
    key: String,
    /// The repository's file it is a text of.
    path: std::path::PathBuf,
    /// The hub's file that holds it: restoring means copying it back.
    kept_at: std::path::PathBuf,
    bytes: Vec<u8>,
}

impl<'a> Expected<'a> {
    /// Adds the config texts the hub of `state` kept (see
    /// [`Expected::config_texts`]).
    fn with_config_texts(mut self, baseline: &Baseline, state: &Path) -> Expected<'a> {
        use crate::hooks::install;
        let Ok(Some(link)) = crate::hooks::hub::Link::read(state) else {
            return self;
        };
        let record = install::read_record(&link.hub).ok().flatten();
        let mut add = |key: &str, path: std::path::PathBuf, file: &str| {
            let kept_at = link.hub.join(file);
            if let Ok(bytes) = crate::fsutil::read_regular(&kept_at) {
                self.config_texts.push(KeptConfig {
                    key: key.to_owned(),
                    path,
                    kept_at,
                    bytes,
                });
            }
        };
        let config = baseline.repo.common_dir.join("config");
        add("config", config.clone(), install::CONFIG_AFTER);
        add("config", config, install::CONFIG_BEFORE);
        if let Some((path, ..)) = record.and_then(|r| r.worktree_config) {
            add(
                "config.worktree",
                path.clone(),
                install::WORKTREE_CONFIG_AFTER,
            );
            add("config.worktree", path, install::WORKTREE_CONFIG_BEFORE);
        }
        self
    }

    /// What `baseline` expects, armed or not, beside `peers`.
    fn of(baseline: &'a Baseline, armed: bool, peers: &Peers) -> Expected<'a> {
        Expected {
            metadata: baseline.expected_metadata(armed),
            also: (!armed && peers.any()).then_some(&baseline.metadata),
            peer_worktrees: peers.worktrees(&baseline.repo.common_dir),
            operation_in_progress: !repo::operations_in_progress(&baseline.repo.git_dir).is_empty(),
            deletable_hooks: baseline
                .hooks
                .dir_at_arm
                .iter()
                .chain(&baseline.hooks.chained)
                .filter(|p| {
                    p.starts_with(&baseline.repo.work_dir)
                        && !p.starts_with(&baseline.repo.common_dir)
                })
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            config_texts: Vec::new(),
            location: &baseline.repo,
        }
    }
}

fn compare_metadata(
    expected: &Expected<'_>,
    now: &BTreeMap<String, String>,
    findings: &mut Findings,
) {
    let before = expected.metadata;
    let names: BTreeSet<&String> = before.keys().chain(now.keys()).collect();
    // Generated hooks removed together (husky's `.husky/_` holds a dozen):
    // one warning naming them all.
    let mut removed_hooks: Vec<&str> = Vec::new();
    for name in names {
        let (old, new) = (before.get(name), now.get(name));
        if old == new || expected.also.is_some_and(|also| also.get(name) == new) {
            continue;
        }
        // Absent is inert for a file git consults only when it is there
        // (`MERGE_MSG`), and for an entry a baseline recorded before it was
        // protected: nothing there is nothing for git to read.
        if new.map(String::as_str) == Some("absent")
            && (old.is_none() || repo::inert_when_absent(name))
        {
            continue;
        }
        if expected.operation_in_progress && repo::inert_when_absent(name) {
            continue;
        }
        if name == "worktrees"
            && let (Some(old), Some(new)) = (old, new)
            && same_worktrees(old, new, &expected.peer_worktrees)
        {
            continue;
        }
        // Another worktree's metadata: its `config.worktree`, or what leads
        // git from it to a repository (`commondir`, `gitdir` with the `.git`
        // file it names). Gone with its worktree, or there with one added
        // since arm, is the `worktrees` key's to judge; a peer accounts for
        // its own config (`PeerWorktrees::accounts_for_config`), and no peer
        // writes the rest. Anything else is a change, and `unsafe_state`
        // as any: a retryable `conflict` would have a retry arm over it and
        // adopt it (red team, fifty-ninth stop, third round).
        if let Some((git_dir, file)) = repo::other_worktree_key(expected.location, name) {
            let Some(new) = new else {
                // Gone with its admin directory: the `.git` it named must
                // be gone too, or as it was.
                if let Some(left) = old.and_then(|old| repo::dot_git_left_behind(old)) {
                    findings.push(left_behind(&left));
                }
                continue;
            };
            let owner = (file == repo::OtherFile::Config)
                .then(|| {
                    expected.peer_worktrees.accounts_for_config(
                        &git_dir,
                        old.map(String::as_str),
                        new,
                    )
                })
                .flatten();
            let excused = match owner {
                Some(accounted) => accounted,
                None => old.is_none(),
            };
            if !excused {
                findings.push(other_worktree_changed(
                    expected.location,
                    name,
                    &git_dir,
                    old.map(String::as_str),
                ));
            }
            continue;
        }
        if new.map(String::as_str) == Some("absent") && expected.deletable_hooks.contains(name) {
            removed_hooks.push(name);
            continue;
        }
        // A submodule git dir in a `modules/` that arm did not have: that
        // directory's own refusal gives the one `rm -r` that undoes both.
        if repo::module_git_dir(name).is_some()
            && old.is_none()
            && before.get("modules").map(String::as_str) == Some("absent")
        {
            continue;
        }
        // Keys are relative to the common dir, or absolute paths
        // (submodule checkouts, hooks outside the git dir).
        let shown = if name.starts_with('/') {
            name.clone()
        } else {
            expected
                .location
                .shown(name, repo::in_worktree_git_dir(name))
        };
        let (detail, mut restore) = old
            .and_then(|old| config_change(expected, name, old))
            .unwrap_or_default();
        // A command that would act through a symlink acts outside the
        // repository (red team: `cp` wrote through a symlinked config,
        // `rm` deleted a file behind a symlinked `info/`).
        let path = expected
            .location
            .path_of(name, repo::in_worktree_git_dir(name));
        let in_place = acts_in_place(&path);
        if !in_place {
            restore = format!(
                "; {} is now a symlink or a hard link, or a directory above it a symlink: put \
                 back what arm had there",
                path.display()
            );
        }
        let message = if repo::inert_when_absent(name) {
            format!(
                "{shown} is left over from a merge or squash and differs from arm's; git's next \
                 commit reads it (a message template, or a stash it applies); finish the \
                 operation or remove it (rm {})",
                crate::hooks::stub::sh_quote(&shown)
            )
        } else if let Some(added) = (name == "worktrees")
            .then(|| worktrees_added(old, new))
            .flatten()
        {
            format!(
                "{shown} changed since arm: linked worktree(s) added ({added}); git metadata is \
                 not part of any grant: remove each (`git worktree remove --force <path>`, \
                 `git worktree list` shows the paths)"
            )
        } else if let (Some(old), Some(new)) = (old, new)
            && new.strip_suffix("+hardlinked") == Some(old.as_str())
        {
            // The same bytes, now with a second name (red team, fifty-ninth
            // stop: a `cp -al` snapshot read as a rewritten config).
            format!(
                "{shown} has the bytes it had at arm but now another name too (a hard link, \
                 such as a `cp -al` snapshot made since): whoever writes that name writes this \
                 file; remove the other name (`find / -xdev -samefile {}` finds it)",
                crate::hooks::stub::sh_quote(&path.to_string_lossy())
            )
        } else if old.map(String::as_str) == Some("absent") && in_place {
            // Not there at arm: removing it restores it (`git
            // sparse-checkout set` adds `config.worktree` and
            // `info/sparse-checkout`; new user). By its absolute path:
            // verify may run in a subdirectory (red team).
            let recursive = if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                "-r "
            } else {
                ""
            };
            // The sparse checkout's files come back only through git
            // (new user: removing its files left skip-worktree entries).
            let first = if name == "info/sparse-checkout" {
                "run `git sparse-checkout disable` first, which brings back the files it left \
                 out; then "
            } else {
                ""
            };
            format!(
                "{shown} was added since arm; git metadata is not part of any grant ({first}remove \
                 it: rm {recursive}{})",
                crate::hooks::stub::sh_quote(&path.to_string_lossy())
            )
        } else if let Some(module) = added_module_dir(expected.location, name, old)
            && acts_in_place(&module)
        {
            // A submodule git dir arm did not have: every file in it is new
            // (arm records each module's entries), and removing the
            // directory restores them all (new user: each was "changed").
            format!(
                "{shown} was added since arm, in a submodule git dir arm did not have; git \
                 metadata is not part of any grant (remove that directory: rm -r {})",
                crate::hooks::stub::sh_quote(&module.to_string_lossy())
            )
        } else {
            format!(
                "{shown} changed since arm{detail}; git metadata is not part of any grant \
                 (restore it exactly{restore})"
            )
        };
        findings.push(Violation::new(rule::PROTECTED_METADATA_CHANGED, message).with_path(shown));
    }
    if !removed_hooks.is_empty() {
        let count = removed_hooks.len();
        let shown: Vec<&str> = removed_hooks.into_iter().take(MAX_LISTED).collect();
        let more = count.saturating_sub(shown.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        findings.warnings.insert(format!(
            "{count} hook file(s) removed since arm: {}{more} (a build tool's generated hooks, \
             say `git clean -xdf` or `npm install`); git runs no hook that is not there, so this \
             is accepted. Regenerate them to have the team's hooks run again",
            shown.join(", ")
        ));
    }
}

/// The admin directory of this repository other than `git_dir` that the
/// `.git` file of the worktree `dir` names, if it names one.
fn names_another_admin_dir(
    location: &repo::Location,
    dir: &Path,
    git_dir: &Path,
) -> Option<std::path::PathBuf> {
    let dot_git = dir.join(".git");
    let text = crate::fsutil::read_regular_limited(&dot_git, crate::fsutil::MAX_SMALL_FILE).ok()?;
    let named = repo::submodule_meta::resolve_gitfile(&dot_git, &text)?;
    let admin = location.common_dir.join("worktrees");
    (named.starts_with(&admin) && named != git_dir).then_some(named)
}

/// The finding for the `.git` (at `left`) of a worktree whose admin
/// directory is gone since arm, when git run there could reach another
/// repository ([`repo::dot_git_left_behind`]).
fn left_behind(left: &Path) -> Violation {
    let quoted = |p: &Path| crate::hooks::stub::sh_quote(&p.to_string_lossy());
    let message = match left.symlink_metadata() {
        Err(_) => format!(
            "{} stays without the .git it had at arm, though its worktree's admin directory is \
             gone: git run there takes the directory for a git dir or searches its parents; \
             move the directory elsewhere or remove it",
            left.parent().unwrap_or(left).display()
        ),
        Ok(meta) => format!(
            "{} was left behind by a worktree whose admin directory is gone since arm, and \
             changed (or cannot be read): git run there reads whatever it names now; remove it \
             (rm {}{})",
            left.display(),
            if meta.is_dir() { "-r " } else { "" },
            quoted(left)
        ),
    };
    Violation::new(rule::PROTECTED_METADATA_CHANGED, message).with_path(left.display().to_string())
}

/// The finding for another worktree's metadata (key `name`, of the worktree
/// whose git dir is `git_dir`) that changed since arm and no peer accounts
/// for: whoever changed it is not known (an agent in any worktree, or a
/// person working in that one), and arm kept no copy.
fn other_worktree_changed(
    location: &repo::Location,
    name: &str,
    git_dir: &Path,
    old: Option<&str>,
) -> Violation {
    let shown = location.shown(name, false);
    let worktree_dir = repo::worktree_of_git_dir(location, git_dir);
    let worktree = worktree_dir.as_ref().map_or_else(
        || "another worktree".to_owned(),
        |w| format!("the worktree {}", w.display()),
    );
    let path = location.path_of(name, false);
    let quoted = |p: &Path| crate::hooks::stub::sh_quote(&p.to_string_lossy());
    // The worktree as arm knew it: the `gitdir` file may name another now.
    let at_arm = old
        .and_then(repo::dot_git_at_arm)
        .and_then(|dot_git| dot_git.parent().map(Path::to_path_buf));
    let dir = at_arm.as_ref().or(worktree_dir.as_ref());
    let swapped_with = dir.and_then(|dir| names_another_admin_dir(location, dir, git_dir));
    let gitdir = name.ends_with("/gitdir");
    let undo = match (dir, swapped_with) {
        // `git worktree repair` would make a swap of two worktrees' `.git`
        // files git's own record (red team, fourth round).
        (Some(_), Some(other)) if gitdir => format!(
            "that worktree's .git names another worktree's admin directory ({}): put back what \
             each .git held at arm (`git worktree repair` would adopt the swap)",
            other.display()
        ),
        // git writes both back (third red-team round: "put back what it
        // held" could not be followed).
        (Some(dir), None) if gitdir => format!(
            "run `git worktree repair {}` in the main worktree, which writes this file and that \
             worktree's .git back as git wrote them",
            quoted(dir)
        ),
        _ if name.ends_with("/commondir") && acts_in_place(&path) => format!(
            "write back what `git worktree add` wrote: printf '../..\\n' > {}",
            quoted(&path)
        ),
        _ if old == Some("absent") && acts_in_place(&path) => {
            format!("it was not there at arm (remove it: rm {})", quoted(&path))
        }
        _ => "put back what it held at arm".to_owned(),
    };
    let what = if name.ends_with("config.worktree") {
        "the config"
    } else {
        "what leads git to a repository (and its config)"
    };
    Violation::new(
        rule::PROTECTED_METADATA_CHANGED,
        format!(
            "{shown} changed since arm: it is {what} of {worktree}, which git reads (and runs \
             the programs it names, such as core.fsmonitor) at every command there. Whoever \
             changed it, an agent or a person working in that worktree: {undo}; then verify \
             again"
        ),
    )
    .with_path(shown)
}

/// For a key of a submodule git dir that arm did not record (`old` is
/// `None`), that git dir ([`repo::module_git_dir`]).
fn added_module_dir(
    location: &repo::Location,
    name: &str,
    old: Option<&String>,
) -> Option<std::path::PathBuf> {
    let dir = repo::module_git_dir(name).filter(|_| old.is_none())?;
    Some(location.common_dir.join(dir))
}

/// Whether a command naming `path` acts on that file itself: it is not a
/// symlink or a file with another name (a hard link), and no directory
/// above it is a symlink (its parent is its own canonical path).
fn acts_in_place(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let direct = path
        .parent()
        .is_some_and(|parent| parent.canonicalize().is_ok_and(|c| c == parent));
    // A file with another name (a hard link: red team, `ln -f
    // ~/.gitconfig .git/config`) is written there too by `cp`.
    direct
        && !path
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink() || (m.is_file() && m.nlink() > 1))
}

/// For a changed `config` or `config.worktree` whose expected text the hub
/// kept: `: key old → new, ...` naming what changed (at most 8 keys), so
/// that `git config user.email x` or an editor's `branch.*.vscode-merge-base`
/// can be undone by name, and `: cp <kept> <file>`, the command that
/// restores it byte for byte (`git config --unset` leaves an emptied
/// section behind, which is still a change).
fn config_change(expected: &Expected<'_>, name: &str, old: &str) -> Option<(String, String)> {
    let want = old.trim_end_matches("+x");
    let kept = expected
        .config_texts
        .iter()
        .find(|kept| kept.key == name && format!("sha256:{}", sha256_hex(&kept.bytes)) == want)?;
    let restore = format!(
        ": cp {} {}",
        crate::hooks::stub::sh_quote(&kept.kept_at.to_string_lossy()),
        crate::hooks::stub::sh_quote(&kept.path.to_string_lossy())
    );
    let (path, text) = (&kept.path, &kept.bytes);
    let Some(now) = crate::fsutil::read_regular(path).ok() else {
        return Some((String::new(), restore));
    };
    let (Some(before), Some(after)) = (config_values(text), config_values(&now)) else {
        return Some((String::new(), restore));
    };
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let shown = |v: Option<&Vec<String>>| match v {
        None => "(unset)".to_owned(),
        Some(values) => values
            .iter()
            .map(|v| format!("{v:?}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let changes: Vec<String> = keys
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("{k} {} → {}", shown(before.get(k)), shown(after.get(k))))
        .collect();
    if changes.is_empty() {
        return Some((
            ": the same keys and values, written differently (comments, layout)".into(),
            restore,
        ));
    }
    let more = changes.len().saturating_sub(8);
    let mut out = format!(
        ": {}",
        changes.into_iter().take(8).collect::<Vec<_>>().join("; ")
    );
    if more > 0 {
        out.push_str(&format!("; and {more} more keys"));
    }
    Some((out, restore))
}

/// Every key of a config text (`section.subsection.key`, section and key
/// lowercased as git compares them) with its values in order.
fn config_values(bytes: &[u8]) -> Option<BTreeMap<String, Vec<String>>> {
    let file = gix::config::File::from_bytes_no_includes(
        bytes,
        gix::config::file::Metadata::from(gix::config::Source::Local),
        Default::default(),
    )
    .ok()?;
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for section in file.sections() {
        let header = section.header();
        let prefix = match header.subsection_name() {
            Some(sub) => format!("{}.{sub}", header.name().to_ascii_lowercase().as_bstr()),
            None => header.name().to_ascii_lowercase().as_bstr().to_string(),
        };
        let names: BTreeSet<String> = section.value_names().collect();
        for key in names {
            let full = format!("{prefix}.{}", key.to_ascii_lowercase());
            out.entry(full)
                .or_default()
                .extend(section.values(&key).iter().map(|v| v.to_string()));
        }
    }
    Some(out)
}

/// The linked worktrees `now` lists and `before` does not, shown, when
/// that is the whole change (a worktree removed or changed is restored,
/// not removed).
fn worktrees_added(before: Option<&String>, now: Option<&String>) -> Option<String> {
    let before = before.map_or_else(|| Some(Default::default()), |b| repo::worktree_names(b))?;
    let now = repo::worktree_names(now?)?;
    if before.iter().any(|(name, id)| now.get(name) != Some(id)) {
        return None;
    }
    let added: Vec<String> = now
        .keys()
        .filter(|name| !before.contains_key(*name))
        .map(|name| {
            let raw = crate::digest::unhex(name).unwrap_or_else(|| name.as_bytes().to_vec());
            format!("{:?}", String::from_utf8_lossy(&raw))
        })
        .collect();
    (!added.is_empty()).then(|| added.join(", "))
}

/// Whether two `worktrees` values list the same linked worktrees but for
/// those armed peers own; a digest recorded by an older baseline is
/// compared as such.
fn same_worktrees(before: &str, now: &str, peers: &crate::peers::PeerWorktrees) -> bool {
    let Some(now_names) = repo::worktree_names(now) else {
        return false;
    };
    let Some(before_names) = repo::worktree_names(before) else {
        return repo::legacy_worktrees_digest(now).as_deref() == Some(before);
    };
    let names: BTreeSet<&String> = before_names.keys().chain(now_names.keys()).collect();
    names.into_iter().all(|name| {
        before_names.get(name) == now_names.get(name)
            || peers.accounts_for(name, now_names.contains_key(name))
    })
}

/// The hub entry of this worktree must name this state directory: one
/// that names another routes the hooks to another grant.
fn own_entry_is_this_state(own: &crate::hooks::hub::Entry, state: &Path) -> Result<()> {
    let here = state.canonicalize().unwrap_or_else(|_| state.to_path_buf());
    anyhow::ensure!(
        own.state == here,
        "its entry names the state directory {}, not {}",
        own.state.display(),
        here.display()
    );
    Ok(())
}

fn check_head(head: &Head, branch: &BStr, findings: &mut Findings) {
    let problem = match head {
        Head::Branch { name, .. } if name == branch => return,
        Head::Branch { name, .. } => format!("HEAD points to {}", refname::shown(name)),
        Head::Detached(id) => format!("HEAD is detached at {id}"),
    };
    findings.push(
        Violation::new(
            rule::HEAD_NOT_ON_BRANCH,
            format!(
                "{problem}; it must point to {} (git checkout {})",
                refname::shown(branch),
                short_branch(branch)
            ),
        )
        .with_ref("HEAD"),
    );
}

/// A repository below the worktree root that is not a checked-out
/// submodule's: one the agent made inside the checkout (a `.git`, or a
/// bare repository under any name). git lists neither, so `git status` can
/// look clean (one made in a tracked or ignored directory), yet git run
/// there, by the harness or an operator, uses its config (`core.fsmonitor`,
/// filters, a pager: programs). The checked-out submodules are exactly the
/// `.git` entries the protected metadata pins (recursively), so any other
/// is reported, inside a submodule's directory too.
///
/// Except where git at the checkout never reads it (issue 25): inside a
/// directory the ignore rules git takes from the index (tracked
/// `.gitignore` files, `info/exclude`, `core.excludesFile`; not an
/// untracked `.gitignore` the agent could add) ignore, with no index entry
/// at or below it, and not inside a submodule's directory (git reads
/// those). Build tools leave such repositories (`cargo test` fixtures in
/// `target/`, `pip install -e git+...` in `.venv/`, `node_modules/`); git
/// does not descend into an ignored directory, so the branch, the index
/// and every status git computes at the checkout are unaffected. They are
/// accepted with a warning that names them: git run inside one would
/// still use its config.
fn check_nested_repositories(
    repo: &gix::Repository,
    location: &repo::Location,
    nested: &[std::path::PathBuf],
    judged_index: Option<&gix::worktree::Index>,
    metadata: &BTreeMap<String, String>,
    findings: &mut Findings,
) {
    let mut ignored_checker = None;
    for found in nested {
        let key = repo::submodule_meta::key_of(location, &location.work_dir.join(found));
        if metadata.contains_key(&key) {
            continue;
        }
        // The repository's directory: the parent of a `.git`, or the bare
        // repository itself.
        let dir = if found.file_name().is_some_and(|n| n == ".git") {
            found.parent().unwrap_or(found)
        } else {
            found.as_path()
        };
        let checker = ignored_checker.get_or_insert_with(|| IgnoredDirs::new(repo, judged_index));
        if let Some(ignored) = checker.as_mut().ok().and_then(|c| c.unread_by_git(dir)) {
            findings.warnings.insert(format!(
                "{} is a git repository inside the ignored directory {}: git at the checkout \
                 never reads it, but git run inside it would use its config (programs such as \
                 core.fsmonitor); remove it (rm -rf, or git clean -ffdx) before anyone runs \
                 git there",
                found.display(),
                ignored.display()
            ));
            continue;
        }
        findings.push(
            Violation::new(
                rule::WORKTREE_NOT_CLEAN,
                format!(
                    "{} is a git repository inside the checkout that git does not list; git run \
                     in it or its directory would use its config. Remove it",
                    found.display()
                ),
            )
            .with_path(found.display().to_string()),
        );
    }
}

/// Whether a directory lies where git at the checkout never reads: see
/// [`check_nested_repositories`].
struct IgnoredDirs<'repo> {
    index: gix::worktree::IndexPersistedOrInMemory,
    repo: &'repo gix::Repository,
}

impl<'repo> IgnoredDirs<'repo> {
    /// Judged by `judged`, the index verify judged, when it got that far.
    fn new(
        repo: &'repo gix::Repository,
        judged: Option<&gix::worktree::Index>,
    ) -> Result<IgnoredDirs<'repo>> {
        let index = match judged {
            Some(index) => index.clone(),
            None => repo.index_or_empty().context("cannot read the index")?,
        };
        Ok(IgnoredDirs {
            index: gix::worktree::IndexPersistedOrInMemory::Persisted(index),
            repo,
        })
    }

    /// The ignored ancestor (or `dir` itself) that hides `dir` from git,
    /// when nothing in the index is at or below `dir` or is a submodule
    /// above it; `None` when git reads it or the rules cannot be read.
    fn unread_by_git(&mut self, dir: &Path) -> Option<std::path::PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        let rel = dir.as_os_str().as_bytes();
        let state: &gix::index::State = &self.index;
        for entry in state.entries() {
            let path: &[u8] = entry.path(state).as_ref();
            let below = path.starts_with(rel) && path.get(rel.len()).is_none_or(|&b| b == b'/');
            let submodule_above = repo::submodule_meta::is_gitlink_mode(entry.mode.bits())
                && rel.starts_with(path)
                && rel.get(path.len()) == Some(&b'/');
            if below || submodule_above {
                return None;
            }
        }
        let mut stack = self
            .repo
            .excludes(
                state,
                None,
                gix::worktree::stack::state::ignore::Source::IdMapping,
            )
            .ok()?;
        let mut end = 0;
        loop {
            let next = rel[end..].find_byte(b'/').map(|p| end + p);
            let prefix = &rel[..next.unwrap_or(rel.len())];
            let excluded = stack
                .at_entry(prefix.as_bstr(), Some(gix::index::entry::Mode::DIR))
                .ok()?
                .is_excluded();
            if excluded {
                return Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
                    prefix,
                )));
            }
            match next {
                Some(n) => end = n + 1,
                None => return None,
            }
        }
    }
}

fn short_branch(branch: &[u8]) -> String {
    refname::shown(branch.strip_prefix(b"refs/heads/").unwrap_or(branch))
}

/// How long `verify` waits for git commands in other worktrees to finish
/// when the ref store shows only their traces (a `.lock`, a ref moving).
const REF_STORE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether a ref's change (name, before, now) is another worktree's to
/// judge.
pub type Excuse<'a> = dyn Fn(&BStr, Option<&BString>, Option<&BString>) -> bool + 'a;

/// Every ref but the granted branch must equal its baseline value, unless
/// `excused` (another armed worktree's branch: see [`crate::peers`]).
pub fn compare_refs(
    before: &RefMap,
    now: &RefMap,
    branch: &BStr,
    excused: &Excuse<'_>,
    findings: &mut Findings,
) {
    let mut comparison = RefComparison::new(now, branch, excused);
    for (name, old) in before {
        comparison.before(name.as_bstr(), old.as_bstr(), findings);
    }
    comparison.finish(findings);
}

/// [`compare_refs`] as a merge of two lists in name order, the baseline's
/// handed in one ref at a time: a full read of 100,000 refs is compared
/// with the baseline read entry by entry from its file, not with a second
/// map of every ref (issue 29).
struct RefComparison<'a> {
    now: std::iter::Peekable<std::collections::btree_map::Iter<'a, BString, BString>>,
    branch: &'a BStr,
    excused: &'a Excuse<'a>,
}

impl<'a> RefComparison<'a> {
    fn new(now: &'a RefMap, branch: &'a BStr, excused: &'a Excuse<'a>) -> RefComparison<'a> {
        RefComparison {
            now: now.iter().peekable(),
            branch,
            excused,
        }
    }

    /// The baseline's next ref (names strictly increasing from call to
    /// call) and its value at arm.
    fn before(&mut self, name: &BStr, old: &BStr, findings: &mut Findings) {
        while let Some((created, new)) = self.now.next_if(|(n, _)| n.as_bstr() < name) {
            self.judge(created.as_bstr(), None, Some(new), findings);
        }
        let new = self
            .now
            .next_if(|(n, _)| n.as_bstr() == name)
            .map(|(_, v)| v);
        // The usual case, a ref as it was, without a copy of its value.
        if new.is_some_and(|new| new.as_bstr() == old) {
            return;
        }
        self.judge(name, Some(&BString::from(old)), new, findings);
    }

    /// The refs created after the baseline's last.
    fn finish(mut self, findings: &mut Findings) {
        while let Some((created, new)) = self.now.next() {
            self.judge(created.as_bstr(), None, Some(new), findings);
        }
    }

    fn judge(
        &self,
        name: &BStr,
        old: Option<&BString>,
        new: Option<&BString>,
        findings: &mut Findings,
    ) {
        if name == self.branch || old == new {
            return;
        }
        if (self.excused)(name, old, new) {
            return;
        }
        let what = match (old, new) {
            (None, Some(_)) => "was created",
            (Some(_), None) => "was deleted",
            _ => "was moved",
        };
        let id = if name.starts_with(b"refs/remotes/") {
            rule::REMOTE_TRACKING_REF_CHANGED
        } else {
            rule::REF_CHANGED
        };
        // `git stash store` puts an entry back with its reflog entry,
        // which `git stash list` and `show` need (`update-ref` alone left
        // the stash invisible to them: red team).
        let advice = match (name == "refs/stash", old, new) {
            (true, None, _) => "; drop or pop the stash (git stash drop)".to_owned(),
            (true, Some(old), None) if !old.starts_with(b"ref:") => {
                format!("; put the stash of arm back (git stash store {old})")
            }
            (true, Some(old), Some(_)) if !old.starts_with(b"ref:") => format!(
                "; drop what was stashed since arm (git stash drop), or put back the entry \
                 dropped (git stash store {old})"
            ),
            _ => "; only the granted branch may change".to_owned(),
        };
        findings.push(
            Violation::new(
                id,
                format!("{} {what} since arm{advice}", refname::shown(name)),
            )
            .with_ref(refname::encode(name)),
        );
    }
}

/// The commit the worktree is compared with: the snapshot's branch tip when
/// HEAD is on the branch; otherwise (already a violation) the commit HEAD
/// pointed to in the snapshot, so the report describes what is checked out.
fn worktree_base(head: &Head, branch: &BStr, tip: Option<ObjectId>) -> Option<ObjectId> {
    match head {
        Head::Branch { name, .. } if name == branch => tip,
        Head::Branch { commit, .. } => *commit,
        Head::Detached(id) => Some(*id),
    }
}

/// What the agent can do about one kind of dirt at a path the grant
/// allows it to commit (`granted`) or not: committing a path outside the
/// grant is refused in turn, so it is not advised (new user, fifty-eighth
/// stop). Descriptions that are not one of the four plain kinds carry their
/// own advice.
fn dirt_advice(what: &str, granted: bool) -> &'static str {
    match (what, granted) {
        ("staged", true) => "; commit it, or unstage it (git restore --staged)",
        ("staged", false) => {
            "; the grant does not allow committing it: unstage it (git restore --staged), then \
             undo the change in the worktree (git restore, or remove a file arm did not have)"
        }
        ("unstaged", true) => "; commit it, or discard the change (git restore)",
        ("unstaged", false) => {
            "; the grant does not allow committing it: discard the change (git restore)"
        }
        ("untracked", true) => "; commit it, remove it, or ignore it in a granted .gitignore",
        ("untracked", false) => {
            "; the grant does not allow committing it: remove it, or move it out of the checkout"
        }
        ("intent-to-add", true) => {
            "; stage and commit it (git add), or take it out of the index and keep the file \
             (git rm --cached)"
        }
        ("intent-to-add", false) => {
            "; the grant does not allow committing it: take it out of the index (git rm \
             --cached), then remove the file"
        }
        ("conflict", _) => "; resolve the conflict and commit, or abort the operation",
        (repo::HIDDEN, _) => {
            "; clear the flags (git update-index --no-assume-unchanged <path>, then git \
             update-index --no-skip-worktree <path>: one command clears only the first), then \
             commit or discard what they hid"
        }
        _ => "",
    }
}

/// The first half of the worktree check, which reads no file of the
/// worktree: operations under way, the index's layout, and the index
/// against `tip`, the tip the history checks decided on (not HEAD as it is
/// a moment later). `None` when the index cannot be trusted to compare.
fn check_index(
    repo: &gix::Repository,
    location: &repo::Location,
    state: &Path,
    tip: Option<ObjectId>,
    findings: &mut Vec<Violation>,
) -> Result<Option<JudgedIndex>> {
    for found in repo::operations_in_progress(&location.git_dir) {
        let message = match found.odd_kind {
            None => format!("a {} is in progress; finish or abort it", found.op),
            // Not what git writes, but what git reads: `git commit` fails
            // on a dangling `MERGE_HEAD` link ("could not open MERGE_HEAD")
            // while `git status` shows nothing.
            Some(kind) => {
                let path = location.shown(&found.marker, true);
                format!(
                    "git sees a {} in progress: its marker {path} is {kind}, which git's next \
                     commit or merge consults (and fails on); remove it (rm {})",
                    found.op,
                    crate::hooks::stub::sh_quote(&path)
                )
            }
        };
        findings.push(Violation::new(rule::WORKTREE_NOT_CLEAN, message));
    }
    // The index is read once, and every reader reads what was read (see
    // `repo::index_copy`).
    let refuse = |findings: &mut Vec<Violation>, e: anyhow::Error| {
        findings.push(match repo::index_layout::BeyondGix::of(&e) {
            // git reads it; grantguard cannot check it, and rebuilding the
            // index would not mend that.
            Some(beyond) => Violation::new(
                rule::REPOSITORY_UNREADABLE,
                format!("grantguard cannot check the index: {beyond}"),
            ),
            None => Violation::new(
                rule::WORKTREE_NOT_CLEAN,
                format!("the index is not one git reads in one way only: {e:#}. {INDEX_ADVICE}"),
            ),
        });
    };
    let copy = match repo::index_copy::IndexCopy::take(&location.git_dir, state)? {
        repo::index_copy::Taken::Copy(copy) => Some(*copy),
        repo::index_copy::Taken::Missing => None,
        repo::index_copy::Taken::Unreadable(e) => {
            refuse(findings, e);
            return Ok(None);
        }
    };
    // The file must read the same whichever way git reads it
    // (`index.threads`, split index), and gix must read what git reads.
    let index = match copy {
        Some(mut copy) => {
            let hash_len = repo.object_hash().len_in_bytes();
            let decoded = copy.decode(repo);
            let bytes = copy.bytes();
            let layout = match decoded {
                // gix's entries are held against git's reading as it
                // decodes them, one at a time.
                Ok(index) => {
                    let mut against = repo::index_layout::AgainstGix::new(&index);
                    let checked = repo::index_layout::check_bytes(
                        bytes,
                        copy.dir(),
                        hash_len,
                        &mut |entry| against.visit(entry),
                    );
                    let checked =
                        checked.and_then(|checked| against.finish(&checked).map(|()| checked));
                    // git then reads the shared file verify read too.
                    checked.and_then(|checked| {
                        let resolve_undo = checked
                            .resolve_undo
                            .and_then(|at| repo::resolve_undo::parse(&bytes[at], hash_len))
                            .unwrap_or_default();
                        copy.give_git_its_own_shared_index(checked.link_at, repo.object_hash())
                            .map(|()| (index, resolve_undo))
                    })
                }
                // What git's reading finds wrong says more than gix's error.
                Err(e) => repo::index_layout::check_bytes(bytes, copy.dir(), hash_len, &mut |_| {})
                    .and_then(|_| Err(e.context("cannot read the index"))),
            };
            match layout {
                Ok((index, resolve_undo)) => (index, Some(std::sync::Arc::new(copy)), resolve_undo),
                Err(e) => {
                    refuse(findings, e);
                    return Ok(None);
                }
            }
        }
        None => (repo::index_copy::empty(repo), None, Vec::new()),
    };
    let (index, copy, resolve_undo) = index;
    let tree = repo::tree_id_of(repo, tip)?;
    Ok(Some(JudgedIndex {
        dirt: repo::index_dirt_against(repo, index, Some(tree))?,
        copy,
        resolve_undo,
    }))
}

/// The index as [`check_index`] judged it: its staged changes, and the
/// copy of the file gix decoded, which git reads in the cross-check and the
/// last look holds against the index (`None`: there was no index file).
struct JudgedIndex {
    dirt: repo::IndexDirt,
    copy: Option<std::sync::Arc<repo::index_copy::IndexCopy>>,
    /// The resolve-undo records git reads from the copy (none without an
    /// index): each must be one whose objects the object check looked
    /// for ([`repo::objects::Checked::verified_resolve_undo`]).
    resolve_undo: Vec<repo::resolve_undo::Record>,
}

/// The second half of the worktree check, after [`check_index`] and once
/// the special-file scan has answered: the worktree against the index,
/// and entries an index flag hides from status.
fn check_worktree_files(
    repo: &gix::Repository,
    location: &repo::Location,
    first: repo::IndexDirt,
    grant: &PathMatcher,
    findings: &mut Findings,
) -> Result<()> {
    let judged = first.judged_index();
    let mut dirt = repo::worktree_dirt_after(repo, first, 0)?;
    dirt.extend(repo::hidden_entries_of(repo, &judged, &location.git_dir));
    for dirt in dirt {
        let shown = dirt.path.to_str_lossy().into_owned();
        findings.push(
            Violation::new(
                rule::WORKTREE_NOT_CLEAN,
                format!(
                    "{shown:?} {}{}",
                    dirt.phrase(),
                    dirt_advice(dirt.what, grant.is_granted(&dirt.path))
                ),
            )
            .with_path(shown),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(p: &[&str]) -> PathMatcher {
        PathMatcher::new(p.iter().copied()).unwrap()
    }

    #[test]
    fn symlink_targets_are_resolved_against_the_link_directory() {
        let m = matcher(&["docs/"]);
        assert_eq!(symlink_escape(b"docs/a", b"b", &m), None);
        assert_eq!(symlink_escape(b"docs/x/a", b"../b", &m), None);
        assert!(matches!(
            symlink_escape(b"docs/a", b"../src/main.rs", &m),
            Some(Escape::Ungranted(_))
        ));
        for outside in [
            &b"../../../etc/passwd"[..],
            b"/etc/passwd",
            b"../..",
            b"../.git/config",
            b".git/hooks/pre-commit",
            b"../docs/.GIT/x",
            // The worktree root, which holds .git.
            b"..",
            b"../",
            b"./..",
            b"../.",
        ] {
            assert!(
                matches!(
                    symlink_escape(b"docs/a", outside, &m),
                    Some(Escape::Outside(_))
                ),
                "{}",
                outside.to_str_lossy()
            );
        }
    }

    #[test]
    fn a_target_that_climbs_out_of_a_directory_it_entered_is_outside() {
        // docs/deep/s -> ../.. is the worktree root, so docs/deep/a -> s/../x
        // is /x outside the repository, though it reads as docs/deep/x.
        let m = matcher(&["docs/"]);
        assert!(matches!(
            symlink_escape(b"docs/deep/a", b"s/../x", &m),
            Some(Escape::Outside(_))
        ));
        assert_eq!(symlink_escape(b"docs/deep/a", b"../x", &m), None);
        assert!(matches!(
            symlink_escape(b"docs/deep/s", b"../..", &m),
            Some(Escape::Outside(_))
        ));
        // Its own directory holds no .git: at most a warning.
        assert!(!matches!(
            symlink_escape(b"docs/x", b".", &m),
            Some(Escape::Outside(_))
        ));
        assert_eq!(symlink_escape(b"docs/deep/a", b"./s/./x", &m), None);
    }

    #[test]
    fn findings_cap_listing_but_count_everything() {
        let mut f = Findings::default();
        for i in 0..100 {
            f.push(Violation::new(rule::PATH_NOT_GRANTED, format!("{i}")));
        }
        assert_eq!(f.listed.len(), MAX_LISTED);
        assert_eq!(f.totals[rule::PATH_NOT_GRANTED], 100);
    }

    #[test]
    fn ref_comparison_names_created_deleted_and_moved_refs() {
        let before: RefMap = [
            ("refs/heads/main", "a"),
            ("refs/tags/v1", "b"),
            ("refs/remotes/origin/main", "c"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let mut now = before.clone();
        now.insert("refs/heads/main".into(), "moved-is-fine".into());
        now.remove(b"refs/tags/v1".as_slice());
        now.insert("refs/remotes/origin/main".into(), "d".into());
        now.insert("refs/stash".into(), "e".into());
        let mut f = Findings::default();
        compare_refs(
            &before,
            &now,
            "refs/heads/main".into(),
            &|_, _, _| false,
            &mut f,
        );
        assert_eq!(f.totals[rule::REF_CHANGED], 2);
        assert_eq!(f.totals[rule::REMOTE_TRACKING_REF_CHANGED], 1);
    }

    proptest::proptest! {
        /// The merge of two lists in name order finds what a lookup of
        /// every name on both sides finds, in the same order.
        #[test]
        fn the_ref_merge_finds_what_a_lookup_of_every_name_finds(
            before in proptest::collection::btree_map("[a-c]{1,3}", "[xy]", 0..12),
            now in proptest::collection::btree_map("[a-c]{1,3}", "[xy]", 0..12),
            excused_names in proptest::collection::btree_set("[a-c]{1,3}", 0..3),
        ) {
            let map = |m: &BTreeMap<String, String>| -> RefMap {
                m.iter().map(|(k, v)| (format!("refs/{k}").into(), v.as_str().into())).collect()
            };
            let (before, now) = (map(&before), map(&now));
            let excused_names: BTreeSet<BString> =
                excused_names.iter().map(|n| format!("refs/{n}").into()).collect();
            let excused = |name: &BStr, _: Option<&BString>, _: Option<&BString>| {
                excused_names.contains(name)
            };
            let branch: &BStr = "refs/a".into();
            let mut merged = Findings::default();
            compare_refs(&before, &now, branch, &excused, &mut merged);
            let mut expected = Vec::new();
            let names: BTreeSet<&BString> = before.keys().chain(now.keys()).collect();
            for name in names {
                let (old, new) = (before.get(name), now.get(name));
                if name == branch || old == new || excused_names.contains(name) {
                    continue;
                }
                let what = match (old, new) {
                    (None, _) => "was created",
                    (_, None) => "was deleted",
                    _ => "was moved",
                };
                expected.push(format!("{name} {what}"));
            }
            let found: Vec<String> = merged
                .listed
                .iter()
                .map(|v| v.message.split(" since arm").next().unwrap().to_owned())
                .collect();
            proptest::prop_assert_eq!(found, expected);
        }
    }
}
