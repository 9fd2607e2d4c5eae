//! The `reference-transaction` hook: every ref update passes through it, so
//! it is where commits, resets, rebases, tags, branches, fetches and direct
//! `update-ref`s are refused at the moment they happen — including commits
//! made with `--no-verify`, which skips only `pre-commit`.
//!
//! Each line `<old> <new> <ref>` is decided by its *effect*: the value the
//! ref will have, compared with its value at the baseline. The old column is
//! never trusted. This makes git's quirks harmless: `git pack-refs` reports
//! every ref as created with its current value and then deletes the loose
//! copies whose packed copy keeps the value; deleting a packed ref can send
//! lines whose old and new are both zero; `git gc` may send an empty
//! transaction; git >= 2.46 writes symref values as `ref:<target>`.

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result};

use crate::acceptance::{Findings, check_history, rule};
use crate::baseline::Baseline;
use crate::grant::Grant;
use crate::repo::packed_refs::PackedRefs;
use crate::repo::{RefMap, refname};
use crate::result::Violation;
use gix::bstr::{BStr, BString, ByteSlice};

/// The phase git calls the hook in (its first argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// git >= 2.54: before the refs are locked; `HEAD` may be unresolved.
    Preparing,
    /// All refs locked; the transaction can still be aborted.
    Prepared,
    /// Done; too late to refuse.
    Committed,
    /// Rolled back (also sent for internal sub-transactions).
    Aborted,
}

impl Phase {
    /// Parses the hook's first argument.
    pub fn parse(arg: &str) -> Option<Phase> {
        Some(match arg {
            "preparing" => Phase::Preparing,
            "prepared" => Phase::Prepared,
            "committed" => Phase::Committed,
            "aborted" => Phase::Aborted,
            _ => return None,
        })
    }

    /// Whether a refusal in this phase still stops the update.
    pub fn can_refuse(self) -> bool {
        matches!(self, Phase::Preparing | Phase::Prepared)
    }
}

/// One side of an update line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefValue {
    /// The all-zero id: absent (created from nothing, or deleted).
    Zero,
    /// An object id, lowercase hex.
    Object(String),
    /// A symbolic ref (`ref:<target>`), the target as bytes.
    Symbolic(BString),
}

/// One line of the hook's standard input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// The value before, as git claims it (never trusted for decisions).
    pub old: RefValue,
    /// The value after.
    pub new: RefValue,
    /// The full ref name, as bytes (git allows non-UTF-8 names).
    pub name: BString,
}

/// A malformed line of standard input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

fn bad_name(name: &[u8]) -> bool {
    name.is_empty() || name.iter().any(|&b| b.is_ascii_control() || b == b' ')
}

fn parse_value(word: &[u8]) -> Result<RefValue, String> {
    if let Some(target) = word.strip_prefix(b"ref:") {
        if bad_name(target) {
            return Err(format!("invalid symbolic target {}", refname::shown(word)));
        }
        return Ok(RefValue::Symbolic(target.into()));
    }
    let is_hex = word.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !is_hex || !(word.len() == 40 || word.len() == 64) {
        return Err(format!(
            "{} is neither an object id nor ref:<target>",
            refname::shown(word)
        ));
    }
    Ok(if word.iter().all(|&b| b == b'0') {
        RefValue::Zero
    } else {
        RefValue::Object(String::from_utf8(word.to_vec()).expect("hex is ASCII"))
    })
}

/// Parses the hook's standard input as bytes: ref names may be any bytes
/// git allows, non-UTF-8 included, and are kept exactly. Empty input (an
/// empty transaction, as `git gc` may send) is no updates.
pub fn parse_updates(input: &[u8]) -> Result<Vec<Update>, ParseError> {
    let mut out = Vec::new();
    let body = input.strip_suffix(b"\n").unwrap_or(input);
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let fail = |message: String| ParseError {
            line: i + 1,
            message,
        };
        if line.is_empty() {
            continue;
        }
        let mut words = line.splitn(3, |&b| b == b' ');
        let (Some(old), Some(new), Some(name)) = (words.next(), words.next(), words.next()) else {
            return Err(fail(format!(
                "expected '<old> <new> <ref>', got {}",
                refname::shown(line)
            )));
        };
        if bad_name(name) {
            return Err(fail(format!("invalid ref name {}", refname::shown(name))));
        }
        out.push(Update {
            old: parse_value(old).map_err(fail)?,
            new: parse_value(new).map_err(fail)?,
            name: name.into(),
        });
    }
    Ok(out)
}

