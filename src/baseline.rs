//! The baseline: what the repository looked like when it was armed, recorded
//! in the state directory outside the checkout.
//!
//! `verify` decides from the repository and this record alone, so the record
//! must be whole and unaltered. It is written atomically and carries an
//! integrity digest over its body; a record that is missing, unreadable,
//! malformed, or whose digest or grant id does not match, is refused. The
//! digest is unkeyed: it catches corruption and careless edits, not a forger.
//! What keeps the agent from forging the record is that the state directory
//! is outside its reach (see THREAT_MODEL.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use gix::bstr::{BStr, BString, ByteSlice};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::digest::sha256_hex;
use crate::grant::Grant;
use crate::repo::{HookPaths, Location, RefMap};

mod refs_reader;

/// Schema id of the record.
pub const SCHEMA: &str = "grantguard.baseline/3";

/// File name of the record inside the state directory.
pub const FILE_NAME: &str = "baseline.json";

/// The recorded state, as written by `arm`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The canonical grant text (exactly what its id hashes).
    pub grant: String,
    /// Its id.
    pub grant_id: String,
    /// Where the repository is.
    pub repo: Location,
    /// The branch HEAD pointed to (`refs/heads/...`), as bytes; stored as
    /// [`crate::repo::refname`] encodes it.
    #[serde(with = "crate::repo::refname::text")]
    pub branch: BString,
    /// The branch's commit, `None` for an unborn branch.
    pub commit: Option<String>,
    /// Every ref under `refs/` and its raw value, as bytes: in a file of
    /// its own ([`REFS_FILE_NAME`]), read on first use by [`Baseline::refs`].
    /// Why: every hook call reads this record, and a repository with
    /// 100,000 refs made it megabytes to parse and hash on each commit,
    /// while a commit's hooks need none of them.
    #[serde(skip)]
    pub(crate) refs: RefList,
    /// `sha256:` + hex SHA-256 of [`REFS_FILE_NAME`] as written by arm.
    pub ref_list: String,
    /// `packed-refs` as arm read it, and the refs it did not decide: what
    /// lets verify read only the refs that can have moved (see
    /// [`crate::repo::refs_since_arm`]). Absent for reftable, for a store
    /// with many loose refs, and from records written before it existed
    /// (same schema): those are verified by reading every ref.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed_at_arm: Option<crate::repo::refs_since_arm::PackedAtArm>,
    /// Digest per protected metadata entry, as armed (hooks installed).
    pub metadata: BTreeMap<String, String>,
    /// The same digests before `arm` installed the hooks: what a clean
    /// `disarm` restores, and what `verify` expects after it.
    pub metadata_before_arm: BTreeMap<String, String>,
    /// Hook files outside the git dir whose digests are part of `metadata`
    /// (absent from baselines written before they were protected).
    #[serde(default, skip_serializing_if = "HookPaths::is_empty")]
    pub hooks: HookPaths,
    /// `sha256:` + hex SHA-256 of the object-store inventory written beside
    /// the record (see [`crate::repo::objects`]); the list itself can be
    /// large, and every hook call reads this record, so it is a file of its
    /// own.
    pub object_inventory: String,
    /// The settings from outside the repository's config that decide
    /// whether git calls the checkout clean, as armed (see
    /// [`crate::repo::clean_settings`]). Absent from records written before
    /// they were recorded (same schema): those are judged on the local
    /// config alone, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_settings: Option<crate::repo::clean_settings::CleanSettings>,
    /// Seconds since the Unix epoch when the record was made.
    pub armed_at: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    baseline: Baseline,
    /// `sha256:` + hex SHA-256 of the compact JSON of `baseline`.
    integrity: String,
}

/// File name of the baseline's refs inside the state directory (one file
/// for the live and the retired record: both name its digest).
pub const REFS_FILE_NAME: &str = "baseline.refs.json";

