//! git fsck's rules on the objects a run added, read from their raw bytes.
//!
//! `verify` decides on what gix reads; the harness then publishes with git.
//! Where the two could read one object differently (a tree mode one of them
//! normalises, two `tree` lines in a commit, a symlink target with a NUL,
//! which git's `symlink(2)` cuts short) the decision would be about
//! something other than what git checks out. So every commit in
//! `baseline..tip`, and every tree and special blob those commits introduce,
//! must be in the one canonical shape git writes and fsck accepts; anything
//! else is `object_invalid`, fail closed.
//!
//! The cost is proportional to what is new: from each commit's root tree we
//! descend only into subtrees whose id differs from the first parent's entry
//! at the same path, and each tree's entries are checked once (a visited
//! set). Blobs are looked at only when an entry is new: symlinks (their
//! target), `.gitmodules` and `.gitattributes` (their content), and every
//! other blob's header (it must exist and be a blob).
//!
//! Depth: git (>= 2.44) refuses trees nested deeper than `core.maxTreeDepth`
//! (2048 by default): `git rev-list --objects`, `read-tree` and checkout
//! fail on them, while gix reads on. Deeper trees in new history are
//! refused, and every walk here is iterative, so no depth can crash us.

mod commit;
mod dotfiles;
mod gitmodules;
mod tree;

/// git's `url_decode`, which the sealed workspace's remote paths need too.
pub(crate) use gitmodules::percent_decode;

use std::collections::{HashMap, HashSet};

use anyhow::Result;
use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};

use super::commits::{NewCommit, read_verified, tree_id_of};
pub use commit::Header;
use dotfiles::DotFile;
use tree::Kind;

/// git's default `core.maxTreeDepth` (git >= 2.44, outside Windows): a tree
/// at this depth (the root tree is at 0) is still read, a deeper one is not.
pub const MAX_TREE_DEPTH: usize = 2048;

/// git fsck's `gitattributesLineLength`: longer lines are refused.
const MAX_GITATTRIBUTES_LINE: usize = 2048;

/// git fsck's `gitattributesLarge`: larger `.gitattributes` are refused.
const MAX_GITATTRIBUTES_BYTES: usize = 100 * 1024 * 1024;

/// Most defects collected; the result is a rejection long before this.
const MAX_DEFECTS: usize = 1024;

/// Longest path shown in a message.
const SHOWN_PATH_BYTES: usize = 200;

/// One object in new history that breaks a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Defect {
    /// The new commit that introduced it.
    pub commit: ObjectId,
    /// The path of the tree entry concerned, if it is one.
    pub path: Option<BString>,
    /// What is wrong.
    pub message: String,
    /// Whether the commit's trees are too deep to diff at a bounded cost
    /// (every path of a 30,000-level tree is 60 KB long).
    pub too_deep: bool,
}

/// Checks `commits` (from [`super::new_history`]) and the trees and special
/// blobs they introduce. Unreadable or forged objects are errors; objects
/// that break a rule are defects.
pub fn check_new_objects(repo: &gix::Repository, commits: &[NewCommit]) -> Result<Vec<Defect>> {
    let mut walker = Walker {
        repo,
        hash: repo.object_hash(),
        walked: HashMap::new(),
        heights: HashMap::new(),
        checked_trees: HashSet::new(),
        checked_blobs: HashSet::new(),
        defects: Vec::new(),
    };
    // Oldest first: an object is reported at the commit that introduced it.
    for commit in commits.iter().rev() {
        if walker.defects.len() >= MAX_DEFECTS {
            break;
        }
        walker.commit(commit)?;
    }
    Ok(walker.defects)
}

/// A parent tree's entries: name to `(mode bytes, id)`.
type ParentEntries = HashMap<Vec<u8>, (Vec<u8>, ObjectId)>;

/// A new commit not in the shape git writes, met while walking the new
/// history (before its parents could be trusted).
#[derive(Debug)]
pub struct NonCanonicalCommit {
    /// The commit.
    pub id: ObjectId,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for NonCanonicalCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "commit {} is not in the shape git writes: {}",
            self.id, self.message
        )
    }
}

impl std::error::Error for NonCanonicalCommit {}

/// Checks a new commit's raw bytes before its parents are followed: the
/// strict header grammar, and gix reading the same tree and parents.
pub fn check_commit(
    id: ObjectId,
    data: &[u8],
    hash: gix::hash::Kind,
) -> Result<Header, NonCanonicalCommit> {
    let header = commit::parse(data, hash).map_err(|message| NonCanonicalCommit { id, message })?;
    let agrees = gix::objs::CommitRef::from_bytes(data, hash)
        .is_ok_and(|c| c.tree() == header.tree && c.parents().eq(header.parents.iter().copied()));
    if !agrees {
        return Err(NonCanonicalCommit {
            id,
            message: "it reads as another tree or other parents than its header says".into(),
        });
    }
    Ok(header)
}