/// Root refs whose names do not end in `_HEAD` (git's `is_root_ref`, 2.45+).
const IRREGULAR_ROOT_REFS: &[&[u8]] = &[
    b"AUTO_MERGE",
    b"BISECT_EXPECTED_REV",
    b"NOTES_MERGE_PARTIAL",
    b"NOTES_MERGE_REF",
    b"MERGE_AUTOSTASH",
];

/// Whether `name` is one of git's pseudorefs and special root refs
/// (`ORIG_HEAD`, `FETCH_HEAD`, `MERGE_HEAD`, `CHERRY_PICK_HEAD`,
/// `REVERT_HEAD`, `REBASE_HEAD`, `BISECT_HEAD`, `AUTO_MERGE`,
/// `MERGE_AUTOSTASH`, ...): git's own rule, not a list of the ones met so
/// far, is a name outside `refs/` of capitals and underscores that ends in
/// `_HEAD` or is one of [`IRREGULAR_ROOT_REFS`]. git moves them during
/// ordinary work (merge, rebase, cherry-pick, bisect, `--autostash`); they are
/// not part of the grant and are never pushed or cloned. `HEAD` itself is
/// decided on its own.
fn is_root_scratch_ref(name: &[u8]) -> bool {
    let syntax = !name.is_empty() && name.iter().all(|&b| b.is_ascii_uppercase() || b == b'_');
    syntax && (name.ends_with(b"_HEAD") || IRREGULAR_ROOT_REFS.contains(&name))
}

/// What an agent can do instead when `name` may not change, for the
/// refusal message: each ref family has its own way forward.
fn advice_for(name: &[u8], created: bool) -> &'static str {
    if name.starts_with(b"refs/tags/") {
        "tags are the harness's to make after acceptance; describe the release in a commit \
         message instead"
    } else if name.starts_with(b"refs/notes/") {
        "notes are the harness's to make; put the note in a commit message or a granted file"
    } else if name.starts_with(b"refs/replace/") {
        "replace refs would rewrite what history means; commit the change on the granted \
         branch instead"
    } else if name.starts_with(b"refs/remotes/") {
        "remote-tracking refs change only by fetching, which the harness does; to look at a \
         remote branch use git switch --detach origin/<branch> and come back"
    } else if name.starts_with(b"refs/heads/") && created {
        "only the granted branch may change: for an experiment use git switch --detach, to \
         park work use git stash (and pop it before you finish), then git switch back"
    } else if name.starts_with(b"refs/heads/") {
        "only the granted branch may change; other branches stay as they were"
    } else {
        "only the granted branch (and git's scratch refs) may change while armed"
    }
}

/// How a ref the grant cares about is treated.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Head,
    GrantedBranch,
    Protected,
}

/// The kind of a ref, or `None` for scratch refs that are free to move while
/// armed: root refs ([`is_root_scratch_ref`]), `refs/stash`, `refs/bisect/*`
/// and `refs/rewritten/*`
/// (`git rebase --rebase-merges` labels). Verify demands the ones under
/// `refs/` back at their baseline values.
fn kind(name: &[u8], branch: &[u8]) -> Option<Kind> {
    Some(if name == b"HEAD" {
        Kind::Head
    } else if name == branch {
        Kind::GrantedBranch
    } else if is_scratch(name) {
        return None;
    } else {
        Kind::Protected
    })
}

/// Whether `name` is a scratch ref, free to move while armed whatever the
/// baseline says (see [`kind`]). `HEAD` is not: it is decided on its own.
fn is_scratch(name: &[u8]) -> bool {
    name != b"HEAD"
        && (is_root_scratch_ref(name)
            || name == b"refs/stash"
            || name.starts_with(b"refs/bisect/")
            || name.starts_with(b"refs/rewritten/"))
}

/// Whether deciding `updates` needs the grant at all: a transaction that
/// moves only scratch refs (git 2.47 deletes `AUTO_MERGE` in a transaction
/// of its own after every commit), or nothing, is allowed whatever the grant
/// and the repository are, so the hook answers it without reading either,
/// as it answers the `committed` phase.
pub fn needs_grant(updates: &[Update]) -> bool {
    updates.iter().any(|u| !is_scratch(&u.name))
}

