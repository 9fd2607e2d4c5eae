//! `working-tree-encoding` names grantguard cannot decode, named precisely.
//!
//! git converts with iconv and knows its own `UTF-16LE-BOM`/`UTF-16BE-BOM`
//! spellings (the ones its documentation recommends), `UTF-32` and the
//! rest of iconv's list. gix (gix-filter) decodes with `encoding_rs`, which
//! knows the labels of the WHATWG Encoding Standard only (`UTF-16LE`,
//! `UTF-16BE`, `Shift_JIS`, `ISO-8859-*`, `windows-125*`, ...). A file under
//! another encoding cannot be compared with its blob the way git compares
//! it, so the checkout cannot be judged: that is refused, fail closed, but
//! with the path, the encoding and what to do instead of gix's bare error.

use anyhow::{Context, Result};
use gix::bstr::BString;

/// The first index path whose `working-tree-encoding` attribute names an
/// encoding gix cannot decode, with that encoding.
pub fn first_unsupported(
    repo: &gix::Repository,
    index: &gix::index::State,
) -> Result<Option<(BString, BString)>> {
    use gix::worktree::stack::state::attributes::Source;
    let mut attributes = repo
        .attributes_only(index, Source::WorktreeThenIdMapping)
        .context("cannot read the attributes")?;
    let mut selection = attributes.selected_attribute_matches(["working-tree-encoding"]);
    for entry in index.entries() {
        let path = entry.path(index);
        let platform = attributes
            .at_entry(path, Some(entry.mode))
            .with_context(|| format!("cannot read the attributes of {path:?}"))?;
        selection.reset();
        platform.matching_attributes(&mut selection);
        for m in selection.iter_selected() {
            if let gix::attrs::StateRef::Value(name) = m.assignment.state
                && gix::filter::plumbing::worktree::encoding::for_label(name.as_bstr()).is_err()
            {
                return Ok(Some((path.to_owned(), name.as_bstr().to_owned())));
            }
        }
    }
    Ok(None)
}

/// The message for a path under an encoding gix cannot decode.
pub fn refusal(path: &BString, encoding: &BString) -> String {
    let suggestion = match encoding.to_ascii_uppercase().as_slice() {
        b"UTF-16LE-BOM" => " (e.g. UTF-16LE, which git writes without a byte-order mark)",
        b"UTF-16BE-BOM" => " (e.g. UTF-16BE, which git writes without a byte-order mark)",
        _ => "",
    };
    format!(
        "{path:?} has working-tree-encoding={encoding}, which grantguard cannot decode, so it \
         cannot compare the file with its blob as git does. grantguard reads the encodings of \
         the WHATWG Encoding Standard (UTF-16LE, UTF-16BE, Shift_JIS, EUC-JP, GBK, ISO-8859-*, \
         windows-125*, ...), not git's -BOM variants, UTF-32 or other iconv-only names: declare \
         an encoding both read{suggestion} in .gitattributes, or use a repository without it"
    )
}