/// A tree still to look at.
struct Frame {
    id: ObjectId,
    /// The first parent's tree at the same path, if it had one.
    parent: Option<ObjectId>,
    /// 0 for the root tree.
    depth: usize,
    /// The path, empty or ending in `/`.
    path: BString,
}

struct Walker<'r> {
    repo: &'r gix::Repository,
    hash: gix::hash::Kind,
    /// The deepest depth each tree is known to be fine at. A tree met again
    /// no deeper needs no second look; met deeper, its height decides.
    walked: HashMap<ObjectId, usize>,
    /// How many levels of trees each tree holds (0 for one without
    /// subtrees). A property of the tree alone, so computed once.
    heights: HashMap<ObjectId, usize>,
    /// Trees whose entries were checked.
    checked_trees: HashSet<ObjectId>,
    /// Blobs whose content or header was checked.
    checked_blobs: HashSet<ObjectId>,
    defects: Vec<Defect>,
}

/// A path for a message: quoted, cut after [`SHOWN_PATH_BYTES`].
fn shown(path: &[u8]) -> String {
    if path.is_empty() {
        return "at the root".to_owned();
    }
    if path.len() <= SHOWN_PATH_BYTES {
        return format!("{:?}", path.to_str_lossy());
    }
    let levels = path.iter().filter(|&&b| b == b'/').count();
    format!(
        "{:?}… ({} bytes, {levels} levels)",
        path[..SHOWN_PATH_BYTES].to_str_lossy(),
        path.len()
    )
}

