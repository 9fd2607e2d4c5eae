//! HEAD and the snapshot of every ref.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use gix::bstr::BString;
use gix::refs::TargetRef;

/// Every ref under `refs/` (loose and packed) and its raw value: the hex
/// object id, or `ref:<target>` for a symbolic ref. Values are not peeled, so
/// moving an annotated tag's target is seen as what it is. Names and values
/// are bytes, compared as bytes (see [`super::refname`]).
pub type RefMap = BTreeMap<BString, BString>;

/// Where HEAD points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Head {
    /// A symbolic ref to a branch, with the branch's commit (`None` while the
    /// branch is unborn).
    Branch {
        /// Full ref name, e.g. `refs/heads/main`, as bytes.
        name: BString,
        /// The commit the branch points to.
        commit: Option<gix::ObjectId>,
    },
    /// A detached HEAD at a commit.
    Detached(gix::ObjectId),
}

/// Reads HEAD without following anything but its own symref.
pub fn head(repo: &gix::Repository) -> Result<Head> {
    if super::is_reftable(repo) {
        return super::reftable::head_of(&reftable_view(repo)?);
    }
    let head = repo.head().context("cannot read HEAD")?;
    Ok(match head.kind {
        gix::head::Kind::Symbolic(r) => Head::Branch {
            name: r.name.as_bstr().to_owned(),
            commit: r.target.try_id().map(ToOwned::to_owned),
        },
        gix::head::Kind::Unborn(name) => Head::Branch {
            name: name.as_bstr().to_owned(),
            commit: None,
        },
        gix::head::Kind::Detached { target, .. } => Head::Detached(target),
    })
}

/// The strict reftable view of the worktree `repo` is opened in.
fn reftable_view(repo: &gix::Repository) -> Result<super::reftable::View> {
    Ok(super::reftable::read(
        repo.git_dir(),
        repo.common_dir(),
        repo.object_hash(),
    )?)
}

/// The tree of HEAD's commit, or the empty tree while the branch is unborn
/// (gix's `head_tree_id_or_empty`, which cannot read a reftable HEAD).
pub fn head_tree_id_or_empty(repo: &gix::Repository) -> Result<gix::ObjectId> {
    if !super::is_reftable(repo) {
        return Ok(repo
            .head_tree_id_or_empty()
            .context("cannot read HEAD's tree")?
            .detach());
    }
    let commit = match head(repo)? {
        Head::Branch { commit, .. } => commit,
        Head::Detached(id) => Some(id),
    };
    match commit {
        None => Ok(gix::ObjectId::empty_tree(repo.object_hash())),
        Some(id) => Ok(repo
            .find_commit(id)
            .context("cannot read HEAD's commit")?
            .tree_id()
            .context("cannot read HEAD's tree")?
            .detach()),
    }
}

/// Snapshots every ref under `refs/` with its raw value.
pub fn ref_snapshot(repo: &gix::Repository) -> Result<RefMap> {
    let mut out = RefMap::new();
    each_ref(repo, |name, value| {
        out.insert(name, value);
    })?;
    Ok(out)
}

/// Calls `each` with every ref under `refs/` as [`ref_snapshot`] reads it
/// (name, raw value), in the reader's order, without collecting them: a
/// map of 100,000 refs is memory verify can do without (issue 29).
pub fn each_ref(repo: &gix::Repository, mut each: impl FnMut(BString, BString)) -> Result<()> {
    if super::is_reftable(repo) {
        for (name, value) in reftable_view(repo)?.refs {
            each(name, value);
        }
        return Ok(());
    }
    let platform = repo.references().context("cannot list refs")?;
    for reference in platform.all().context("cannot list refs")? {
        let reference = reference.map_err(|e| anyhow::anyhow!("cannot read a ref: {e}"))?;
        each(
            reference.name().as_bstr().to_owned(),
            raw_target(reference.target()),
        );
    }
    Ok(())
}

/// A ref's raw value as [`RefMap`] holds it: the hex id, or
/// `ref:<target>`.
pub(super) fn raw_target(target: TargetRef<'_>) -> BString {
    match target {
        TargetRef::Object(id) => super::hex(id).into(),
        TargetRef::Symbolic(target) => {
            let mut v = BString::from("ref:");
            v.extend_from_slice(target.as_bstr());
            v
        }
    }
}
