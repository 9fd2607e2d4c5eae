//! `working-tree-encoding` as git reads it.
//!
//! git converts with iconv; gix (gix-filter) decodes with `encoding_rs`,
//! which knows the labels of the WHATWG Encoding Standard only. For the
//! UTF-16 and UTF-32 family the two differ in what matters (issue 25):
//! git's own `UTF-16LE-BOM` (the spelling its documentation recommends),
//! `UTF-32`, `UTF-32LE`/`BE`, `UTF16LE` without a dash, and `UTF-16`,
//! which `encoding_rs` takes for little-endian without a byte-order mark
//! while git requires one. Those paths are read here the way git 2.47
//! with glibc's iconv reads them (`convert.c`'s `encode_to_git` and
//! `validate_encoding`, `utf8.c`'s `reencode_string_len`):
//!
//! - names compare as git's `same_utf_encoding` does: case-insensitive,
//!   the dash after `UTF` optional (`utf16le-bom` is `UTF-16LE-BOM`);
//! - `UTF-16LE-BOM` is read as iconv's `UTF-16` without any check of the
//!   byte-order mark (`is_missing_required_utf_bom` names `UTF-16` and
//!   `UTF-32` only): a mark picks the byte order and is dropped, and
//!   without one glibc reads the host's order (little-endian on x86 and
//!   arm64);
//! - `UTF-16` and `UTF-32` need a byte-order mark (git reports an error
//!   otherwise), which picks the byte order and is dropped;
//! - `UTF-16LE`, `UTF-16BE`, `UTF-32LE`, `UTF-32BE` must not start with a
//!   byte-order mark (an error otherwise);
//! - `UTF-16BE-BOM` is a name iconv does not know: git fails to read it;
//! - on any error, and on bytes iconv cannot decode (an odd length, an
//!   unpaired surrogate, a code point past U+10FFFF), git leaves the
//!   content as it is and goes on, so the raw bytes are compared.
//!
//! gix decodes `UTF-16`, `UTF-16LE` and `UTF-16BE` itself (`encoding_rs`
//! sniffs and strips a byte-order mark and accepts a missing one, where git
//! reports an error and compares raw bytes), so every path of the family is
//! judged here, never by gix; the other labels `encoding_rs` reads as
//! UTF-16 (`unicode`, `ucs-2`, `csunicode`, ...) are names iconv reads
//! otherwise, and are refused. As in git's `ie_modified`, a file whose size
//! differs from the index's (when that is not 0) is modified whatever its
//! content decodes to.
//!
//! Then git's end-of-line conversion applies. Only its unambiguous cases
//! are reproduced: `text` set, `text=input` or an `eol` attribute of `lf`
//! or `crlf` (every CRLF becomes LF), and `-text` or no `text`/`eol` with
//! `core.autocrlf` off (nothing). git matches those values case-sensitively
//! and ignores any other `eol` (`eol=CRLF` is no `eol`), and so does this.
//! `text=auto`, `core.autocrlf` on, a `filter` or `ident` with such an
//! encoding, and every encoding neither reader shares, stay refused with
//! the path and the encoding named (fail closed).

use anyhow::{Context, Result};
use gix::bstr::{BStr, BString, ByteSlice};

/// How git reads one of the encodings handled here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GitRead {
    /// `UTF-16LE-BOM`, read as iconv's `UTF-16` with no check of the mark:
    /// a mark picks the order, none means the host's (glibc).
    Utf16LeBom,
    /// iconv's `UTF-16`: a byte-order mark required, picks the order.
    Utf16Bom,
    /// iconv's `UTF-32`: a byte-order mark required, picks the order.
    Utf32Bom,
    /// A fixed order, no byte-order mark allowed: UTF-16 (`true` = LE).
    Utf16(bool),
    /// A fixed order, no byte-order mark allowed: UTF-32 (`true` = LE).
    Utf32(bool),
    /// A name git cannot read (`UTF-16BE-BOM`): content compared raw.
    Fails,
}

