//! Which worktree entries the reset changes or removes, decided before it
//! starts: those are the entries preserved, and exactly those are removed.
//!
//! Its own module because this is where "nothing lost" is decided. Tracked
//! paths (in the baseline or in the index) are compared with the baseline
//! on their raw bytes, never through git's conversion, so a file that only
//! differs in its line endings or in what a clean filter would store is
//! kept; so is one whose index entry the reset changes (git then writes it
//! anew) or that a checkout may convert (its bytes being the blob's does
//! not make them the checkout's). The property test in
//! `tests/restore_props.rs` found the last two. Untracked entries are listed by git (under the agent's ignore
//! rules, ignored ones too) and kept unless the *baseline's* ignore rules
//! ignore them: those rules are read from the baseline tree's `.gitignore`
//! blobs, `info/exclude` and the global excludes file as recorded at arm
//! (what `verify` applies), so neither a `.gitignore`
//! the agent edited nor one it created hides a file from preservation.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, bail};
use gix::bstr::{BStr, BString, ByteSlice};

use super::Repo;
use super::files;
use super::git::{git, records, run_git};

/// The entries to preserve.
pub(super) struct Selection {
    /// Entries to copy raw and remove (a directory stands for everything
    /// in it), sorted, none inside another.
    pub copy: Vec<BString>,
    /// Baseline paths the agent deleted (the rebuild removes them too).
    pub deleted: Vec<BString>,
    /// Checked-out submodules of the baseline: path and gitlink commit.
    pub submodules: Vec<(BString, String)>,
}

/// A tree or index entry: mode and object id.
type Entry = (u32, String);

