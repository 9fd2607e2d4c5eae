//! git-lfs's clean filter, computed in process, for the worktree status.
//!
//! Why: git stores a `filter=lfs` file as what `git-lfs clean` makes of it, a
//! small pointer naming the content's SHA-256. When the index's stat data
//! cannot vouch for a worktree file (it is racy: written in the same clock
//! tick as the index, which is the rule right after `git commit`; or its stat
//! changed), git compares content, through the clean filter. grantguard
//! never runs a filter (every `filter.*` driver is dropped, see
//! [`super::open`]), so gix hashed the raw file and every LFS file changed by
//! a commit looked unstaged. The clean filter's output is specified
//! (git-lfs `docs/spec.md`, `lfs/pointer.go`, `lfs/gitfilter_clean.go`) and
//! needs nothing but SHA-256, so it is computed here instead; git-lfs and any
//! configured program are never run. Other filter drivers keep the
//! fail-closed rule: their file counts as modified.
//!
//! What `git-lfs clean` (3.x) writes for a worktree file:
//! - empty: nothing (the empty blob);
//! - shorter than 1024 bytes and already a pointer: the bytes unchanged;
//! - anything else: `version https://git-lfs.github.com/spec/v1\noid
//!   sha256:<hex>\nsize <bytes>\n`.
//!
//! "Already a pointer" is a lenient parser whose details vary between git-lfs
//! versions (other version URLs, `ext-` lines, CRLF, surrounding blanks). We
//! recognise only the exact form git-lfs writes. Any other small file that
//! names `git-lfs`, `hawser` or `git-media` (the strings git-lfs's parser
//! requires) is ambiguous: if either reading would make it clean, it is
//! reported as not clean with its own message (fail closed); if neither
//! would, it is plainly unstaged. With `lfs.extension.*` configured the clean
//! output depends on the extension programs, so an LFS file whose content
//! must be compared is never clean.
//!
//! The clean output then goes through the rest of git's conversion to git
//! (`working-tree-encoding`, end of line, `ident`: gix's filter pipeline,
//! which has no driver left to run), exactly as git applies them after a
//! filter driver, and is hashed as a blob.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use gix::bstr::{BStr, ByteSlice};
use sha2::{Digest, Sha256};

/// git-lfs's `BlobSizeCutoff`: content this long or longer is never taken
/// for a pointer.
const POINTER_CUTOFF: usize = 1024;

/// The version line git-lfs writes.
const VERSION_LINE: &[u8] = b"version https://git-lfs.github.com/spec/v1\n";

/// How a file is described (after "<path> is") when git-lfs would take it
/// for a pointer in some versions and not in others, and one of the two
/// readings makes it unchanged.
const AMBIGUOUS: &str = "a git-lfs pointer in a form grantguard does not read (only \
     the exact form git-lfs writes), so it cannot be shown to be unchanged; replace it with the \
     pointer `git lfs pointer --file` prints or with the file's content";

/// How an LFS file is described when git-lfs extensions decide its stored
/// form.
const EXTENSIONS: &str = "an LFS file whose stored form depends on git-lfs extensions \
     (lfs.extension.* in the repository's config), which grantguard does not run, so it cannot \
     be shown to be unchanged";

/// What git-lfs's clean filter makes of a worktree file.
enum Cleaned {
    /// This exact output.
    Exact(Vec<u8>),
    /// The raw bytes if git-lfs takes them for a pointer, else the pointer.
    Ambiguous { raw: Vec<u8>, pointer: Vec<u8> },
}

/// The pointer git-lfs writes for content with this SHA-256 and size.
fn pointer(sha256: &[u8], size: u64) -> Vec<u8> {
    format!(
        "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {size}\n",
        crate::digest::hex(sha256)
    )
    .into_bytes()
}

/// Whether `data` is exactly a pointer as git-lfs writes it (without
/// extensions): every git-lfs version passes these bytes through unchanged.
fn is_canonical_pointer(data: &[u8]) -> bool {
    let Some(rest) = data.strip_prefix(VERSION_LINE) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix(b"oid sha256:") else {
        return false;
    };
    if rest.len() < 65
        || !rest[..64]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
        || rest[64] != b'\n'
    {
        return false;
    }
    let Some(size) = rest[65..].strip_prefix(b"size ") else {
        return false;
    };
    let Some(digits) = size.strip_suffix(b"\n") else {
        return false;
    };
    // git-lfs parses the size as a signed 64-bit integer.
    !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && std::str::from_utf8(digits)
            .ok()
            .and_then(|d| d.parse::<i64>().ok())
            .is_some()
}

/// Whether git-lfs's pointer parser could accept `data` (it requires one of
/// these strings before anything else).
fn could_be_pointer(data: &[u8]) -> bool {
    [&b"git-lfs"[..], b"hawser", b"git-media"]
        .iter()
        .any(|needle| data.find(needle).is_some())
}