/// git's `same_utf_encoding`: both start with `UTF` (any case), an
/// optional dash after it, the rest compared case-insensitively.
fn same_utf_encoding(a: &[u8], b: &[u8]) -> bool {
    let strip = |s: &[u8]| -> Option<Vec<u8>> {
        let rest = s
            .get(..3)
            .filter(|p| p.eq_ignore_ascii_case(b"utf"))
            .map(|_| &s[3..])?;
        Some(rest.strip_prefix(b"-").unwrap_or(rest).to_ascii_lowercase())
    };
    match (strip(a), strip(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.eq_ignore_ascii_case(b),
    }
}

/// The encodings of the UTF-16/32 family, read here rather than by gix.
pub fn git_read(label: &BStr) -> Option<GitRead> {
    let l = label.as_bytes();
    let is = |name: &str| same_utf_encoding(l, name.as_bytes());
    Some(if is("UTF-16LE-BOM") {
        GitRead::Utf16LeBom
    } else if is("UTF-16") {
        GitRead::Utf16Bom
    } else if is("UTF-32") {
        GitRead::Utf32Bom
    } else if is("UTF-16LE") {
        GitRead::Utf16(true)
    } else if is("UTF-16BE") {
        GitRead::Utf16(false)
    } else if is("UTF-32LE") {
        GitRead::Utf32(true)
    } else if is("UTF-32BE") {
        GitRead::Utf32(false)
    } else if is("UTF-16BE-BOM") || is("UTF-32LE-BOM") || is("UTF-32BE-BOM") {
        GitRead::Fails
    } else {
        return None;
    })
}

/// The byte order in which glibc's iconv reads `UTF-16` without a
/// byte-order mark: the host's (`gconv`'s `utf-16.c` swaps only on a
/// reversed mark). git on Linux uses the system's iconv: glibc's, unless
/// the system is musl-based (a `/lib/ld-musl-*` loader; musl reads
/// big-endian), and elsewhere (GNU libiconv reads big-endian, others
/// differ) it is not modelled: `None`.
fn unmarked_utf16_le() -> Option<bool> {
    static READ: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *READ.get_or_init(|| {
        if !cfg!(target_os = "linux") {
            return None;
        }
        let musl = std::fs::read_dir("/lib").map_or(true, |entries| {
            entries
                .filter_map(|e| e.ok())
                .any(|e| e.file_name().as_encoded_bytes().starts_with(b"ld-musl-"))
        });
        (!musl).then_some(cfg!(target_endian = "little"))
    })
}

/// The content git hashes for a file read under `how`, before its
/// end-of-line conversion: the UTF-8 text, or the raw bytes when git
/// reports an error. `None` when git's reading is not modelled here (a
/// `UTF-16LE-BOM` file without a mark where git's iconv is not glibc's).
pub fn decode(how: GitRead, raw: &[u8]) -> Option<Vec<u8>> {
    let decoded = match how {
        GitRead::Fails => None,
        GitRead::Utf16LeBom => match raw {
            [0xfe, 0xff, rest @ ..] => utf16(rest, false),
            [0xff, 0xfe, rest @ ..] => utf16(rest, true),
            _ => utf16(raw, unmarked_utf16_le()?),
        },
        GitRead::Utf16Bom => match raw {
            [0xfe, 0xff, rest @ ..] => utf16(rest, false),
            [0xff, 0xfe, rest @ ..] => utf16(rest, true),
            _ => None,
        },
        GitRead::Utf32Bom => match raw {
            [0x00, 0x00, 0xfe, 0xff, rest @ ..] => utf32(rest, false),
            [0xff, 0xfe, 0x00, 0x00, rest @ ..] => utf32(rest, true),
            _ => None,
        },
        GitRead::Utf16(le) => {
            if raw.starts_with(&[0xfe, 0xff]) || raw.starts_with(&[0xff, 0xfe]) {
                None
            } else {
                utf16(raw, le)
            }
        }
        GitRead::Utf32(le) => {
            if raw.starts_with(&[0x00, 0x00, 0xfe, 0xff]) || raw.starts_with(&[0xff, 0xfe, 0, 0]) {
                None
            } else {
                utf32(raw, le)
            }
        }
    };
    Some(decoded.unwrap_or_else(|| raw.to_vec()))
}

fn utf16(bytes: &[u8], le: bool) -> Option<Vec<u8>> {
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let units = bytes.chunks_exact(2).map(|c| {
        let pair = [c[0], c[1]];
        if le {
            u16::from_le_bytes(pair)
        } else {
            u16::from_be_bytes(pair)
        }
    });
    let text: String = char::decode_utf16(units).collect::<Result<_, _>>().ok()?;
    Some(text.into_bytes())
}

fn utf32(bytes: &[u8], le: bool) -> Option<Vec<u8>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut text = String::with_capacity(bytes.len() / 4);
    for c in bytes.chunks_exact(4) {
        let quad = [c[0], c[1], c[2], c[3]];
        let value = if le {
            u32::from_le_bytes(quad)
        } else {
            u32::from_be_bytes(quad)
        };
        text.push(char::from_u32(value)?);
    }
    Some(text.into_bytes())
}

