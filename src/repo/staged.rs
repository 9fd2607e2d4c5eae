//! What the next commit would change: the index against HEAD's tree.
//!
//! A directory whose index entries make exactly HEAD's subtree is skipped
//! without comparing one of its entries: the entries' tree ids are hashed in
//! one pass ([`super::entry_trees`]), no object read, and compared with
//! HEAD's. That keeps the hook within a few milliseconds of `git diff --cached` on
//! 100,000 files, and it is proven from the entries, not taken on trust.
//!
//! The index's cache-tree (`TREE` extension) is not trusted to skip anything:
//! GitPython writes back the cache-tree it read after changing entries, and
//! builds its commit from the entries, so a node naming HEAD's tree over
//! changed entries once hid an ungranted commit from this hook. But `git
//! commit` writes a valid cache-tree node's tree as it is, without looking at
//! the entries, so with [`CacheTreeUse::AlsoGitsView`] the walk also reports
//! what such a node would change: where a node git would reuse names another
//! tree than the entries make, the paths where that tree differs from HEAD's
//! ([`super::git_commit_tree`]). The hook thus judges both trees a client can
//! commit from this index. Final acceptance ([`CacheTreeUse::Ignore`])
//! holds the cache-tree against the tip separately (`cache_tree_dirt`), and
//! hashes the entries' trees with git's own collision-detecting SHA-1
//! ([`Hashing::CollisionDetecting`]): an id equal to the tip's subtree is
//! then the proof git itself takes for an object, and the hook's faster
//! hash is never the authority's.
//!
//! Under git's `commit` with a valid root node, the hook does not come
//! here at all: git commits that node's tree, which [`changes_to_root`]
//! diffs with HEAD's, learnt without decoding the index
//! ([`super::commit_root`]).
//!
//! A sparse index's directory entries (`dir/`, mode `040000`) are compared
//! with HEAD's subtree by id, and a differing one by the paths where the two
//! trees differ ([`super::sparse_dir`]); a full index never reaches that
//! code.

use std::cmp::Ordering;
use std::ops::Range;

use anyhow::{Context, Result, bail};
use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};
use gix::index::entry::{Flags, Mode, Stage};
use gix::objs::tree::EntryMode;

use super::canonical::MAX_TREE_DEPTH;
use super::entry_trees::{Hashing, entry_trees};
use super::sparse_dir::{self, Pair};

/// Whether [`staged_changes`] also reports what `git commit` would change by
/// reusing the index's cache-tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheTreeUse {
    /// Report the changes of the tree the entries make and of the tree `git
    /// commit` would write from the cache-tree: the `pre-commit` hook, which
    /// does not know which client commits.
    AlsoGitsView,
    /// Report the changes of the tree `git commit` writes from this index,
    /// and only those: the `pre-commit` hook when it knows that git's own
    /// `commit` command called it and commits next. git writes every valid
    /// cache-tree node's tree as it is and reads the entries only elsewhere,
    /// so that tree is proven by comparing those nodes' trees with HEAD's and
    /// the other entries one by one; nothing is hashed. Where most entries
    /// are outside valid nodes, reading HEAD's trees for them would cost more
    /// than hashing, and [`CacheTreeUse::AlsoGitsView`] (which reports a
    /// superset) is used instead.
    GitsViewOnly,
    /// Report the entries' changes only; the cache-tree is held against the
    /// tip elsewhere (final acceptance).
    Ignore,
}

/// Largest share of the index, as a divisor, that [`CacheTreeUse::GitsViewOnly`]
/// compares entry by entry (against HEAD's trees, which must be read) before
/// hashing every entry is cheaper; an index this small or smaller is always
/// compared.
const COMPARED_SHARE: usize = 8;
/// See [`COMPARED_SHARE`].
const ALWAYS_COMPARED: usize = 1024;