/// The refs of a record: given at arm, or read from the state directory
/// the record was read from on first use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RefList {
    loaded: std::sync::OnceLock<RefMap>,
    /// The loose refs listed by file identity, once read (see
    /// [`Baseline::loose_list`]).
    listed: std::sync::OnceLock<crate::repo::loose_at_arm::Records>,
    /// Arm's copy of `packed-refs` (see [`Baseline::refs_at_arm`]).
    packed_copy: crate::repo::refs_since_arm::ArmCopy,
    /// The state directory to read them from (`None` for a record made in
    /// this process).
    state: Option<PathBuf>,
}

impl RefList {
    /// The refs of a record made in this process ([`Baseline::write`]
    /// writes them and sets [`Baseline::ref_list`]).
    pub(crate) fn given(refs: RefMap) -> RefList {
        RefList {
            loaded: std::sync::OnceLock::from(refs),
            listed: std::sync::OnceLock::new(),
            packed_copy: Default::default(),
            state: None,
        }
    }
}

/// How [`REFS_FILE_NAME`] stores the refs ([`crate::repo::refname`]
/// encodes names and values).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefsFile {
    #[serde(with = "crate::repo::refname::map")]
    refs: RefMap,
}

/// [`Baseline::for_each_ref`] of the refs file at `path`, whose digest
/// must be `digest`: read as it streams past ([`refs_reader`]), each name
/// and value decoded as [`crate::repo::refname::map`] decodes them, the
/// names in strictly increasing order as arm wrote them (so none repeats).
/// The digest is checked at the end, before any parse error is reported:
/// a file edited after arm is refused as that.
fn each_ref_in(path: &Path, digest: &str, each: &mut dyn FnMut(&BStr, &BStr)) -> Result<()> {
    let mut hashing = open_hashing(path)?;
    let parsed = {
        let mut stream = std::io::BufReader::with_capacity(64 * 1024, &mut hashing);
        let parsed = each_ref_from(&mut stream, each);
        // The rest, for the digest, whatever the parser made of it.
        std::io::copy(&mut stream, &mut std::io::sink())
            .with_context(|| format!("cannot read the baseline's refs {}", path.display()))?;
        parsed
    };
    check_digest(path, &hashing, digest)?;
    parsed.with_context(|| format!("the baseline's refs {} are malformed", path.display()))
}

/// The refs of a refs file's text, handed to `each` as [`each_ref_in`]
/// hands them, the digest aside. Public for the fuzz target.
pub fn each_ref_from(
    input: impl std::io::BufRead,
    each: &mut dyn FnMut(&BStr, &BStr),
) -> Result<()> {
    use crate::repo::refname::decoded;
    let mut previous: Option<Vec<u8>> = None;
    refs_reader::each_pair(input, &mut |name, value| {
        let (key, value) = (decoded(name)?, decoded(value)?);
        match &mut previous {
            Some(p) if p.as_slice() >= &*key => {
                bail!("ref {name:?} is out of name order or repeated")
            }
            Some(p) => {
                p.clear();
                p.extend_from_slice(&key);
            }
            None => previous = Some(key.to_vec()),
        }
        each(key.as_bstr(), value.as_bstr());
        Ok(())
    })
}

/// A check of [`REFS_FILE_NAME`] against its digest
/// ([`Baseline::refs_file_check`]).
#[derive(Debug)]
pub struct RefsFileCheck {
    path: PathBuf,
    digest: String,
}

impl RefsFileCheck {
    /// Reads the file to its end, hashing it as it streams past (100,000
    /// refs are 8 MB not held), and compares.
    pub fn run(&self) -> Result<()> {
        let mut hashing = open_hashing(&self.path)?;
        std::io::copy(&mut hashing, &mut std::io::sink())
            .with_context(|| format!("cannot read the baseline's refs {}", self.path.display()))?;
        check_digest(&self.path, &hashing, &self.digest)
    }
}

/// A check of the loose refs listed at arm against their digest
/// ([`Baseline::loose_list_check`]).
#[derive(Debug)]
pub struct LooseListCheck {
    state: PathBuf,
    digest: String,
}

impl LooseListCheck {
    /// Streams the list through its hash and compares.
    pub fn run(&self) -> Result<()> {
        crate::repo::loose_at_arm::Records::check(&self.state, &self.digest)
    }
}