/// One index path whose encoding is read here, with what else decides its
/// content.
pub struct Special {
    /// The path.
    pub path: BString,
    /// How git reads its encoding.
    pub how: GitRead,
    /// Whether every CRLF becomes LF (`text` set, or an `eol` attribute).
    pub crlf_to_lf: bool,
}

/// What the attributes of the index say about encodings.
pub struct Survey {
    /// Paths read here (see [`Special`]).
    pub special: Vec<Special>,
    /// The first path under an encoding neither reader shares, or in a
    /// combination not reproduced here, with its encoding.
    pub unsupported: Option<(BString, BString)>,
}

/// Whether the worktree file of `entry` is one git or gix converts, and so
/// one whose attributes the survey reads. Not: a file git does not look at
/// (skip-worktree, assume-unchanged: reported by `hidden_index_entries`
/// unless a sparse checkout explains it), an intent-to-add or conflicted
/// one (reported without content), a symlink read with readlink (when
/// `symlinks`, git's `core.symlinks`), a submodule or a sparse directory.
fn converted(entry: &gix::index::Entry, symlinks: bool) -> bool {
    use gix::index::entry::{Flags, Mode};
    !(entry
        .flags
        .intersects(Flags::SKIP_WORKTREE | Flags::ASSUME_VALID | Flags::INTENT_TO_ADD)
        || entry.stage_raw() != 0
        || entry.mode == Mode::COMMIT
        || entry.mode == Mode::DIR
        || (entry.mode == Mode::SYMLINK && symlinks))
}

/// The attribute whose files [`survey`] looks for.
const ENCODING: &str = "working-tree-encoding";

/// Whether any attribute file the survey would read names
/// `working-tree-encoding` (in an assignment or a macro's expansion): if
/// none does, no path has an encoding, and the survey's answer is known
/// without matching 100,000 paths (24 ms on the benchmark's checkout;
/// issue 29).
///
/// The stack reads a directory's `.gitattributes` (the worktree's, else
/// the index's) when it enters the directory, whichever file of it is
/// asked about, and records every attribute name of every file it read in
/// its collection, which only grows. So asking about the first converted
/// entry of each run of entries in one directory reads every file the
/// survey's loop would read (the sorted index interleaves a directory's
/// files with its subdirectories' ones: a directory may be entered more
/// than once, which reads nothing new). The global files (`info/attributes`,
/// `core.attributesFile`) were read when the stack was made.
fn may_name_an_encoding(
    attributes: &mut gix::AttributeStack<'_>,
    index: &gix::index::State,
    symlinks: bool,
) -> Result<bool> {
    let mut previous: Option<&[u8]> = None;
    for entry in index.entries() {
        if !converted(entry, symlinks) {
            continue;
        }
        let path = entry.path(index);
        let dir = match path.rfind_byte(b'/') {
            Some(slash) => &path[..slash],
            None => &path[..0],
        };
        if previous == Some(dir) {
            continue;
        }
        previous = Some(dir);
        // Entering the directory is the point; nothing is matched.
        let _entered = attributes
            .at_entry(path, Some(entry.mode))
            .with_context(|| format!("cannot read the attributes of {path:?}"))?;
    }
    Ok(attributes
        .attributes_collection()
        .iter()
        .any(|(name, _)| name == ENCODING))
}