/// Every path whose committed state would differ from HEAD's if the index
/// were committed now: additions, deletions, content, mode and type changes
/// (a rename is its two sides), gitlinks included, and unmerged paths.
/// Under a sparse directory entry that differs from HEAD, every path where
/// its tree differs from HEAD's.
/// `head_tree` is `None` for an unborn branch. Entries added with
/// `git add -N` (intent to add) are not committed and not reported. The order
/// is the walk's; sort if you need one.
pub fn staged_changes(
    repo: &gix::Repository,
    head_tree: Option<ObjectId>,
    index: &gix::index::State,
    cache_tree: CacheTreeUse,
) -> Result<Vec<BString>> {
    if index.is_sparse() {
        sparse_dir::check_entries(index)?;
    }
    let head_tree = head_tree.filter(|id| !id.is_empty_tree());
    let mut cache_tree = cache_tree;
    let mut reused = Vec::new();
    if cache_tree == CacheTreeUse::GitsViewOnly {
        // A sparse index keeps the walk that handles its directory entries.
        if !index.is_sparse() {
            reused = super::git_commit_tree::nodes_git_reuses(repo, index)?;
        }
        let total = index.entries().len();
        let covered: usize = reused.iter().map(|r| r.entries.len()).sum();
        if index.is_sparse() || total - covered > ALWAYS_COMPARED.max(total / COMPARED_SHARE) {
            cache_tree = CacheTreeUse::AlsoGitsView;
            reused.clear();
        }
    }
    // The hook skips by a fast hash; final acceptance by the one git uses.
    let hashing = match cache_tree {
        CacheTreeUse::AlsoGitsView => Some(Hashing::Fast),
        CacheTreeUse::Ignore => Some(Hashing::CollisionDetecting),
        CacheTreeUse::GitsViewOnly => None,
    };
    let trees = match hashing {
        Some(hashing) => Some(entry_trees(index, repo.object_hash(), hashing)?),
        None => None,
    };
    let mut walk = Walk {
        repo,
        index,
        trees: trees.as_ref(),
        reused: &reused,
        out: Vec::new(),
        sparse: Vec::new(),
    };
    let mut dedup = cache_tree == CacheTreeUse::GitsViewOnly;
    if let Some(trees) = trees
        .as_ref()
        .filter(|_| cache_tree == CacheTreeUse::AlsoGitsView)
    {
        let reused = super::git_commit_tree::reused_nodes(repo, head_tree, index, trees)?;
        dedup = !reused.is_empty();
        walk.sparse.extend(reused);
    }
    // An explicit stack, not recursion: a tree or index thousands of levels
    // deep must be refused, not overflow the stack.
    let mut pending = vec![Dir {
        prefix: BString::default(),
        tree: head_tree,
        range: 0..index.entries().len(),
        depth: 0,
    }];
    // A valid root is git's whole tree, even over no entries at all.
    if let Some(root) = reused.first().filter(|r| r.prefix.is_empty()) {
        walk.reused_tree(root, head_tree);
        pending.clear();
    }
    while let Some(dir) = pending.pop() {
        walk.dir(dir, &mut pending)?;
    }
    for pair in std::mem::take(&mut walk.sparse) {
        sparse_dir::tree_changes(repo, pair, &mut walk.out)?;
    }
    finish(walk.out, dedup)
}

/// What `git commit` changes when it writes `root` as the commit's tree:
/// the paths where `root` differs from `head_tree` (HEAD's, `None` or the
/// empty tree when unborn), as [`staged_changes`] reports them for a valid
/// root cache-tree node. For the hook, which learns `root` without decoding
/// the index ([`super::commit_root`]).
pub fn changes_to_root(
    repo: &gix::Repository,
    head_tree: Option<ObjectId>,
    root: ObjectId,
) -> Result<Vec<BString>> {
    let head_tree = head_tree.filter(|id| !id.is_empty_tree());
    let mut out = Vec::new();
    if head_tree != Some(root) {
        let pair = Pair {
            prefix: BString::default(),
            old: head_tree,
            new: Some(root),
            depth: 0,
        };
        sparse_dir::tree_changes(repo, pair, &mut out)?;
    }
    finish(out, true)
}

/// The changed paths, refused when one is nested past git's depth limit,
/// sorted and without repeats when `dedup` (two views may name a path
/// twice).
fn finish(mut out: Vec<BString>, dedup: bool) -> Result<Vec<BString>> {
    if let Some(deep) = out
        .iter()
        .find(|p| p.iter().filter(|&&b| b == b'/').count() > MAX_TREE_DEPTH)
    {
        bail!("{}", too_deep(deep));
    }
    if dedup {
        out.sort();
        out.dedup();
    }
    Ok(out)
}

/// The message for a path nested past git's tree depth limit.
fn too_deep(path: &[u8]) -> String {
    let shown = &path[..path.len().min(120)];
    format!(
        "the path {:?}… ({} bytes) is nested more than {MAX_TREE_DEPTH} directories deep, past \
         git's core.maxTreeDepth: git cannot read or check out such a tree. Remove it (git rm -r \
         --cached on its top directory, or reset to the baseline)",
        shown.to_str_lossy(),
        path.len()
    )
}

/// One directory still to compare: `prefix` (empty or ending in `/`), `tree`
/// on the HEAD side, the index entries in `range` (all of them under
/// `prefix`) on the other, `depth` its nesting (0 for the root).
struct Dir {
    prefix: BString,
    tree: Option<ObjectId>,
    range: Range<usize>,
    depth: usize,
}