pub(super) fn select(repo: &Repo, sha256: bool, scratch: &std::path::Path) -> Result<Selection> {
    let work_dir = &repo.work_dir;
    let baseline: BTreeMap<BString, Entry> = match &repo.baseline {
        Some(base) => {
            let out = run_git(
                &mut git(work_dir),
                &["ls-tree", "-r", "-z", "--full-tree", base.as_str()],
            )?;
            records(&out)
                .map(|r| {
                    // <mode> SP <type> SP <oid> TAB <path>
                    let (meta, path) = r.split_once_str(b"\t").context("bad ls-tree line")?;
                    let fields: Vec<&[u8]> = meta.split(|&b| b == b' ').collect();
                    let [mode, _, oid] = fields[..] else {
                        bail!("bad ls-tree line");
                    };
                    Ok((
                        BString::from(path),
                        (octal(mode)?, oid.to_str_lossy().into_owned()),
                    ))
                })
                .collect::<Result<_>>()?
        }
        None => BTreeMap::new(),
    };
    // Every index entry, per path (more than one when unmerged): mode,
    // object id, stage.
    let mut index: BTreeMap<BString, Vec<(u32, String, u8)>> = BTreeMap::new();
    {
        let out = run_git(&mut git(work_dir), &["ls-files", "-z", "-s"])?;
        for r in records(&out) {
            // <mode> SP <oid> SP <stage> TAB <path>
            let (meta, path) = r.split_once_str(b"\t").context("bad ls-files line")?;
            let fields: Vec<&[u8]> = meta.split(|&b| b == b' ').collect();
            let [mode, oid, stage] = fields[..] else {
                bail!("bad ls-files line");
            };
            index.entry(BString::from(path)).or_default().push((
                octal(mode)?,
                oid.to_str_lossy().into_owned(),
                stage.to_str()?.parse().context("bad stage")?,
            ));
        }
    }
    let index_paths: BTreeSet<BString> = index.keys().cloned().collect();
    let untracked = {
        let mut out = run_git(
            &mut git(work_dir),
            &["ls-files", "-z", "-o", "--exclude-standard", "--directory"],
        )?;
        out.push(0);
        out.extend(run_git(
            &mut git(work_dir),
            &[
                "ls-files",
                "-z",
                "-o",
                "-i",
                "--exclude-standard",
                "--directory",
            ],
        )?);
        records(&out)
            .map(|r| BString::from(r.strip_suffix(b"/").unwrap_or(r)))
            .collect::<BTreeSet<_>>()
    };

    let mut copy = BTreeSet::new();
    let mut deleted = BTreeSet::new();
    let mut submodules = Vec::new();

    let baseline_dirs: BTreeSet<&[u8]> = baseline
        .keys()
        .flat_map(|p| {
            p.iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'/')
                .map(move |(i, _)| &p[..i])
        })
        .collect();

    // Untracked entries the baseline's rules do not ignore, and ignored
    // ones the reset replaces: a file or symlink where the baseline has a
    // directory (`build` ignored, `build/keep.txt` tracked).
    let ignored = baseline_ignores(repo, scratch)?;
    let mut stack = ignored.stack()?;
    for rel in &untracked {
        if baseline.contains_key(rel) || index_paths.contains(rel) {
            continue;
        }
        let Some(meta) = files::lstat_beneath(work_dir, rel) else {
            continue;
        };
        let is_dir = meta.file_type().is_dir();
        let replaced = !is_dir && baseline_dirs.contains(rel.as_slice());
        if replaced || !stack.ignores(rel.as_bstr(), is_dir)? {
            copy.insert(rel.clone());
        }
    }

    // Repositories the agent made inside the checkout (a `.git` that is not
    // a baseline submodule's): git lists none, yet git run there uses their
    // config. Kept, and removed by the reset.
    let scan = crate::repo::special_files::scan(work_dir).map_err(|e| anyhow::anyhow!(e))?;
    let gitlink_dirs: Vec<&BString> = baseline
        .iter()
        .filter(|(_, (mode, _))| *mode == 0o160000)
        .map(|(path, _)| path)
        .collect();
    for dotgit in scan.nested_git {
        let parent = dotgit
            .parent()
            .map(|p| p.as_os_str().as_encoded_bytes().to_vec())
            .unwrap_or_default();
        // A baseline submodule's `.git`, or anything inside its checkout
        // (preserved as that submodule's own).
        let in_submodule = gitlink_dirs.iter().any(|link| {
            parent.starts_with(link.as_slice())
                && (parent.len() == link.len() || parent[link.len()] == b'/')
        });
        if !in_submodule {
            copy.insert(BString::from(dotgit.as_os_str().as_encoded_bytes()));
        }
    }

    // Tracked paths whose raw entry differs from the baseline's.
    let tracked: BTreeSet<&BString> = baseline.keys().chain(index_paths.iter()).collect();
    let mut same_as_blob = Vec::new();
    for rel in tracked {
        let base = baseline.get(rel);
        let Some(meta) = files::lstat_beneath(work_dir, rel) else {
            if base.is_some() {
                // The highest missing ancestor: a directory the agent
                // removed whole is removed whole by the rebuild too.
                deleted.insert(highest_missing(work_dir, rel));
            } else if let Some(dir) = first_new_directory(work_dir, rel, &baseline_dirs) {
                // Only in the index, gone from the worktree: when the reset
                // drops the entry, git also removes the directories left
                // empty, which the baseline does not have. Keep them.
                copy.insert(dir);
            }
            continue;
        };
        let path = files::join(work_dir, rel);
        if let Some((0o160000, commit)) = base
            && meta.file_type().is_dir()
        {
            // A submodule of the baseline: preserved and reset on its own
            // when checked out; an empty directory is its unpopulated form.
            if checked_out_at_arm(repo, &path)? {
                submodules.push((rel.clone(), commit.clone()));
            } else {
                // Not checked out at arm: whatever is in it now is the
                // agent's, kept and removed like untracked content; git
                // never runs there (its `.git`, if any, is the agent's).
                for child in std::fs::read_dir(&path)
                    .with_context(|| format!("cannot list {}", path.display()))?
                {
                    let name = child?.file_name();
                    let mut child_rel = rel.clone();
                    child_rel.push(b'/');
                    child_rel.extend_from_slice(name.as_encoded_bytes());
                    copy.insert(child_rel);
                }
            }
            continue;
        }
        let Some(mode) = files::git_mode(&meta) else {
            bail!(
                "{} is neither a file, a symlink nor a directory, so it cannot be preserved",
                path.display()
            );
        };
        if mode == 0o40000 {
            copy.insert(rel.clone());
            continue;
        }
        // Kept unless the reset provably leaves these bytes alone: the
        // index entry is the baseline's, so git rewrites the file only if
        // its content differs, and the raw bytes are the baseline blob's.
        // (An index entry the reset changes makes git write the file anew,
        // through `eol`, `text` and smudge: the agent's bytes, even when
        // they are the blob's, would not survive that.)
        let index_is_baseline = match (index.get(rel).map(Vec::as_slice), base) {
            (Some([(m, oid, 0)]), Some((bm, boid))) => m == bm && oid == boid,
            _ => false,
        };
        let id = files::raw_blob_id(&path, &meta, sha256)?;
        if !index_is_baseline || base != Some(&(mode, id)) {
            copy.insert(rel.clone());
        } else {
            same_as_blob.push(rel.clone());
        }
    }
    // The blob's own bytes are what a checkout writes only when no
    // conversion applies: a file that may be converted on checkout (eol,
    // a filter, ident, an encoding) is kept too, so that a rebuild in a
    // fresh clone gets the agent's bytes, not the checkout's.
    for rel in may_convert_on_checkout(work_dir, repo.baseline.as_deref(), &same_as_blob)? {
        copy.insert(rel);
    }

    // No entry inside another one that is copied whole.
    let mut outer: Vec<BString> = Vec::new();
    for rel in copy {
        let inside = outer
            .iter()
            .any(|o| rel.len() > o.len() && rel.starts_with(o.as_slice()) && rel[o.len()] == b'/');
        if !inside {
            outer.push(rel);
        }
    }
    Ok(Selection {
        copy: outer,
        deleted: deleted.into_iter().collect(),
        submodules,
    })
}