/// Surveys the index's paths: which have an encoding read here, and the
/// first one that cannot be judged. `autocrlf` is `core.autocrlf` as git
/// sees it (true or input: on).
pub fn survey(repo: &gix::Repository, index: &gix::index::State, autocrlf: bool) -> Result<Survey> {
    use gix::worktree::stack::state::attributes::Source;
    let mut attributes = repo
        .attributes_only(index, Source::WorktreeThenIdMapping)
        .context("cannot read the attributes")?;
    let mut selection =
        attributes.selected_attribute_matches([ENCODING, "text", "eol", "filter", "ident", "crlf"]);
    let mut out = Survey {
        special: Vec::new(),
        unsupported: None,
    };
    let symlinks = repo
        .config_snapshot()
        .boolean("core.symlinks")
        .unwrap_or(true);
    if !may_name_an_encoding(&mut attributes, index, symlinks)? {
        return Ok(out);
    }
    for entry in index.entries() {
        if !converted(entry, symlinks) {
            continue;
        }
        let path = entry.path(index);
        let platform = attributes
            .at_entry(path, Some(entry.mode))
            .with_context(|| format!("cannot read the attributes of {path:?}"))?;
        selection.reset();
        platform.matching_attributes(&mut selection);
        let mut encoding = None;
        let (mut text, mut eol, mut other) = (None, false, false);
        for m in selection.iter_selected() {
            use gix::attrs::StateRef;
            match (m.assignment.name.as_str(), m.assignment.state) {
                (ENCODING, StateRef::Value(v)) => {
                    encoding = Some(v.as_bstr().to_owned());
                }
                ("text", state) => text = Some(state.to_owned()),
                // git's `git_path_check_eol`: `lf` or `crlf`, spelled so;
                // any other value (`CRLF`, `eol` set) is no `eol` at all.
                ("eol", StateRef::Value(v)) if v.as_bstr() == "lf" || v.as_bstr() == "crlf" => {
                    eol = true;
                }
                ("filter", StateRef::Value(_)) | ("ident", StateRef::Set) => other = true,
                ("crlf", state) if !matches!(state, StateRef::Unspecified) => other = true,
                _ => {}
            }
        }
        let Some(encoding) = encoding else {
            continue;
        };
        let unsupported = |out: &mut Survey| {
            if out.unsupported.is_none() {
                out.unsupported = Some((path.to_owned(), encoding.clone()));
            }
        };
        match git_read(encoding.as_bstr()) {
            Some(how) => {
                use gix::attrs::State;
                let crlf_to_lf = match (&text, eol) {
                    (Some(State::Set), _) => Some(true),
                    (Some(State::Value(v)), _) if v.as_ref().as_bstr() == "input" => Some(true),
                    (Some(State::Unset), _) => Some(false),
                    (None | Some(State::Unspecified), true) => Some(true),
                    (None | Some(State::Unspecified), false) if !autocrlf => Some(false),
                    _ => None,
                };
                match crlf_to_lf {
                    Some(crlf_to_lf)
                        if !other
                            && (entry.mode == gix::index::entry::Mode::FILE
                                || entry.mode == gix::index::entry::Mode::FILE_EXECUTABLE) =>
                    {
                        out.special.push(Special {
                            path: path.to_owned(),
                            how,
                            crlf_to_lf,
                        });
                    }
                    _ => unsupported(&mut out),
                }
            }
            // gix must not decode what it reads as UTF-16 under a name
            // iconv reads otherwise (`unicode`, `ucs-2`, ...), nor what it
            // cannot read at all.
            None => {
                match gix::filter::plumbing::worktree::encoding::for_label(encoding.as_bstr()) {
                    Ok(read) if !read.name().starts_with("UTF-16") => {}
                    _ => unsupported(&mut out),
                }
            }
        }
    }
    Ok(out)
}

/// Whether the worktree file of `special` is what git calls unmodified
/// against `entry`'s blob. `executable_bit` is `core.fileMode`: when off,
/// git ignores the executable bit.
pub fn unchanged(
    work_dir: &std::path::Path,
    special: &Special,
    entry: &gix::index::Entry,
    hash: gix::hash::Kind,
    executable_bit: bool,
) -> Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let path = work_dir.join(std::ffi::OsStr::from_bytes(special.path.as_bytes()));
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("cannot stat {}", path.display())),
    };
    if !meta.file_type().is_file() {
        return Ok(false);
    }
    {
        use std::os::unix::fs::PermissionsExt;
        let exec = meta.permissions().mode() & 0o111 != 0;
        if executable_bit && exec != (entry.mode == gix::index::entry::Mode::FILE_EXECUTABLE) {
            return Ok(false);
        }
    }
    // git's `ie_modified`: a size other than the index's is a change
    // without looking further, unless the index's is 0 (as after
    // `read-tree` or `update-index --cacheinfo`, or a racily clean entry).
    let indexed = entry.stat.size;
    if indexed != 0 && indexed != meta.len() as u32 {
        return Ok(false);
    }
    let raw = crate::fsutil::read_regular(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let Some(mut content) = decode(special.how, &raw) else {
        anyhow::bail!(
            "{:?} has working-tree-encoding=UTF-16LE-BOM and no byte-order mark: git reads \
             it in its iconv's default byte order, which grantguard knows for glibc only \
             (this system's iconv is not glibc's), so it cannot compare the file with its \
             blob; give such files a byte-order mark",
            special.path
        );
    };
    if special.crlf_to_lf {
        content = content.replace(b"\r\n", b"\n");
    }
    let id = gix::objs::compute_hash(hash, gix::objs::Kind::Blob, &content)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(id == entry.id)
}