struct Walk<'a> {
    repo: &'a gix::Repository,
    index: &'a gix::index::State,
    /// The tree ids the entries make, by directory, where directories may
    /// be skipped by them (the hook).
    trees: Option<&'a super::entry_trees::EntryTrees>,
    out: Vec<BString>,
    /// The cache-tree nodes git writes as they are, in index order
    /// ([`CacheTreeUse::GitsViewOnly`]; else empty): the entries under them
    /// are not compared, their trees are.
    reused: &'a [super::git_commit_tree::Reused],
    /// Sparse directory entries and reused cache-tree nodes that differ from
    /// HEAD, to diff as trees.
    sparse: Vec<Pair>,
}

/// One entry of a HEAD tree.
struct HeadItem<'a> {
    name: &'a [u8],
    mode: EntryMode,
    id: ObjectId,
}

/// The index entries for one name in a directory: a file (several entries
/// when unmerged) or a whole subdirectory, which `sparse` says is one sparse
/// directory entry naming that tree.
struct IndexGroup<'a> {
    name: &'a [u8],
    is_dir: bool,
    range: Range<usize>,
    sparse: Option<ObjectId>,
}

/// Orders names as git orders tree entries and the index its paths: a
/// directory sorts as if its name ended in `/`.
pub(super) fn key_cmp(a: &[u8], a_dir: bool, b: &[u8], b_dir: bool) -> Ordering {
    let slash = |is_dir: bool| is_dir.then_some(&b'/');
    a.iter()
        .chain(slash(a_dir))
        .cmp(b.iter().chain(slash(b_dir)))
}