/// Reads `file` through git-lfs's clean filter.
fn clean(mut file: impl Read) -> std::io::Result<Cleaned> {
    let mut head = Vec::with_capacity(POINTER_CUTOFF);
    (&mut file)
        .take(POINTER_CUTOFF as u64)
        .read_to_end(&mut head)?;
    if head.len() < POINTER_CUTOFF {
        if head.is_empty() || is_canonical_pointer(&head) {
            return Ok(Cleaned::Exact(head));
        }
        let pointer = pointer(&Sha256::digest(&head), head.len() as u64);
        return Ok(if could_be_pointer(&head) {
            Cleaned::Ambiguous { raw: head, pointer }
        } else {
            Cleaned::Exact(pointer)
        });
    }
    let mut hasher = Sha256::new();
    hasher.update(&head);
    let mut size = head.len() as u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok(Cleaned::Exact(pointer(&hasher.finalize(), size)))
}

/// Re-judges the worktree files of `filter=lfs` paths whose content gix had
/// to compare without the filter. Built on first use: most statuses compare
/// no content at all.
pub(super) struct LfsCheck<'repo> {
    attributes: gix::AttributeStack<'repo>,
    selection: gix::attrs::search::Outcome,
    repo: &'repo gix::Repository,
    /// Built when the first LFS path needs it.
    pipeline: Option<gix::filter::Pipeline<'repo>>,
    index: gix::worktree::Index,
    work_dir: PathBuf,
    extensions: bool,
}

impl<'repo> LfsCheck<'repo> {
    /// Reads attributes as gix's status does (the worktree's
    /// `.gitattributes`, then the index's, and `info/attributes`).
    pub(super) fn new(repo: &'repo gix::Repository, index: gix::worktree::Index) -> Result<Self> {
        use gix::worktree::stack::state::attributes::Source;
        let attributes = repo
            .attributes_only(&index, Source::WorktreeThenIdMapping)
            .context("cannot read the attributes")?;
        let selection = attributes.selected_attribute_matches(["filter"]);
        let work_dir = repo
            .workdir()
            .context("the repository has no worktree")?
            .canonicalize()
            .context("cannot resolve the worktree")?;
        let extensions = repo
            .config_snapshot()
            .plumbing()
            .sections_by_name("lfs")
            .into_iter()
            .flatten()
            .any(|section| {
                section
                    .header()
                    .subsection_name()
                    .is_some_and(|name| name.starts_with_str("extension."))
            });
        Ok(LfsCheck {
            attributes,
            selection,
            repo,
            pipeline: None,
            index,
            work_dir,
            extensions,
        })
    }

    /// Whether the attributes give `rela_path` the `lfs` filter.
    pub(super) fn is_lfs(
        &mut self,
        rela_path: &BStr,
        mode: gix::index::entry::Mode,
    ) -> Result<bool> {
        let platform = self
            .attributes
            .at_entry(rela_path, Some(mode))
            .with_context(|| format!("cannot read the attributes of {rela_path:?}"))?;
        self.selection.reset();
        platform.matching_attributes(&mut self.selection);
        Ok(self.selection.iter_selected().any(|m| {
            m.assignment.name.as_str() == "filter"
                && matches!(m.assignment.state, gix::attrs::StateRef::Value(v) if v.as_bstr() == "lfs")
        }))
    }

    /// Whether the worktree file of `entry`, an LFS path gix compared by
    /// content, is what git would call unmodified. `None`: it is; otherwise
    /// how to describe it.
    pub(super) fn dirt(
        &mut self,
        rela_path: &BStr,
        entry: &gix::index::Entry,
    ) -> Result<Option<&'static str>> {
        if self.extensions {
            return Ok(Some(EXTENSIONS));
        }
        let rela = gix::path::from_bstr(rela_path)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("{rela_path:?} is not a path here"))?;
        let Some(file) = open_in(&self.work_dir, &rela)? else {
            return Ok(Some("unstaged"));
        };
        let len = file
            .metadata()
            .with_context(|| format!("cannot read {rela_path:?}"))?
            .len();
        // git and gix compare content only when the size recorded in the
        // index matches (or was zeroed to mark a racy entry).
        if len != u64::from(entry.stat.size) && (entry.id.is_empty_blob() || entry.stat.size != 0) {
            return Ok(Some("unstaged"));
        }
        let cleaned = clean(file).with_context(|| format!("cannot read {rela_path:?}"))?;
        let same = |check: &mut Self, bytes: &[u8]| -> Result<bool> {
            Ok(check.blob_id(&rela, bytes, entry.id.kind())? == entry.id)
        };
        Ok(match cleaned {
            Cleaned::Exact(bytes) => (!same(self, &bytes)?).then_some("unstaged"),
            Cleaned::Ambiguous { raw, pointer } => {
                if same(self, &raw)? || same(self, &pointer)? {
                    Some(AMBIGUOUS)
                } else {
                    Some("unstaged")
                }
            }
        })
    }

    /// The blob id git stores for a filter's output `bytes` at `rela`,
    /// after the conversions git applies on top of a filter.
    fn blob_id(
        &mut self,
        rela: &Path,
        bytes: &[u8],
        kind: gix::hash::Kind,
    ) -> Result<gix::ObjectId> {
        use gix::filter::plumbing::pipeline::convert::ToGitOutcome;
        use gix::worktree::stack::state::attributes::Source;
        let pipeline = match &mut self.pipeline {
            Some(pipeline) => pipeline,
            None => self.pipeline.insert(
                gix::filter::Pipeline::new(
                    self.repo,
                    self.repo
                        .attributes_only(&self.index, Source::WorktreeThenIdMapping)
                        .context("cannot read the attributes")?
                        .detach(),
                )
                .context("cannot prepare the conversion to git")?,
            ),
        };
        let converted = pipeline
            .convert_to_git(bytes, rela, &self.index)
            .with_context(|| format!("cannot convert {} to git", rela.display()))?;
        let id = match converted {
            ToGitOutcome::Unchanged(_) => {
                gix::objs::compute_hash(kind, gix::objs::Kind::Blob, bytes)
            }
            ToGitOutcome::Buffer(buf) => gix::objs::compute_hash(kind, gix::objs::Kind::Blob, buf),
            ToGitOutcome::Process(_) => bail!(
                "a filter driver is configured for {} (all were dropped)",
                rela.display()
            ),
        };
        id.with_context(|| format!("cannot hash {}", rela.display()))
    }
}