impl crate::repo::refs_since_arm::LooseList for Baseline {
    fn loose_list(&self) -> Result<Option<&crate::repo::loose_at_arm::Records>> {
        Baseline::loose_list(self)
    }
}

/// The refs file at `path`, open to be hashed as it is read, at most one
/// byte over [`MAX_REFS_FILE`].
fn open_hashing(path: &Path) -> Result<crate::digest::Hashing<std::io::Take<std::fs::File>>> {
    use std::io::Read;
    let file = crate::fsutil::open_regular(path)
        .with_context(|| format!("cannot read the baseline's refs {}", path.display()))?;
    Ok(crate::digest::Hashing::new(file.take(MAX_REFS_FILE + 1)))
}

/// Whether the refs file read through `hashing` to its end is the one arm
/// wrote, of digest `digest`.
fn check_digest(
    path: &Path,
    hashing: &crate::digest::Hashing<std::io::Take<std::fs::File>>,
    digest: &str,
) -> Result<()> {
    if hashing.read() > MAX_REFS_FILE {
        bail!(
            "the baseline's refs {} are larger than {MAX_REFS_FILE} bytes",
            path.display()
        );
    }
    if hashing.digest() != digest {
        bail!(
            "the baseline's refs {} fail their integrity check: corrupted or edited after arm",
            path.display()
        );
    }
    Ok(())
}

/// Largest refs file read back: 100,000 refs take about 10 MB.
const MAX_REFS_FILE: u64 = 1 << 30;

fn integrity_of(baseline: &Baseline) -> String {
    let body = serde_json::to_string(baseline).expect("baseline is plain data");
    format!("sha256:{}", sha256_hex(body.as_bytes()))
}

/// File name `disarm` gives the record, so `verify` still works after a
/// clean disarm while hooks (which read only [`FILE_NAME`]) see no state.
pub const RETIRED_FILE_NAME: &str = "baseline.disarmed.json";

/// Path of the live record in a state directory.
pub fn path_in(state: &Path) -> PathBuf {
    state.join(FILE_NAME)
}

/// Path of the retired record in a state directory.
pub fn retired_path_in(state: &Path) -> PathBuf {
    state.join(RETIRED_FILE_NAME)
}

/// The message for a record of another schema: grantguard.baseline/1 did
/// not record the object store, so verify could not prove what was written
/// to it since arm.
fn too_old(path: &Path, schema: &str) -> String {
    format!(
        "the baseline {} has schema {schema:?}, expected {SCHEMA:?}; a record of an older \
         grantguard lacks the object-store inventory verify needs: disarm and arm again \
         (re-arm) to record a new baseline",
        path.display()
    )
}

impl Baseline {
    /// Every ref under `refs/` at arm and its raw value. Read (and checked
    /// against [`Baseline::ref_list`]) from the state directory on first
    /// use; an unreadable or altered file is an error, never an empty map.
    pub fn refs(&self) -> Result<&RefMap> {
        if let Some(refs) = self.refs.loaded.get() {
            return Ok(refs);
        }
        // The one reader of the file, as `for_each_ref` reads it.
        let mut refs = RefMap::new();
        each_ref_in(&self.refs_file_path()?, &self.ref_list, &mut |n, v| {
            refs.insert(n.to_owned(), v.to_owned());
        })?;
        Ok(self.refs.loaded.get_or_init(|| refs))
    }

    /// The refs of [`Baseline::refs`] named in `names`, with their values
    /// at arm (a name absent at arm is absent here): the file is streamed
    /// and checked as [`Baseline::for_each_ref`] does, and only these are
    /// kept. What a hook needs to judge the few refs a transaction moves:
    /// a map of 100,000 refs was two fifths of such a call (issue 29).
    pub fn refs_named(&self, names: &std::collections::BTreeSet<&BStr>) -> Result<RefMap> {
        let mut found = RefMap::new();
        self.for_each_ref(&mut |name, value| {
            if names.contains(name) {
                found.insert(name.to_owned(), value.to_owned());
            }
        })?;
        Ok(found)
    }