/// Whether the submodule at `dir` was checked out at arm, and is still
/// exactly as then: its `.git` entry and every protected entry of the git
/// dir it names equal what `arm` recorded. Only then does restore run git
/// there. Not checked out at arm: `false` (its content is the agent's).
/// Checked out then but changed since (another gitfile, a git dir made to
/// look like a module, a changed config: a repository whose filters or
/// `core.worktree` the agent chose): an error, so nothing is reset.
fn checked_out_at_arm(repo: &Repo, dir: &std::path::Path) -> Result<bool> {
    let (location, arm) = &*repo.arm;
    let dot_git = dir.join(".git");
    let key = crate::repo::submodule_meta::key_of(location, &dot_git);
    let Some(recorded) = arm.get(&key) else {
        return Ok(false);
    };
    let refuse = |why: String| {
        anyhow::anyhow!(
            "the submodule at {} {why} since arm; restore runs git only in submodules that are \
             as arm found them, so nothing was reset: inspect it and restore by hand",
            dir.display()
        )
    };
    let Some(now) = crate::repo::submodule_meta::checkout_entries(location, &dot_git)? else {
        return Err(refuse("lost its .git".into()));
    };
    if now.get(&key) != Some(recorded) {
        return Err(refuse("has another .git".into()));
    }
    for (entry, digest) in &now {
        if arm.get(entry) != Some(digest) {
            return Err(refuse(format!("changed {entry}")));
        }
    }
    Ok(true)
}

/// Attributes that change a blob's bytes on checkout.
const CONVERSIONS: &[&str] = &[
    "text",
    "eol",
    "crlf",
    "filter",
    "ident",
    "working-tree-encoding",
];

/// The paths among `paths` whose checkout may differ from their blob's
/// bytes, by the baseline's attributes (git's own answer, `check-attr`; no
/// filter runs) and the repository's `core.autocrlf` and `core.eol`.
fn may_convert_on_checkout(
    work_dir: &std::path::Path,
    baseline: Option<&str>,
    paths: &[BString],
) -> Result<Vec<BString>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let config = |key: &str| {
        git(work_dir)
            .args(["config", "--get", key])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default()
    };
    let crlf_everywhere = config("core.autocrlf") == "true" || config("core.eol") == "crlf";
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p);
        input.push(0);
    }
    let mut cmd = git(work_dir);
    cmd.arg("check-attr");
    // The baseline's `.gitattributes`, as a checkout of it reads them, not
    // the agent's edits.
    if let Some(base) = baseline {
        cmd.arg(format!("--source={base}"));
    }
    cmd.args(["-z", "--stdin"]).args(CONVERSIONS);
    let out = super::git::run_git_with_input(&mut cmd, &input)?;
    let fields: Vec<&[u8]> = out.split(|&b| b == 0).collect();
    let mut converted = BTreeSet::new();
    for triple in fields.chunks_exact(3) {
        let [path, attr, value] = triple else {
            continue;
        };
        let unset = matches!(*value, b"unspecified" | b"unset");
        let converts = match *attr {
            b"text" => !unset && crlf_everywhere,
            b"crlf" => *value == b"set",
            _ => !unset,
        };
        if converts {
            converted.insert(BString::from(*path));
        }
    }
    Ok(converted.into_iter().collect())
}