/// Opens the regular file at `rela` under `work_dir` without following a
/// symlink anywhere on the way (gix's status does not either); `None` when
/// it is not there as a regular file.
fn open_in(work_dir: &Path, rela: &Path) -> Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let full = work_dir.join(rela);
    let Some(parent) = full.parent() else {
        return Ok(None);
    };
    match parent.canonicalize() {
        Ok(real) if real == parent => {}
        _ => return Ok(None),
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&full)
    {
        Ok(file) => file,
        Err(_) => return Ok(None),
    };
    let is_file = file
        .metadata()
        .with_context(|| format!("cannot read {}", full.display()))?
        .is_file();
    Ok(is_file.then_some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleaned(data: &[u8]) -> Cleaned {
        clean(data).unwrap()
    }

    fn exact(data: &[u8]) -> Vec<u8> {
        match cleaned(data) {
            Cleaned::Exact(out) => out,
            Cleaned::Ambiguous { .. } => panic!("ambiguous: {:?}", data.as_bstr()),
        }
    }

    const SHA_FIRST: &str = "b640e840b19d378660b32fb51ae18d67dccb4a8596a29e7bd72c1b2ae5928f41";

    #[test]
    fn content_becomes_the_pointer_git_lfs_writes() {
        // `printf 'first\n' | git lfs clean` (git-lfs 3.3.0).
        assert_eq!(
            exact(b"first\n"),
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{SHA_FIRST}\nsize 6\n")
                .into_bytes()
        );
    }

    #[test]
    fn an_empty_file_stays_empty() {
        assert_eq!(exact(b""), b"");
    }

    #[test]
    fn a_canonical_pointer_passes_through() {
        let p =
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{SHA_FIRST}\nsize 6\n");
        assert_eq!(exact(p.as_bytes()), p.as_bytes());
    }

    #[test]
    fn other_pointer_forms_are_ambiguous() {
        for p in [
            format!("version https://hawser.github.com/spec/v1\noid sha256:{SHA_FIRST}\nsize 6\n"),
            format!(
                "version https://git-lfs.github.com/spec/v1\r\noid sha256:{SHA_FIRST}\r\nsize 6\r\n"
            ),
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{SHA_FIRST}\nsize 6"),
            format!(
                "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 6\n",
                SHA_FIRST.to_uppercase()
            ),
            format!(
                "version https://git-lfs.github.com/spec/v1\noid sha256:{SHA_FIRST}\nsize +6\n"
            ),
            "mentions git-lfs\n".to_owned(),
        ] {
            assert!(
                matches!(cleaned(p.as_bytes()), Cleaned::Ambiguous { .. }),
                "{p:?}"
            );
        }
    }

    #[test]
    fn long_content_is_never_a_pointer() {
        let mut data =
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{SHA_FIRST}\nsize 6\n")
                .into_bytes();
        data.resize(POINTER_CUTOFF, b'x');
        let out = exact(&data);
        assert!(out.starts_with(VERSION_LINE));
        assert!(out.ends_with(format!("size {POINTER_CUTOFF}\n").as_bytes()));
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let expect = pointer(&Sha256::digest(&big), big.len() as u64);
        assert_eq!(exact(&big), expect);
    }

    #[test]
    fn oversized_sizes_are_not_canonical() {
        let p = format!(
            "version https://git-lfs.github.com/spec/v1\noid sha256:{SHA_FIRST}\nsize 99999999999999999999\n"
        );
        assert!(!is_canonical_pointer(p.as_bytes()));
    }
}