/// The message for a path under an encoding grantguard cannot judge.
pub fn refusal(path: &BString, encoding: &BString) -> String {
    format!(
        "{path:?} has working-tree-encoding={encoding}, which grantguard cannot read as git \
         does here, so it cannot compare the file with its blob. grantguard reads the encodings \
         of the WHATWG Encoding Standard (Shift_JIS, EUC-JP, GBK, ISO-8859-*, windows-125*, \
         ...; not its other names for UTF-16, such as unicode or ucs-2) and git's UTF-16/UTF-32 family (UTF-16LE-BOM, UTF-16, UTF-16LE/BE, UTF-32, \
         UTF-32LE/BE), the latter with `text`, `text=input`, `-text` or `eol=lf`/`crlf` but not with `text=auto`, \
         core.autocrlf, a filter or ident: declare one of those in .gitattributes, or use a \
         repository without it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_as_gits_same_utf_encoding() {
        for name in ["UTF-16LE-BOM", "utf16le-bom", "Utf-16le-Bom"] {
            assert_eq!(git_read(name.into()), Some(GitRead::Utf16LeBom), "{name}");
        }
        for name in ["UTF-16", "utf16", "Utf-16"] {
            assert_eq!(git_read(name.into()), Some(GitRead::Utf16Bom), "{name}");
        }
        assert_eq!(git_read("UTF32".into()), Some(GitRead::Utf32Bom));
        assert_eq!(git_read("utf-32le".into()), Some(GitRead::Utf32(true)));
        assert_eq!(git_read("UTF16BE".into()), Some(GitRead::Utf16(false)));
        assert_eq!(git_read("utf-16le".into()), Some(GitRead::Utf16(true)));
        assert_eq!(git_read("UTF-16BE-BOM".into()), Some(GitRead::Fails));
        assert_eq!(git_read("UTF16-LE".into()), None);
        assert_eq!(git_read("Shift_JIS".into()), None);
    }

    fn dec(how: GitRead, raw: &[u8]) -> Vec<u8> {
        decode(how, raw).expect("modelled here")
    }

    #[test]
    fn decodes_as_git_and_falls_back_to_raw_bytes_on_its_errors() {
        let le_bom = [0xff, 0xfe, b'h', 0, b'i', 0];
        assert_eq!(dec(GitRead::Utf16Bom, &le_bom), b"hi");
        assert_eq!(dec(GitRead::Utf16Bom, &[0xfe, 0xff, 0, b'h']), b"h");
        // A mark required and missing, or prohibited and present: raw.
        assert_eq!(dec(GitRead::Utf16Bom, &[b'h', 0]), [b'h', 0]);
        assert_eq!(dec(GitRead::Utf16(true), &le_bom), le_bom);
        assert_eq!(
            dec(GitRead::Utf16(false), &[0xfe, 0xff, 0, b'h']),
            [0xfe, 0xff, 0, b'h']
        );
        assert_eq!(dec(GitRead::Utf16(true), &[b'h', 0]), b"h");
        // An unpaired surrogate, an odd length: raw.
        assert_eq!(dec(GitRead::Utf16(true), &[0x00, 0xd8]), [0x00, 0xd8]);
        assert_eq!(dec(GitRead::Utf16(true), b"h"), b"h");
        assert_eq!(
            dec(GitRead::Utf32Bom, &[0xff, 0xfe, 0, 0, b'h', 0, 0, 0]),
            b"h"
        );
        assert_eq!(
            dec(GitRead::Utf32(false), &[0, 0x11, 0, 0]),
            [0, 0x11, 0, 0]
        );
        assert_eq!(dec(GitRead::Fails, b"x"), b"x");
    }

    #[test]
    fn utf16le_bom_needs_no_mark_as_in_git() {
        if unmarked_utf16_le() != Some(true) {
            // Not glibc on a little-endian host: refused or big-endian.
            let hi = decode(GitRead::Utf16LeBom, &[b'h', 0, b'i', 0]);
            assert!(unmarked_utf16_le().is_some() || hi.is_none());
            return;
        }
        // git checks no mark for UTF-16LE-BOM: glibc's UTF-16 reads the
        // host's order without one (F1: "hello\n" in UTF-8 is not itself).
        assert_eq!(dec(GitRead::Utf16LeBom, &[b'h', 0, b'i', 0]), b"hi");
        assert_eq!(dec(GitRead::Utf16LeBom, &[0xff, 0xfe, b'h', 0]), b"h");
        assert_eq!(dec(GitRead::Utf16LeBom, &[0xfe, 0xff, 0, b'h']), b"h");
        assert_eq!(
            dec(GitRead::Utf16LeBom, b"hello\n"),
            "\u{6568}\u{6c6c}\u{0a6f}".as_bytes()
        );
        // Undecodable: raw.
        assert_eq!(dec(GitRead::Utf16LeBom, b"hi!"), b"hi!");
        assert_eq!(dec(GitRead::Utf16LeBom, &[0, 0xdc]), [0, 0xdc]);
    }
}
