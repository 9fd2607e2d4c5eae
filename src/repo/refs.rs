//! HEAD and the snapshot of every ref.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use gix::bstr::{BStr, BString, ByteSlice};
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
        return super::reftable::head(repo.git_dir(), repo.common_dir(), repo.object_hash());
    }
    files_head(repo)
}

/// [`head`] as a hook reads it: in a reftable repository, HEAD and its
/// branch are found without reading every ref ([`super::reftable::found_head`],
/// whose answer only the full read proves). For hooks only: what decides
/// acceptance reads with [`head`].
pub fn found_head(repo: &gix::Repository) -> Result<Head> {
    if super::is_reftable(repo) {
        return super::reftable::found_head(repo.git_dir(), repo.common_dir(), repo.object_hash());
    }
    files_head(repo)
}

fn files_head(repo: &gix::Repository) -> Result<Head> {
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
    head_tree_of(repo, head)
}

/// [`head_tree_id_or_empty`] of HEAD as `head` (read by [`found_head`]: for
/// hooks only), which a reftable repository is not read again for; gix
/// reads a files repository's HEAD tree itself.
pub fn head_tree_id_given(repo: &gix::Repository, head: &Head) -> Result<gix::ObjectId> {
    head_tree_of(repo, |_| Ok(head.clone()))
}

fn head_tree_of(
    repo: &gix::Repository,
    head: impl FnOnce(&gix::Repository) -> Result<Head>,
) -> Result<gix::ObjectId> {
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
        out.insert(name.to_owned(), value.to_owned());
    })?;
    Ok(out)
}

/// Calls `each` with every ref under `refs/` as [`ref_snapshot`] reads it
/// (name, raw value), in the reader's order, without collecting them: a
/// map of 100,000 refs is memory verify can do without (issue 29). Both
/// are borrowed: a copy of each name and a formatted id per ref were a
/// tenth of the proof of 100,000 refs.
pub fn each_ref(repo: &gix::Repository, mut each: impl FnMut(&BStr, &BStr)) -> Result<()> {
    if super::is_reftable(repo) {
        for (name, value) in reftable_view(repo)?.refs {
            each(name.as_bstr(), value.as_bstr());
        }
        return Ok(());
    }
    let platform = repo.references().context("cannot list refs")?;
    let mut value = BString::default();
    for reference in platform.all().context("cannot list refs")? {
        let reference = reference.map_err(|e| anyhow::anyhow!("cannot read a ref: {e}"))?;
        value.clear();
        push_raw_target(reference.target(), &mut value);
        each(reference.name().as_bstr(), value.as_bstr());
    }
    Ok(())
}

/// Appends a ref's raw value as [`RefMap`] holds it to `out`: the hex id,
/// or `ref:<target>`.
fn push_raw_target(target: TargetRef<'_>, out: &mut BString) {
    match target {
        TargetRef::Object(id) => {
            let mut hex = [0; gix::hash::Kind::longest().len_in_hex()];
            out.extend_from_slice(id.hex_to_buf(&mut hex).as_bytes());
        }
        TargetRef::Symbolic(target) => {
            out.extend_from_slice(b"ref:");
            out.extend_from_slice(target.as_bstr());
        }
    }
}

/// A ref's raw value as [`RefMap`] holds it: the hex id, or
/// `ref:<target>`.
pub(super) fn raw_target(target: TargetRef<'_>) -> BString {
    let mut value = BString::default();
    push_raw_target(target, &mut value);
    value
}

/// A walk of a [`RefMap`] beside another reader's listing of the same refs,
/// in one pass: each listed name is matched with the map's entry without a
/// lookup, and without a set of every name seen (a 100,000-ref store;
/// issue 29), as long as the listing is in name order, as git's and gix's
/// are. It is right in any order all the same: entries the walk passed are
/// kept aside until they are listed, and a name out of order is found
/// there.
pub struct Beside<'a> {
    map: &'a RefMap,
    cursor: std::iter::Peekable<std::collections::btree_map::Iter<'a, BString, BString>>,
    passed: BTreeSet<&'a BString>,
}

impl<'a> Beside<'a> {
    /// A walk of `map` from its first entry.
    pub fn new(map: &'a RefMap) -> Beside<'a> {
        Beside {
            map,
            cursor: map.iter().peekable(),
            passed: BTreeSet::new(),
        }
    }

    /// The map's entry for `name` the first time it is listed; `None` when
    /// the map has none, or it was listed before.
    pub fn take(&mut self, name: &BStr) -> Option<(&'a BString, &'a BString)> {
        while let Some((key, _)) = self.cursor.next_if(|(key, _)| key.as_bstr() < name) {
            self.passed.insert(key);
        }
        if let Some(entry) = self.cursor.next_if(|(key, _)| key.as_bstr() == name) {
            return Some(entry);
        }
        let key = self.passed.take(&BString::from(name))?;
        self.map.get_key_value(key)
    }

    /// The entries never taken, in name order.
    pub fn rest(mut self) -> impl Iterator<Item = (&'a BString, &'a BString)> {
        self.passed.extend(self.cursor.map(|(key, _)| key));
        let map = self.map;
        self.passed
            .into_iter()
            .filter_map(move |key| map.get_key_value(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_beside_finds_each_entry_once_in_any_order() {
        let names = ["refs/a-b", "refs/a.b", "refs/a/b", "refs/a0", "refs/z"];
        let map: RefMap = names
            .iter()
            .map(|n| (BString::from(*n), BString::from(format!("v{n}"))))
            .collect();
        let orders: [&[&str]; 4] = [
            &names,
            &["refs/a/b", "refs/a-b", "refs/a.b", "refs/a0", "refs/z"],
            &["refs/z", "refs/a0", "refs/a/b", "refs/a.b", "refs/a-b"],
            &["refs/a.b", "refs/0", "refs/a.b", "refs/zz", "refs/a-b"],
        ];
        for order in orders {
            let mut walk = Beside::new(&map);
            let mut taken = Vec::new();
            for name in order {
                match walk.take(name.as_bytes().as_bstr()) {
                    Some((key, value)) => {
                        assert_eq!(key, name);
                        assert_eq!(*value, format!("v{name}"));
                        taken.push(*name);
                    }
                    None => assert!(
                        !map.contains_key(name.as_bytes()) || taken.contains(name),
                        "{name} of {order:?}"
                    ),
                }
            }
            let rest: Vec<&BString> = walk.rest().map(|(k, _)| k).collect();
            let expected: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !taken.contains(n))
                .collect();
            assert_eq!(rest, expected, "{order:?}");
        }
    }
}