/// The shortest directory prefix of `rel` that the baseline does not have,
/// when it exists as a real directory beneath `root`.
fn first_new_directory(
    root: &std::path::Path,
    rel: &BString,
    baseline_dirs: &BTreeSet<&[u8]>,
) -> Option<BString> {
    let mut end = 0;
    while let Some(pos) = rel[end..].find_byte(b'/') {
        let prefix = &rel[..end + pos];
        if !baseline_dirs.contains(prefix) {
            return files::lstat_beneath(root, prefix)
                .filter(|m| m.file_type().is_dir())
                .map(|_| BString::from(prefix));
        }
        end += pos + 1;
    }
    None
}

/// The shortest prefix of `rel` (a whole path component) that is missing
/// beneath `root`.
fn highest_missing(root: &std::path::Path, rel: &BString) -> BString {
    let mut end = 0;
    while let Some(pos) = rel[end..].find_byte(b'/') {
        let prefix = &rel[..end + pos];
        if files::lstat_beneath(root, prefix).is_none_or(|m| !m.file_type().is_dir()) {
            return BString::from(prefix);
        }
        end += pos + 1;
    }
    rel.clone()
}

fn octal(text: &[u8]) -> Result<u32> {
    u32::from_str_radix(text.to_str()?, 8).context("bad mode")
}

/// The baseline's ignore rules, as the checking code reads them.
struct BaselineIgnores {
    repo: gix::Repository,
    index: gix::index::State,
    _applied: Option<crate::repo::clean_settings::Applied>,
}

fn baseline_ignores(repo: &Repo, scratch: &std::path::Path) -> Result<BaselineIgnores> {
    let mut opened = if repo.depth == 0 {
        crate::repo::open(&repo.work_dir)?
    } else {
        crate::repo::open_submodule(&repo.work_dir)?
    };
    // The global excludes file as recorded at arm, as verify reads it.
    let applied = match &repo.clean_settings {
        Some(settings) => Some(crate::repo::clean_settings::apply(
            &mut opened,
            settings,
            scratch,
        )?),
        None => None,
    };
    let index = match &repo.baseline {
        Some(base) => {
            let id = crate::repo::parse_id(base)?;
            let tree = opened
                .find_commit(id)
                .context("cannot read the baseline commit")?
                .tree_id()
                .context("cannot read the baseline tree")?;
            opened
                .index_from_tree(&tree)
                .context("cannot read the baseline tree")?
                .into()
        }
        None => gix::index::State::new(opened.object_hash()),
    };
    Ok(BaselineIgnores {
        repo: opened,
        index,
        _applied: applied,
    })
}

impl BaselineIgnores {
    fn stack(&self) -> Result<IgnoreStack<'_>> {
        let stack = self
            .repo
            .excludes(
                &self.index,
                None,
                gix::worktree::stack::state::ignore::Source::IdMapping,
            )
            .context("cannot read the baseline's ignore rules")?;
        Ok(IgnoreStack { stack })
    }
}

struct IgnoreStack<'a> {
    stack: gix::AttributeStack<'a>,
}

impl IgnoreStack<'_> {
    /// Whether the baseline's rules ignore `rel` or one of its parent
    /// directories (git does not look inside an ignored directory).
    fn ignores(&mut self, rel: &BStr, is_dir: bool) -> Result<bool> {
        let mut end = 0;
        while let Some(pos) = rel[end..].find_byte(b'/') {
            let parent = &rel[..end + pos];
            if self.excluded(parent.as_bstr(), true)? {
                return Ok(true);
            }
            end += pos + 1;
        }
        self.excluded(rel, is_dir)
    }

    fn excluded(&mut self, rel: &BStr, is_dir: bool) -> Result<bool> {
        let mode = if is_dir {
            gix::index::entry::Mode::DIR
        } else {
            gix::index::entry::Mode::FILE
        };
        Ok(self
            .stack
            .at_entry(rel, Some(mode))
            .context("cannot evaluate the baseline's ignore rules")?
            .is_excluded())
    }
}