/// The value a branch has in the common dir while a transaction holds its
/// locks: the loose file, else the packed record (`packed-refs` with the
/// strict parser verify uses: a file git could read differently is an
/// error); `None` when absent or `Err` when it cannot be read (the strict
/// reader refuses a store with locks in it, so this reads only the one
/// ref). In reftable, every table is read and checked.
pub fn branch_value(common_dir: &Path, name: &[u8]) -> Result<Option<BString>> {
    if common_dir.join("reftable").is_dir() {
        return Ok(crate::repo::reftable::shared_ref(common_dir, name)?);
    }
    files_branch_value(common_dir, name)
}

/// [`branch_value`] as a hook reads it: in reftable, the ref is found
/// without reading every ref ([`crate::repo::reftable::found_shared_ref`]);
/// for hooks only.
pub fn found_branch_value(common_dir: &Path, name: &[u8]) -> Result<Option<BString>> {
    if common_dir.join("reftable").is_dir() {
        return Ok(crate::repo::reftable::found_shared_ref(common_dir, name)?);
    }
    files_branch_value(common_dir, name)
}

fn files_branch_value(common_dir: &Path, name: &[u8]) -> Result<Option<BString>> {
    use std::os::unix::ffi::OsStrExt;
    let path = common_dir.join(std::ffi::OsStr::from_bytes(name));
    // Bounded: the agent may have planted a huge or sparse file there.
    match crate::fsutil::read_regular_limited(&path, crate::repo::refstore::MAX_LOOSE_BYTES) {
        Ok(bytes) => crate::repo::refstore::parse_loose(&bytes)
            .map(Some)
            .map_err(|why| anyhow::anyhow!("{}: {why}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(packed_value(&packed_refs(common_dir)?, name))
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Whether `update` leaves its ref at the value it has now: `git pack-refs`
/// (and `git gc`) rewrites every ref in a transaction, reporting each as
/// set to its current value and then pruning the loose copies, including
/// the branches other armed worktrees' agents have moved since this
/// baseline (issue 29's red-team: gc refused in a worktree beside an
/// armed peer). Such a line changes nothing; a ref moved earlier with the
/// hooks bypassed is verify's to find. Per-worktree refs live in another
/// git dir than the common one read here: never taken as unchanged; nor is
/// a ref that cannot be read.
fn leaves_unchanged(update: &Update, value: &Option<BString>, common_dir: &Path) -> bool {
    !refname::is_per_worktree(&update.name)
        && matches!(found_branch_value(common_dir, &update.name), Ok(now) if now == *value)
}

/// The value `update` leaves its ref at (see `effect`): a deletion that only
/// prunes a loose copy leaves the packed value.
pub fn resulting_value(update: &Update, common_dir: &Path) -> Result<Option<BString>> {
    effect(update, common_dir, &mut None)
}

/// The records of `packed-refs`, parsed whole and strictly; each value is
/// then found by bisection ([`packed_value`]). (A map of every record was
/// two thirds of a hook call on 100,000 packed refs, and `git pack-refs`
/// runs the hook twice for each loose ref it prunes.)
fn packed_refs(common_dir: &Path) -> Result<PackedRefs> {
    let path = common_dir.join("packed-refs");
    let text =
        match crate::fsutil::read_regular_limited(&path, crate::repo::refstore::MAX_PACKED_BYTES) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PackedRefs::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
    crate::repo::packed_refs::parse(&text)
        .map_err(|why| anyhow::anyhow!("{}: {why}", path.display()))
}

/// The value of the record named `name` in `packed`.
fn packed_value(packed: &PackedRefs, name: &[u8]) -> Option<BString> {
    packed.find(name).map(|r| BString::from(r.id))
}

/// The value a ref will have once the update is applied (`None`: absent).
///
/// A deletion while `packed-refs.lock` is held is a real deletion (git locks
/// the packed file to drop the ref there too). A deletion without that lock
/// removes only a loose file, and the ref keeps its packed value, which is
/// what `git pack-refs` does after packing.
fn effect(
    update: &Update,
    common_dir: &Path,
    packed: &mut Option<PackedRefs>,
) -> Result<Option<BString>> {
    Ok(match &update.new {
        RefValue::Object(id) => Some(id.as_str().into()),
        RefValue::Symbolic(target) => {
            let mut v = BString::from("ref:");
            v.extend_from_slice(target);
            Some(v)
        }
        // reftable has no second copy of a ref: a deletion deletes.
        RefValue::Zero if common_dir.join("reftable").is_dir() => None,
        RefValue::Zero => {
            if common_dir.join("packed-refs.lock").exists() {
                None
            } else {
                if packed.is_none() {
                    *packed = Some(packed_refs(common_dir)?);
                }
                packed.as_ref().and_then(|p| packed_value(p, &update.name))
            }
        }
    })
}

/// Decides a transaction in a refusable phase. An empty result allows it.
pub fn decide(
    repo: &gix::Repository,
    baseline: &Baseline,
    grant: &Grant,
    updates: &[Update],
) -> Result<Findings> {
    let mut findings = Findings::default();
    let mut packed = None;
    let mut branch_values: Vec<Option<BString>> = Vec::new();
    let hex_len = repo.object_hash().len_in_hex();
    // The baseline's values of the protected refs this transaction moves,
    // read only when there are such refs: a commit's transactions (HEAD
    // and the branch) never need them.
    let protected: std::collections::BTreeSet<&BStr> = updates
        .iter()
        .filter(|u| kind(&u.name, &baseline.branch) == Some(Kind::Protected))
        .map(|u| u.name.as_bstr())
        .collect();
    let at_arm = match protected.is_empty() {
        true => RefMap::new(),
        false => baseline.refs_named(&protected)?,
    };
    for update in updates {
        let Some(kind) = kind(&update.name, &baseline.branch) else {
            continue;
        };
        // git writes only ids of the repository's own format; another length
        // cannot name an object here, so it is not decided on.
        if let RefValue::Object(id) = &update.new
            && id.len() != hex_len
        {
            findings.push(
                Violation::new(
                    rule::REF_CHANGED,
                    format!(
                        "{} would be set to {id}, which is not a {}-digit object id of this \
                         repository's format ({:?})",
                        refname::shown(&update.name),
                        hex_len,
                        repo.object_hash()
                    ),
                )
                .with_ref(refname::encode(&update.name)),
            );
            continue;
        }
        let value = effect(update, &baseline.repo.common_dir, &mut packed)?;
        match kind {
            // A commit through HEAD always comes with a line for the branch
            // itself, which is decided below; a HEAD line alone detaches or
            // switches HEAD, which verify checks at the end.
            Kind::Head if value.is_some() => {}
            Kind::Head => findings
                .push(Violation::new(rule::REF_CHANGED, "HEAD cannot be deleted").with_ref("HEAD")),
            Kind::GrantedBranch => {
                if !branch_values.contains(&value) {
                    branch_values.push(value);
                }
            }
            Kind::Protected => {
                let refs = &at_arm;
                if value.as_ref() != refs.get(&update.name)
                    && !leaves_unchanged(update, &value, &baseline.repo.common_dir)
                {
                    let what = match (refs.get(&update.name), &value) {
                        (None, _) => "be created",
                        (Some(_), None) => "be deleted",
                        _ => "move",
                    };
                    let id = if update.name.starts_with(b"refs/remotes/") {
                        rule::REMOTE_TRACKING_REF_CHANGED
                    } else {
                        rule::REF_CHANGED
                    };
                    let created = !refs.contains_key(&update.name);
                    findings.push(
                        Violation::new(
                            id,
                            format!(
                                "{} would {what}: {}",
                                refname::shown(&update.name),
                                advice_for(&update.name, created)
                            ),
                        )
                        .with_ref(refname::encode(&update.name)),
                    );
                }
            }
        }
    }
    let matcher = grant.matcher();
    for value in branch_values {
        match value {
            None if baseline.commit.is_none() => {}
            None => findings.push(
                Violation::new(
                    rule::NOT_DESCENDANT,
                    format!(
                        "{} would be deleted; the granted branch must stay",
                        refname::shown(&baseline.branch)
                    ),
                )
                .with_ref(refname::encode(&baseline.branch)),
            ),
            Some(v) if v.starts_with(b"ref:") => findings.push(
                Violation::new(
                    rule::NOT_DESCENDANT,
                    format!(
                        "{} would become a symbolic ref ({})",
                        refname::shown(&baseline.branch),
                        refname::shown(&v)
                    ),
                )
                .with_ref(refname::encode(&baseline.branch)),
            ),
            Some(v) => {
                let tip = crate::repo::parse_id(std::str::from_utf8(&v)?)?;
                check_history(
                    repo,
                    baseline.commit_id(),
                    Some(tip),
                    grant,
                    &matcher,
                    crate::acceptance::CountCheck::MaxOnly,
                    &mut findings,
                )?;
            }
        }
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const Z: &str = "0000000000000000000000000000000000000000";

    #[test]
    fn parses_objects_zeros_and_symrefs() {
        let input = format!(
            "{Z} {A} refs/heads/main\n{A} {Z} refs/tags/v1\n{Z} ref:refs/heads/main HEAD\n"
        );
        let u = parse_updates(input.as_bytes()).unwrap();
        assert_eq!(u.len(), 3);
        assert_eq!(u[0].new, RefValue::Object(A.into()));
        assert_eq!(u[1].new, RefValue::Zero);
        assert_eq!(u[2].new, RefValue::Symbolic("refs/heads/main".into()));
    }

    #[test]
    fn empty_input_is_an_empty_transaction() {
        assert_eq!(parse_updates(b"").unwrap(), vec![]);
        assert_eq!(parse_updates(b"\n").unwrap(), vec![]);
    }

    #[test]
    fn rejects_malformed_lines_with_their_number() {
        for (input, line) in [
            (format!("{A} {A}\n"), 1),
            (format!("{A} {A} refs/x\nxyz {A} refs/y\n"), 2),
            (format!("{A} {} refs/x\n", &A[..39]), 1),
            (format!("{A} ref: refs/x\n"), 1),
            (format!("{A} {A} \n"), 1),
            (format!("{A} {A} refs/a b\n"), 1),
            ("\u{0}\n".to_string(), 1),
        ] {
            let err = parse_updates(input.as_bytes()).unwrap_err();
            assert_eq!(err.line, line, "{input:?}: {err}");
        }
        assert!(parse_updates(b"\xff\xfe").is_err());
    }

    #[test]
    fn keeps_non_utf8_names_exactly() {
        let mut input = format!("{Z} {A} refs/heads/caf").into_bytes();
        input.extend_from_slice(b"\xe9\n");
        let u = parse_updates(&input).unwrap();
        assert_eq!(u[0].name, &b"refs/heads/caf\xe9"[..]);
        assert_ne!(u[0].name, &b"refs/heads/caf\xe8"[..]);
    }

    fn kind_str(name: &str, branch: &str) -> Option<Kind> {
        kind(name.as_bytes(), branch.as_bytes())
    }

    #[test]
    fn classifies_refs() {
        let b = "refs/heads/main";
        assert_eq!(kind_str("HEAD", b), Some(Kind::Head));
        assert_eq!(kind_str("refs/heads/main", b), Some(Kind::GrantedBranch));
        for scratch in [
            "ORIG_HEAD",
            "AUTO_MERGE",
            "MERGE_AUTOSTASH",
            "NOTES_MERGE_PARTIAL",
            "BISECT_HEAD",
            "REVERT_HEAD",
            "BISECT_EXPECTED_REV",
            "refs/stash",
            "refs/bisect/bad",
            "refs/rewritten/onto",
        ] {
            assert_eq!(kind_str(scratch, b), None, "{scratch}");
        }
        for protected in [
            "refs/heads/other",
            "refs/tags/v1",
            "refs/remotes/origin/main",
            "refs/notes/commits",
            "refs/replace/x",
            // Not root-ref syntax: lowercase, a slash, or no _HEAD ending.
            "main",
            "Orig_HEAD",
            "MERGE_AUTOSTASHES",
            "BISECT_LOG",
            "_",
        ] {
            assert_eq!(kind_str(protected, b), Some(Kind::Protected), "{protected}");
        }
    }

    #[test]
    fn only_a_transaction_of_scratch_refs_needs_no_grant() {
        let parse = |s: String| parse_updates(s.as_bytes()).unwrap();
        assert!(!needs_grant(&[]));
        assert!(!needs_grant(&parse(format!(
            "{Z} {Z} AUTO_MERGE\n{A} {Z} refs/stash\n{Z} {A} ORIG_HEAD\n"
        ))));
        for decided in [
            "HEAD",
            "refs/heads/main",
            "refs/heads/other",
            "refs/tags/v1",
            "main",
        ] {
            let updates = parse(format!("{Z} {Z} AUTO_MERGE\n{Z} {A} {decided}\n"));
            assert!(needs_grant(&updates), "{decided}");
        }
    }

    #[test]
    fn phases_parse_and_only_early_ones_refuse() {
        assert!(Phase::parse("preparing").unwrap().can_refuse());
        assert!(Phase::parse("prepared").unwrap().can_refuse());
        assert!(!Phase::parse("committed").unwrap().can_refuse());
        assert!(!Phase::parse("aborted").unwrap().can_refuse());
        assert_eq!(Phase::parse("bogus"), None);
    }
}