impl Walker<'_> {
    fn defect(&mut self, commit: ObjectId, path: Option<&[u8]>, message: String) {
        if self.defects.len() < MAX_DEFECTS {
            self.defects.push(Defect {
                commit,
                path: path.map(BString::from),
                message,
                too_deep: false,
            });
        }
    }

    fn commit(&mut self, new: &NewCommit) -> Result<()> {
        let id = new.id;
        let mut buf = Vec::new();
        let data = match read_verified(self.repo, id, &mut buf) {
            Ok(data) => data,
            Err(e) => {
                self.defect(id, None, format!("commit {id} cannot be read: {e:#}"));
                return Ok(());
            }
        };
        if data.kind != gix::objs::Kind::Commit {
            self.defect(
                id,
                None,
                format!("object {id} is a {}, not a commit", data.kind),
            );
            return Ok(());
        }
        let header = match check_commit(id, data.data, self.hash) {
            Ok(header) => header,
            Err(e) => {
                self.defect(id, None, e.to_string());
                return Ok(());
            }
        };
        if header.parents != new.parents {
            let what = format!("commit {id} has other parents than the history walk read");
            self.defect(id, None, what);
            return Ok(());
        }
        let parent_tree = match header.parents.first() {
            Some(parent) => match tree_id_of(self.repo, Some(*parent)) {
                Ok(tree) => Some(tree),
                Err(e) => {
                    let what = format!("the parent of commit {id} cannot be read: {e:#}");
                    self.defect(id, None, what);
                    return Ok(());
                }
            },
            None => None,
        };
        self.trees(id, header.tree, parent_tree)
    }

    /// Reads a tree's raw bytes (hash-verified); `None` after reporting a
    /// non-tree.
    fn read_tree(&mut self, commit: ObjectId, frame: &Frame) -> Result<Option<Vec<u8>>> {
        let mut buf = Vec::new();
        let data = match read_verified(self.repo, frame.id, &mut buf) {
            Ok(data) => data,
            Err(e) => {
                let what = format!("the tree {} cannot be read: {e:#}", shown(&frame.path));
                self.defect(commit, Some(&frame.path), what);
                return Ok(None);
            }
        };
        if data.kind != gix::objs::Kind::Tree {
            let what = format!(
                "the tree entry {} points to {}, a {}, not a tree",
                shown(&frame.path),
                frame.id,
                data.kind
            );
            self.defect(commit, Some(&frame.path), what);
            return Ok(None);
        }
        Ok(Some(buf))
    }

    /// The parent's entries by name, `(mode, id)`; empty when there is none
    /// or it cannot be split (then nothing is skipped as unchanged).
    fn parent_entries(&self, parent: Option<ObjectId>) -> Result<ParentEntries> {
        let Some(parent) = parent else {
            return Ok(HashMap::new());
        };
        let mut buf = Vec::new();
        // Only an optimisation: a parent that cannot be read skips nothing.
        let Ok(data) = read_verified(self.repo, parent, &mut buf) else {
            return Ok(HashMap::new());
        };
        if data.kind != gix::objs::Kind::Tree {
            return Ok(HashMap::new());
        }
        Ok(tree::parse(data.data, self.hash)
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|e| (e.name.to_vec(), (e.mode.to_vec(), e.id)))
                    .collect()
            })
            .unwrap_or_default())
    }

    fn trees(&mut self, commit: ObjectId, root: ObjectId, parent: Option<ObjectId>) -> Result<()> {
        let mut stack = vec![Frame {
            id: root,
            parent,
            depth: 0,
            path: BString::default(),
        }];
        while let Some(frame) = stack.pop() {
            if Some(frame.id) == frame.parent {
                continue;
            }
            match self.walked.get(&frame.id) {
                Some(&d) if d >= frame.depth => continue,
                // Its entries were checked where it was met first; only the
                // depth differs here, and its height settles that without
                // walking it again.
                Some(_) => {
                    let fits = self.fits(frame.id, MAX_TREE_DEPTH - frame.depth);
                    if !fits {
                        self.too_deep(commit, &frame.path);
                        return Ok(());
                    }
                    self.walked.insert(frame.id, frame.depth);
                    continue;
                }
                None => {}
            }
            self.walked.insert(frame.id, frame.depth);
            let Some(data) = self.read_tree(commit, &frame)? else {
                continue;
            };
            let entries = match tree::parse(&data, self.hash) {
                Ok(entries) => entries,
                Err(e) => {
                    let what = format!(
                        "the tree {} ({}) is malformed: {e}",
                        shown(&frame.path),
                        frame.id
                    );
                    self.defect(commit, Some(&frame.path), what);
                    continue;
                }
            };
            let first_look = self.checked_trees.insert(frame.id);
            if first_look {
                for (name, problem) in tree::problems(&entries) {
                    let path = [frame.path.as_slice(), &name].concat();
                    self.defect(
                        commit,
                        Some(&path),
                        format!("the tree entry {} {problem}", shown(&path)),
                    );
                }
            }
            let before = self.parent_entries(frame.parent)?;
            for entry in &entries {
                let path: BString = [frame.path.as_slice(), entry.name].concat().into();
                let old = before.get(entry.name);
                if entry.kind() == Some(Kind::Tree) {
                    if frame.depth + 1 > MAX_TREE_DEPTH {
                        self.too_deep(commit, &path);
                        // One report per commit; the rest is as deep.
                        return Ok(());
                    }
                    let mut child = path;
                    child.push(b'/');
                    stack.push(Frame {
                        id: entry.id,
                        parent: old.filter(|(mode, _)| mode == b"40000").map(|(_, id)| *id),
                        depth: frame.depth + 1,
                        path: child,
                    });
                    continue;
                }
                let unchanged = old.is_some_and(|(mode, id)| mode == entry.mode && *id == entry.id);
                if first_look && !unchanged {
                    self.blob(commit, &path, entry)?;
                }
            }
        }
        Ok(())
    }

    fn too_deep(&mut self, commit: ObjectId, path: &[u8]) {
        let what = format!(
            "the tree {} reaches more than {MAX_TREE_DEPTH} levels deep, past git's \
             core.maxTreeDepth: git cannot read or check it out",
            shown(path)
        );
        self.defect(commit, Some(path), what);
        if let Some(last) = self.defects.last_mut() {
            last.too_deep = true;
        }
    }

    /// Whether the tree `root` holds at most `room` levels of subtrees.
    /// Computes heights bottom-up with an explicit stack, memoised by id, and
    /// stops as soon as a path goes deeper than `room` (a tree that cannot be
    /// read counts as not fitting: fail closed).
    fn fits(&mut self, root: ObjectId, room: usize) -> bool {
        // (tree, its depth below root, its subtrees once listed)
        let mut stack: Vec<(ObjectId, usize, Option<Vec<ObjectId>>)> = vec![(root, 0, None)];
        while let Some((id, depth, children)) = stack.pop() {
            if let Some(children) = children {
                let height = children
                    .iter()
                    .map(|c| self.heights.get(c).map_or(room + 1, |h| h + 1))
                    .max()
                    .unwrap_or(0);
                self.heights.insert(id, height);
                continue;
            }
            match self.heights.get(&id) {
                Some(&h) if depth + h > room => return false,
                Some(_) => continue,
                None if depth > room => return false,
                None => {}
            }
            let mut buf = Vec::new();
            let Ok(data) = read_verified(self.repo, id, &mut buf) else {
                return false;
            };
            let Ok(entries) = tree::parse(data.data, self.hash) else {
                return false;
            };
            let subtrees: Vec<ObjectId> = entries
                .iter()
                .filter(|e| e.kind() == Some(Kind::Tree))
                .map(|e| e.id)
                .collect();
            let pending: Vec<ObjectId> = subtrees
                .iter()
                .filter(|c| !self.heights.contains_key(*c))
                .copied()
                .collect();
            stack.push((id, depth, Some(subtrees)));
            stack.extend(pending.into_iter().map(|c| (c, depth + 1, None)));
        }
        self.heights.get(&root).is_some_and(|&h| h <= room)
    }

    /// The checks on a new non-tree entry's object.
    fn blob(&mut self, commit: ObjectId, path: &[u8], entry: &tree::RawEntry<'_>) -> Result<()> {
        let kind = entry.kind();
        let special = DotFile::of(entry.name);
        let reads_content = kind == Some(Kind::Symlink)
            || matches!(special, Some(DotFile::Gitmodules | DotFile::Gitattributes));
        match kind {
            Some(Kind::Blob | Kind::Executable | Kind::Symlink) => {}
            // A gitlink names a commit of another repository; a bad mode was
            // reported with the tree.
            Some(Kind::Gitlink | Kind::Tree) | None => return Ok(()),
        }
        // A blob's content rules depend on the name it has (a symlink, a
        // .gitmodules): key the memo on both.
        if !reads_content {
            if !self.checked_blobs.insert(entry.id) {
                return Ok(());
            }
            let problem = match self.repo.try_find_header(entry.id) {
                Ok(Some(header)) if header.kind() == gix::objs::Kind::Blob => return Ok(()),
                Ok(Some(header)) => {
                    format!("points to {}, a {}, not a blob", entry.id, header.kind())
                }
                Ok(None) => format!("points to {}, which is missing", entry.id),
                Err(e) => format!("({}) cannot be read: {e}", entry.id),
            };
            self.defect(
                commit,
                Some(path),
                format!("the file {} {problem}", shown(path)),
            );
            return Ok(());
        }
        let mut buf = Vec::new();
        let data = match self.repo.has_object(entry.id) {
            true => match read_verified(self.repo, entry.id, &mut buf) {
                Ok(data) => data,
                Err(e) => {
                    let what = format!("the entry {} cannot be read: {e:#}", shown(path));
                    self.defect(commit, Some(path), what);
                    return Ok(());
                }
            },
            false => {
                self.defect(
                    commit,
                    Some(path),
                    format!(
                        "the entry {} points to {}, which is missing",
                        shown(path),
                        entry.id
                    ),
                );
                return Ok(());
            }
        };
        if data.kind != gix::objs::Kind::Blob {
            let what = format!(
                "the entry {} points to {}, a {}, not a blob",
                shown(path),
                entry.id,
                data.kind
            );
            self.defect(commit, Some(path), what);
            return Ok(());
        }
        let content = data.data;
        let mut problems = Vec::new();
        if kind == Some(Kind::Symlink) && content.contains(&0) {
            let cut = content.split(|&b| b == 0).next().unwrap_or_default();
            problems.push(format!(
                "is a symlink whose target contains a NUL byte: git would check out a link to \
                 {:?}, not {:?}",
                cut.to_str_lossy(),
                content.to_str_lossy()
            ));
        }
        match special {
            Some(DotFile::Gitmodules) if kind != Some(Kind::Symlink) => {
                problems.extend(gitmodules::problems(content));
            }
            Some(DotFile::Gitattributes) if kind != Some(Kind::Symlink) => {
                if content.len() > MAX_GITATTRIBUTES_BYTES {
                    problems.push(format!("is larger than {MAX_GITATTRIBUTES_BYTES} bytes"));
                }
                if content
                    .split(|&b| b == b'\n')
                    .any(|l| l.len() > MAX_GITATTRIBUTES_LINE)
                {
                    problems.push(format!(
                        "has a line longer than {MAX_GITATTRIBUTES_LINE} bytes, which git ignores"
                    ));
                }
            }
            _ => {}
        }
        for problem in problems {
            self.defect(commit, Some(path), format!("{} {problem}", shown(path)));
        }
        Ok(())
    }
}