    /// Where [`REFS_FILE_NAME`] is.
    fn refs_file_path(&self) -> Result<PathBuf> {
        let state =
            self.refs.state.as_deref().context(
                "the baseline's refs were neither given nor read from a state directory",
            )?;
        Ok(state.join(REFS_FILE_NAME))
    }

    /// The loose refs arm listed with their files' identities (see
    /// [`crate::repo::loose_at_arm`]), read from the state directory and
    /// checked against their digest in [`Baseline::packed_at_arm`] on
    /// first use; `None` when arm listed none.
    pub fn loose_list(&self) -> Result<Option<&crate::repo::loose_at_arm::Records>> {
        let Some(digest) = self
            .packed_at_arm
            .as_ref()
            .and_then(|p| p.loose_list.as_deref())
        else {
            return Ok(None);
        };
        if let Some(listed) = self.refs.listed.get() {
            return Ok(Some(listed));
        }
        let state = self.refs.state.as_deref().context(
            "the baseline's loose refs were neither given nor read from a state directory",
        )?;
        let listed = crate::repo::loose_at_arm::Records::read(state, digest)?;
        Ok(Some(self.refs.listed.get_or_init(|| listed)))
    }

    /// The check of the loose refs listed at arm against their digest,
    /// without parsing them, a job for another thread (as
    /// [`Baseline::refs_file_check`]): [`Baseline::loose_list`] reads the
    /// list only when verify needs it. `None` when there is no list, or it
    /// was read (and checked) already.
    pub fn loose_list_check(&self) -> Result<Option<LooseListCheck>> {
        let Some(digest) = self
            .packed_at_arm
            .as_ref()
            .and_then(|p| p.loose_list.clone())
        else {
            return Ok(None);
        };
        if self.refs.listed.get().is_some() {
            return Ok(None);
        }
        let state = self.refs.state.clone().context(
            "the baseline's loose refs were neither given nor read from a state directory",
        )?;
        Ok(Some(LooseListCheck { state, digest }))
    }

