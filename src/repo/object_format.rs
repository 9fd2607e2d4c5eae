//! A git dir's object format (SHA-1 or SHA-256), read as git reads it.
//!
//! Files grantguard decodes itself, without an opened repository (the index
//! of a submodule, say), hold object ids whose length depends on the
//! repository's hash function, and nothing in the file says which: decoding
//! a SHA-256 index as SHA-1 fails, or worse, reads other ids. git takes the
//! format from `extensions.objectFormat` in the common dir's `config` (no
//! includes: git reads the repository format before any include), and only
//! when `core.repositoryFormatVersion` is 1; version 0 with the extension set
//! is a repository git refuses to open. Anything but those two known
//! formats is refused here too, so a format is never guessed.

use std::path::Path;

use anyhow::{Context, Result, bail};

/// The object format of the repository whose common dir is `common_dir`.
pub fn of_common_dir(common_dir: &Path) -> Result<gix::hash::Kind> {
    let path = common_dir.join("config");
    let bytes = crate::fsutil::read_regular_limited(&path, crate::fsutil::MAX_SMALL_FILE)
        .with_context(|| format!("cannot read {}", path.display()))?;
    from_config(&bytes).with_context(|| format!("in {}", path.display()))
}

/// The hash function id git's binary formats (`.rev`, commit-graph,
/// multi-pack-index) record in their header: git's `oid_version`. A format
/// this build does not know is refused, never mapped to a guess.
pub fn oid_version(hash: gix::hash::Kind) -> Result<u8> {
    match hash {
        gix::hash::Kind::Sha1 => Ok(1),
        gix::hash::Kind::Sha256 => Ok(2),
        #[allow(unreachable_patterns)]
        other => bail!("the object format {other:?} is not supported"),
    }
}

/// The object format a repository config's bytes select.
fn from_config(bytes: &[u8]) -> Result<gix::hash::Kind> {
    let config = gix::config::File::from_bytes_no_includes(
        bytes,
        gix::config::file::Metadata::from(gix::config::Source::Local),
        Default::default(),
    )
    .context("cannot parse the repository config")?;
    let version = config
        .raw_value("core.repositoryFormatVersion")
        .ok()
        .map(|v| v.to_string());
    let format = config
        .raw_value("extensions.objectFormat")
        .ok()
        .map(|v| v.to_string());
    let Some(format) = format else {
        return Ok(gix::hash::Kind::Sha1);
    };
    if version.as_deref().map(str::trim) != Some("1") {
        bail!(
            "extensions.objectFormat is set but core.repositoryFormatVersion is not 1; git \
             refuses such a repository"
        );
    }
    // git compares the value case-sensitively (`hash_algo_by_name`).
    match format.as_str() {
        "sha1" => Ok(gix::hash::Kind::Sha1),
        "sha256" => Ok(gix::hash::Kind::Sha256),
        other => bail!("unknown object format {other:?} in extensions.objectFormat"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_format_as_git_does() {
        let kind = |text: &str| from_config(text.as_bytes());
        assert_eq!(
            kind("[core]\n\trepositoryformatversion = 0\n").unwrap(),
            gix::hash::Kind::Sha1
        );
        assert_eq!(
            kind("[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n")
                .unwrap(),
            gix::hash::Kind::Sha256
        );
        assert_eq!(
            kind("[core]\n\trepositoryFormatVersion = 1\n[extensions]\n\tobjectFormat = sha1\n")
                .unwrap(),
            gix::hash::Kind::Sha1
        );
        assert!(
            kind("[core]\n\trepositoryformatversion = 0\n[extensions]\n\tobjectformat = sha256\n")
                .is_err()
        );
        for bad in ["md5", "SHA256"] {
            let text = format!(
                "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = {bad}\n"
            );
            assert!(kind(&text).is_err(), "{bad}");
        }
    }
}