impl<'a> Walk<'a> {
    fn path_of(&self, i: usize) -> &'a [u8] {
        self.index.entries()[i].path(self.index).as_bytes()
    }

    /// The reused cache-tree node whose entries include entry `i`, if any.
    fn reused_over(&self, i: usize) -> Option<&'a super::git_commit_tree::Reused> {
        let reused = self.reused;
        let after = reused.partition_point(|r| r.entries.start <= i);
        after
            .checked_sub(1)
            .map(|at| &reused[at])
            .filter(|r| r.entries.contains(&i))
    }

    /// What git commits at a reused node: its tree, compared with HEAD's
    /// (`old`) as two trees.
    fn reused_tree(&mut self, node: &super::git_commit_tree::Reused, old: Option<ObjectId>) {
        if old != Some(node.id) {
            self.sparse.push(Pair {
                prefix: node.prefix.clone(),
                old,
                new: Some(node.id),
                depth: node.prefix.iter().filter(|&&b| b == b'/').count(),
            });
        }
    }

    /// Compares one directory; subdirectories still to compare go to
    /// `pending`.
    fn dir(&mut self, dir: Dir, pending: &mut Vec<Dir>) -> Result<()> {
        let Dir {
            mut prefix,
            tree,
            range,
            depth,
        } = dir;
        if depth > MAX_TREE_DEPTH {
            bail!("{}", too_deep(&prefix));
        }
        // Entries that make HEAD's subtree: nothing changes below.
        if tree.is_some() && tree == self.trees.and_then(|t| t.id(&prefix)) {
            return Ok(());
        }
        // A node git writes as it is, whatever the entries below say.
        if let Some(node) = self
            .reused_over(range.start)
            .filter(|r| r.prefix == prefix && r.entries == range)
        {
            self.reused_tree(node, tree);
            return Ok(());
        }
        let data = match tree {
            Some(id) => {
                self.repo
                    .find_object(id)
                    .with_context(|| format!("cannot read tree {id} of HEAD"))?
                    .detach()
                    .data
            }
            None => Vec::new(),
        };
        let mut head = Vec::new();
        for entry in gix::objs::TreeRefIter::from_bytes(&data, self.repo.object_hash()) {
            let entry =
                entry.with_context(|| format!("malformed tree under {prefix:?} in HEAD"))?;
            head.push(HeadItem {
                name: entry.filename.as_bytes(),
                mode: entry.mode,
                id: entry.oid.to_owned(),
            });
        }
        head.sort_by(|a, b| key_cmp(a.name, a.mode.is_tree(), b.name, b.mode.is_tree()));
        let mut groups = self.groups(prefix.len(), range);
        groups.sort_by(|a, b| key_cmp(a.name, a.is_dir, b.name, b.is_dir));

        let (mut h, mut g) = (head.iter().peekable(), groups.iter().peekable());
        loop {
            let order = match (h.peek(), g.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(a), Some(b)) => key_cmp(a.name, a.mode.is_tree(), b.name, b.is_dir),
            };
            let len = prefix.len();
            match order {
                Ordering::Less => {
                    let item = h.next().expect("peeked");
                    prefix.extend_from_slice(item.name);
                    if item.mode.is_tree() {
                        // Deleted, recursively.
                        let mut path = prefix.clone();
                        path.push(b'/');
                        let empty = self.index.entries().len()..self.index.entries().len();
                        pending.push(Dir {
                            prefix: path,
                            tree: Some(item.id),
                            range: empty,
                            depth: depth + 1,
                        });
                    } else {
                        self.out.push(prefix.clone());
                    }
                }
                Ordering::Greater => {
                    let group = g.next().expect("peeked");
                    self.only_in_index(group.range.clone());
                }
                Ordering::Equal => {
                    let (item, group) = (h.next().expect("peeked"), g.next().expect("peeked"));
                    prefix.extend_from_slice(item.name);
                    if let Some(id) = group.sparse {
                        let mut path = prefix.clone();
                        path.push(b'/');
                        if item.id != id {
                            self.sparse.push(Pair {
                                prefix: path,
                                old: Some(item.id),
                                new: Some(id),
                                depth: depth + 1,
                            });
                        }
                    } else if group.is_dir {
                        let mut path = prefix.clone();
                        path.push(b'/');
                        pending.push(Dir {
                            prefix: path,
                            tree: Some(item.id),
                            range: group.range.clone(),
                            depth: depth + 1,
                        });
                    } else {
                        self.same_name(&prefix, item, group.range.clone())?;
                    }
                }
            }
            prefix.truncate(len);
        }
        Ok(())
    }

    /// Splits `range` (entries under a directory whose path is `skip` bytes
    /// long) into one group per name, in index order.
    fn groups(&self, skip: usize, range: Range<usize>) -> Vec<IndexGroup<'a>> {
        let entries = self.index.entries();
        let mut out = Vec::new();
        let mut i = range.start;
        while i < range.end {
            let path = self.path_of(i);
            let rest = &path[skip..];
            let mut sparse = None;
            let (name, is_dir, end) = match rest.find_byte(b'/') {
                Some(slash) => {
                    // Every entry under `<name>/` follows contiguously.
                    let under = &path[..skip + slash + 1];
                    let n = entries[i..range.end]
                        .partition_point(|e| e.path(self.index).starts_with(under));
                    // A sparse directory entry is alone in its group
                    // (`sparse_dir::check_entries`).
                    sparse = (n == 1 && entries[i].mode == Mode::DIR && path == under)
                        .then_some(entries[i].id);
                    (&rest[..slash], true, i + n)
                }
                None => {
                    // Unmerged paths have an entry per stage.
                    let mut end = i + 1;
                    while end < range.end && self.path_of(end) == path {
                        end += 1;
                    }
                    (rest, false, end)
                }
            };
            out.push(IndexGroup {
                name,
                is_dir,
                range: i..end,
                sparse,
            });
            i = end;
        }
        out
    }

    /// Index entries with no HEAD counterpart: added, except intent-to-add
    /// entries, which a commit leaves out; a sparse directory entry adds
    /// every path of its tree.
    fn only_in_index(&mut self, range: Range<usize>) {
        let mut last: Option<&[u8]> = None;
        let mut i = range.start;
        while i < range.end {
            // A new directory git writes from a reused node: HEAD has
            // nothing there.
            if let Some(node) = self.reused_over(i) {
                self.reused_tree(node, None);
                i = node.entries.end;
                continue;
            }
            let entry = &self.index.entries()[i];
            let path = self.path_of(i);
            i += 1;
            if entry.mode == Mode::DIR {
                self.sparse.push(Pair {
                    prefix: path.into(),
                    old: None,
                    new: Some(entry.id),
                    depth: path.iter().filter(|&&b| b == b'/').count(),
                });
                continue;
            }
            if entry.flags.contains(Flags::INTENT_TO_ADD) || last == Some(path) {
                continue;
            }
            last = Some(path);
            self.out.push(path.into());
        }
    }

    /// A HEAD entry and the index entries of the same name (not a directory
    /// on the index side).
    fn same_name(
        &mut self,
        path: &BString,
        item: &HeadItem<'_>,
        range: Range<usize>,
    ) -> Result<()> {
        let entry = &self.index.entries()[range.start];
        if entry.mode == Mode::DIR {
            bail!(
                "the index entry {path:?} is a directory without a trailing '/', which git never \
                 writes; rebuild the index (git read-tree HEAD)"
            );
        }
        let unmerged = range.len() > 1 || entry.stage() != Stage::Unconflicted;
        // An intent-to-add entry for a path HEAD has is dropped by the
        // commit: a deletion.
        let dropped = entry.flags.contains(Flags::INTENT_TO_ADD);
        // Compared by kind, as git does: `100664` in old trees is a plain
        // file.
        let kind = entry.mode.to_tree_entry_mode().map(|m| m.kind());
        let changed = kind != Some(item.mode.kind()) || entry.id != item.id;
        if unmerged || dropped || changed {
            self.out.push(path.clone());
        }
        Ok(())
    }
}