    /// What arm recorded of the refs for
    /// [`crate::repo::refs_since_arm::read`]; `None` when it recorded
    /// nothing that lets verify read fewer than every ref. The loose refs
    /// listed at arm are read when that read needs them.
    pub fn refs_at_arm(&self) -> Option<crate::repo::refs_since_arm::AtArm<'_>> {
        let packed = self.packed_at_arm.as_ref()?;
        Some(crate::repo::refs_since_arm::AtArm {
            packed,
            listed: self,
            copy: &self.refs.packed_copy,
        })
    }

    /// Hands every ref of [`Baseline::refs`] to `each`, in name order,
    /// without a map of them when they are still on disk: the file is read
    /// entry by entry as it streams past, hashed on the way, and checked
    /// against [`Baseline::ref_list`] at its end; its bytes are never held
    /// (they were a third of verify's peak with 100,000 refs, issue 29). An
    /// unreadable, altered or malformed file is an error, and `each` may
    /// have been called before it was found so: a caller must drop what
    /// `each` gathered on an error. (verify checks the digest at the start,
    /// so only a file changed since fails here, and verify then reports
    /// the repository as unreadable.)
    pub fn for_each_ref(&self, each: &mut dyn FnMut(&BStr, &BStr)) -> Result<()> {
        if let Some(refs) = self.refs.loaded.get() {
            refs.iter()
                .for_each(|(n, v)| each(n.as_bstr(), v.as_bstr()));
            return Ok(());
        }
        each_ref_in(&self.refs_file_path()?, &self.ref_list, each)
    }

    /// Drops the loose refs [`Baseline::loose_list`] read and arm's copy
    /// of `packed-refs` (see [`Baseline::refs_at_arm`]), for a verify that
    /// reads every ref and needs them no more; read again on next use.
    pub fn release_refs_at_arm(&mut self) {
        self.refs.listed.take();
        self.refs.packed_copy.release();
    }

    /// The check of [`REFS_FILE_NAME`] against [`Baseline::ref_list`]
    /// without parsing it, a job for another thread: what verify needs
    /// when it reads only the refs that can have moved (see
    /// [`Baseline::packed_at_arm`]), so that a damaged record is still
    /// refused as one. `None` when the refs are not in a file (given, or
    /// already read and checked).
    pub fn refs_file_check(&self) -> Result<Option<RefsFileCheck>> {
        if self.refs.loaded.get().is_some() {
            return Ok(None);
        }
        Ok(Some(RefsFileCheck {
            path: self.refs_file_path()?,
            digest: self.ref_list.clone(),
        }))
    }

    /// Writes the record atomically into `state`, its refs first (see
    /// [`REFS_FILE_NAME`]).
    pub fn write(&mut self, state: &Path) -> Result<()> {
        let refs = self.refs()?;
        let mut bytes =
            serde_json::to_vec(&RefsFile { refs: refs.clone() }).expect("refs are plain data");
        bytes.push(b'\n');
        crate::fsutil::write_atomic(&state.join(REFS_FILE_NAME), &bytes)?;
        self.ref_list = format!("sha256:{}", sha256_hex(&bytes));
        let envelope = Envelope {
            integrity: integrity_of(self),
            baseline: self.clone(),
        };
        let mut text = serde_json::to_string_pretty(&envelope).expect("baseline is plain data");
        text.push('\n');
        crate::fsutil::write_atomic(&path_in(state), text.as_bytes())
    }

    /// Reads and checks the live record in `state`.
    pub fn read(state: &Path) -> Result<(Baseline, Grant)> {
        Baseline::read_file(&path_in(state))
    }

    /// Reads the live record, or the retired one after a clean `disarm`
    /// (then `armed` is false and [`Baseline::expected_metadata`] is the
    /// pre-arm metadata).
    pub fn read_live_or_retired(state: &Path) -> Result<(Baseline, Grant, bool)> {
        let live = path_in(state);
        let retired = retired_path_in(state);
        if !live.exists() && retired.exists() {
            let (b, g) = Baseline::read_file(&retired)?;
            return Ok((b, g, false));
        }
        let (b, g) = Baseline::read_file(&live)?;
        Ok((b, g, true))
    }

    /// The protected metadata `verify` expects: as armed while the hooks are
    /// installed, as before arming after `disarm`.
    pub fn expected_metadata(&self, armed: bool) -> &BTreeMap<String, String> {
        if armed {
            &self.metadata
        } else {
            &self.metadata_before_arm
        }
    }

    fn read_file(path: &Path) -> Result<(Baseline, Grant)> {
        // Never blocks on a FIFO planted in the state directory.
        let text = crate::fsutil::read_regular_to_string(path).with_context(|| {
            format!(
                "cannot read the baseline {}; is the repository armed with this --state?",
                path.display()
            )
        })?;
        let envelope: Envelope = match serde_json::from_str(&text) {
            Ok(envelope) => envelope,
            Err(e) => {
                // A record of an older schema does not parse as this one:
                // say so, rather than that it is malformed.
                let schema = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["baseline"]["schema"].as_str().map(str::to_owned));
                if let Some(old) = schema.filter(|s| s != SCHEMA) {
                    bail!(too_old(path, &old));
                }
                return Err(e)
                    .with_context(|| format!("the baseline {} is malformed", path.display()));
            }
        };
        let mut baseline = envelope.baseline;
        baseline.refs.state = path.parent().map(Path::to_path_buf);
        if let Some(state) = path.parent() {
            baseline.refs.packed_copy = crate::repo::refs_since_arm::ArmCopy::in_dir(state);
        }
        if baseline.schema != SCHEMA {
            bail!(too_old(path, &baseline.schema));
        }
        if integrity_of(&baseline) != envelope.integrity {
            bail!(
                "the baseline {} fails its integrity check: it was corrupted or edited after arm",
                path.display()
            );
        }
        let value: Value =
            serde_json::from_str(&baseline.grant).context("the baseline's grant is not JSON")?;
        let grant = Grant::from_value(&value, "grant").map_err(|errors| {
            let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
            anyhow::anyhow!("the baseline's grant is invalid: {}", list.join("; "))
        })?;
        if grant.id() != baseline.grant_id || grant.canonical() != baseline.grant {
            bail!("the baseline's grant does not match its recorded id");
        }
        if let Some(commit) = &baseline.commit {
            crate::repo::parse_id(commit).context("the baseline's commit is malformed")?;
        }
        Ok((baseline, grant))
    }

    /// The baseline commit as an object id.
    pub fn commit_id(&self) -> Option<gix::ObjectId> {
        self.commit
            .as_deref()
            .map(|c| crate::repo::parse_id(c).expect("checked when the baseline was read"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries [`each_ref_from`] hands over for the text of a refs
    /// file.
    fn entries(json: &[u8]) -> std::result::Result<Vec<(BString, BString)>, String> {
        let mut out = Vec::new();
        each_ref_from(json, &mut |n, v| out.push((n.to_owned(), v.to_owned())))
            .map_err(|e| format!("{e:#}"))?;
        Ok(out)
    }

    /// What serde_json makes of the text of a refs file, entry by entry:
    /// the reader verify used before [`refs_reader`], kept as its oracle.
    /// The same rules: the one field `refs`, a map of strings decoded by
    /// [`crate::repo::refname::decode`], names strictly increasing.
    fn serde_entries(json: &[u8]) -> std::result::Result<Vec<(BString, BString)>, String> {
        use serde::de::{DeserializeSeed, Error, MapAccess, Visitor};
        type Pairs = Vec<(BString, BString)>;
        struct File<'a>(&'a mut Pairs);
        struct Refs<'a>(&'a mut Pairs);
        impl<'de> DeserializeSeed<'de> for File<'_> {
            type Value = ();
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_map(self)
            }
        }
        impl<'de> Visitor<'de> for File<'_> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object with the one field \"refs\"")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<(), A::Error> {
                let mut out = Some(self.0);
                while let Some(field) = fields.next_key::<std::borrow::Cow<'de, str>>()? {
                    if field != "refs" {
                        return Err(A::Error::unknown_field(&field, &["refs"]));
                    }
                    let out = out
                        .take()
                        .ok_or_else(|| A::Error::duplicate_field("refs"))?;
                    fields.next_value_seed(Refs(out))?;
                }
                match out {
                    Some(_) => Err(A::Error::missing_field("refs")),
                    None => Ok(()),
                }
            }
        }
        impl<'de> DeserializeSeed<'de> for Refs<'_> {
            type Value = ();
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_map(self)
            }
        }
        impl<'de> Visitor<'de> for Refs<'_> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of ref names to values, in name order")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
                use crate::repo::refname::decode;
                while let Some((k, v)) = entries
                    .next_entry::<std::borrow::Cow<'de, str>, std::borrow::Cow<'de, str>>()?
                {
                    let key = decode(&k).map_err(A::Error::custom)?;
                    let value = decode(&v).map_err(A::Error::custom)?;
                    if self.0.last().is_some_and(|(p, _)| *p >= key) {
                        return Err(A::Error::custom("out of name order or repeated"));
                    }
                    self.0.push((key, value));
                }
                Ok(())
            }
        }
        let mut out = Vec::new();
        let mut de = serde_json::Deserializer::from_slice(json);
        File(&mut out)
            .deserialize(&mut de)
            .and_then(|()| de.end())
            .map_err(|e| e.to_string())?;
        Ok(out)
    }

    /// Bytes near the refs files arm writes: pieces of them, JSON's every
    /// escape and whitespace, and bytes that no file should hold.
    fn near_refs_files() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        const PIECES: &[&[u8]] = &[
            b"{",
            b"}",
            b"\"",
            b"\"refs\"",
            b":",
            b",",
            b" ",
            b"\n\t\r",
            b"\x0c",
            b"refs/heads/a",
            b"refs/tags/b",
            b"hex:ff",
            b"hex:e9",
            b"1111111111111111111111111111111111111111",
            b"ref:refs/heads/a",
            b"\\",
            b"\\\"",
            b"\\/\\b\\f\\n\\r\\t",
            b"\\u0041",
            b"\\u00e9",
            b"\\ud83d\\ude00",
            b"\\ud83d",
            b"\\ude00",
            b"\\uD83D\\uDE00",
            b"\\u12",
            b"\\x",
            "caf\u{e9}".as_bytes(),
            b"\xc3",
            b"\xff",
            b"\x01",
            b"\x7f",
            b"[]",
            b"1",
            b"null",
        ];
        let piece = proptest::sample::select(PIECES);
        let shaped = proptest::collection::vec(piece.clone(), 0..24).prop_map(|p| p.concat());
        // A name inside a well-formed file, so that every escape is read
        // as part of one (after "z": in name order after the first).
        let framed = proptest::collection::vec(piece, 0..12).prop_map(|middle| {
            let mut out = b"{\"refs\":{\"refs/a\":\"1\",\"z".to_vec();
            out.extend_from_slice(&middle.concat());
            out.extend_from_slice(b"\":\"2\"}}");
            out
        });
        // A file arm could write, one byte of it replaced, dropped or
        // doubled.
        let written = (
            proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..6),
                proptest::collection::vec(any::<u8>(), 0..6),
                0..4,
            ),
            any::<bool>(),
            any::<proptest::sample::Index>(),
            0u8..3,
            any::<u8>(),
        )
            .prop_map(|(refs, pretty, at, how, byte)| {
                let refs = refs
                    .into_iter()
                    .map(|(n, v)| (n.into(), v.into()))
                    .collect();
                let file = RefsFile { refs };
                let mut out = if pretty {
                    serde_json::to_vec_pretty(&file).unwrap()
                } else {
                    serde_json::to_vec(&file).unwrap()
                };
                let at = at.index(out.len());
                match how {
                    0 => out[at] = byte,
                    1 => drop(out.remove(at)),
                    _ => out.insert(at, out[at]),
                }
                out
            });
        prop_oneof![
            shaped,
            framed,
            written,
            proptest::collection::vec(any::<u8>(), 0..40)
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// The streaming reader accepts what serde_json accepts, and hands
        /// over the same entries, for any bytes near a refs file.
        #[test]
        fn the_refs_reader_reads_as_serde_json_does(bytes in near_refs_files()) {
            let ours = entries(&bytes);
            let theirs = serde_entries(&bytes);
            proptest::prop_assert_eq!(ours.is_ok(), theirs.is_ok(), "ours {:?}, serde_json {:?}, of {:?}",
                ours, theirs, bytes.as_bstr());
            if let (Ok(ours), Ok(theirs)) = (ours, theirs) {
                proptest::prop_assert_eq!(ours, theirs);
            }
        }

        /// Every map of refs arm can write reads back as it was written,
        /// whatever the bytes of the names and values, through a buffer
        /// small enough to split strings and escapes.
        #[test]
        fn every_refs_file_arm_writes_reads_back(
            refs in proptest::collection::btree_map(
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
                0..12,
            ),
            capacity in 1usize..16,
        ) {
            let refs: RefMap = refs.into_iter().map(|(n, v)| (n.into(), v.into())).collect();
            let json = serde_json::to_vec_pretty(&RefsFile { refs: refs.clone() }).unwrap();
            let mut read = RefMap::new();
            let stream = std::io::BufReader::with_capacity(capacity, json.as_slice());
            each_ref_from(stream, &mut |n, v| {
                read.insert(n.to_owned(), v.to_owned());
            })
            .unwrap();
            proptest::prop_assert_eq!(&read, &refs);
            proptest::prop_assert_eq!(serde_entries(&json).unwrap().into_iter().collect::<RefMap>(), refs);
        }
    }

    /// [`each_ref_in`] of a file holding `bytes`, checked against `digest`
    /// (`None`: the digest of `bytes`).
    fn streamed(bytes: &[u8], digest: Option<&str>) -> std::result::Result<RefMap, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REFS_FILE_NAME);
        std::fs::write(&path, bytes).unwrap();
        let digest = digest.map_or_else(|| format!("sha256:{}", sha256_hex(bytes)), String::from);
        let mut out = RefMap::new();
        each_ref_in(&path, &digest, &mut |n, v| {
            out.insert(n.to_owned(), v.to_owned());
        })
        .map_err(|e| format!("{e:#}"))?;
        Ok(out)
    }

    #[test]
    fn a_refs_file_streamed_is_checked_against_its_digest_at_its_end() {
        // Many entries: more than one read of the stream.
        let refs: RefMap = (0..20_000)
            .map(|i| {
                (
                    BString::from(format!("refs/tags/t{i:05}")),
                    BString::from("1111111111111111111111111111111111111111"),
                )
            })
            .chain([(BString::from(&b"refs/tags/\xff"[..]), BString::from("2222"))])
            .collect();
        let mut bytes = serde_json::to_vec(&RefsFile { refs: refs.clone() }).unwrap();
        bytes.push(b'\n');
        assert_eq!(streamed(&bytes, None).unwrap(), refs);
        // One value changed, the file still well-formed: the digest says so.
        let text = String::from_utf8(bytes.clone()).unwrap();
        let edited = text.replacen("1111", "3333", 1);
        let digest = format!("sha256:{}", sha256_hex(&bytes));
        let err = streamed(edited.as_bytes(), Some(&digest)).unwrap_err();
        assert!(err.contains("integrity check"), "{err}");
        // Cut short: the integrity check speaks first...
        let err = streamed(&bytes[..bytes.len() / 2], Some(&digest)).unwrap_err();
        assert!(err.contains("integrity check"), "{err}");
        // ...and a file arm could not have written is malformed even when
        // its digest is its own: cut short, or with bytes after the object.
        let err = streamed(&bytes[..bytes.len() / 2], None).unwrap_err();
        assert!(err.contains("malformed"), "{err}");
        let mut trailing = bytes.clone();
        trailing.extend_from_slice(b"{}");
        let err = streamed(&trailing, None).unwrap_err();
        assert!(err.contains("malformed"), "{err}");
        // Not a regular file: not read.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = each_ref_in(&fifo, &digest, &mut |_, _| {}).unwrap_err();
        assert!(format!("{err:#}").contains("cannot read"), "{err:#}");
    }

    #[test]
    fn a_refs_file_is_read_entry_by_entry_as_the_map_reads_it() {
        let refs: RefMap = [
            (&b"refs/heads/caf\xe9"[..], &b"1111"[..]),
            (b"refs/heads/main", b"ref:refs/heads/x"),
            (b"refs/tags/v1", b"2222"),
            // Encoded as `hex:...`, which sorts before every name above:
            // the file is in the order of the names, not of their text.
            (b"refs/tags/\xff", b"3333"),
        ]
        .into_iter()
        .map(|(n, v)| (BString::from(n), BString::from(v)))
        .collect();
        let json = serde_json::to_string(&RefsFile { refs: refs.clone() }).unwrap();
        let read: RefMap = entries(json.as_bytes()).unwrap().into_iter().collect();
        assert_eq!(read, refs);
        let parsed: RefsFile = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed.refs, refs);
        assert_eq!(entries(br#"{"refs": {}}"#).unwrap(), []);
    }

    #[test]
    fn a_refs_file_out_of_order_repeated_or_misshapen_is_refused() {
        for (json, why) in [
            (
                r#"{"refs": {"refs/b": "1", "refs/a": "1"}}"#,
                "out of name order",
            ),
            (
                r#"{"refs": {"refs/a": "1", "refs/a": "2"}}"#,
                "out of name order",
            ),
            (r#"{"refs": {"refs/a": "hex:zz"}}"#, ""),
            (r#"{"refs": {}, "more": 1}"#, "unknown field"),
            (r#"{"refs": {}, "refs": {}}"#, "duplicate field"),
            (r#"{}"#, "missing field"),
            (r#"{"refs": []}"#, ""),
            (r#"{"refs": {}} trailing"#, ""),
        ] {
            let error = entries(json.as_bytes()).expect_err(json);
            assert!(error.contains(why), "{json}: {error}");
        }
    }
}
