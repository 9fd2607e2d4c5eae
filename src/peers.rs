//! Peers: the other worktrees of the repository armed in the same hub,
//! whose branches and worktree entries this `verify` leaves to them.
//!
//! Each verify judges its own branch and every ref no other armed worktree
//! owns. Another worktree's branch moving is excused only when that
//! worktree accounts for it:
//!
//! - its hub entry names a state directory whose baseline (live or
//!   retired) is of this repository, that worktree's git dir and that
//!   branch: an entry alone proves nothing;
//! - when it was armed after this worktree, its baseline commit is a value
//!   this worktree's baseline had for the branch (or one a peer released it
//!   at), so an agent cannot move a branch first and have a later arm adopt
//!   the move; a branch created after this arm (`git worktree add -b` by
//!   the harness) is the new worktree's from its start;
//! - it is armed now (its own verify judges the branch), or, once released,
//!   the branch still has the value it had at its disarm.
//!
//! Anything else stays a `ref_changed` of this verify. The same peers
//! excuse their linked worktree's entry (`git worktree add` and `remove`
//! by the harness around their runs) in the protected metadata.
//!
//! While armed, peers are read from the hub; `disarm` keeps a snapshot
//! ([`SNAPSHOT`]) for a verify after it.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};
use gix::bstr::{BStr, BString};
use serde::{Deserialize, Serialize};

use crate::baseline::Baseline;
use crate::hooks::hub::{self, Entry, Hub};
use crate::repo::refname;

/// The file in a state directory holding the peers at disarm.
pub const SNAPSHOT: &str = "peers.json";
/// The file in a state directory holding the last verdict of `verify`
/// while armed beside peers ([`Verdict`]).
pub const VERDICT: &str = "verdict.json";

/// What the last `verify` of an armed worktree decided, and on which
/// branch value. `disarm` releases the branch at the value verify
/// *accepted*, not at whatever it holds by then: other agents are still
/// running between this worktree's verify and its disarm, and a move they
/// made in that window must stay a change their own verifies judge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// Whether verify accepted.
    pub accepted: bool,
    /// The branch value it judged (encoded), `None` for an unborn branch.
    pub branch_value: Option<String>,
}

impl Verdict {
    /// Records it, when the state belongs to a hub (a worktree armed
    /// alone has no peers to protect).
    pub fn record(state: &Path, verdict: &Verdict) -> Result<()> {
        if hub::Link::read(state)?.is_none() {
            return Ok(());
        }
        crate::fsutil::write_atomic(
            &state.join(VERDICT),
            serde_json::to_string(verdict)
                .expect("plain data")
                .as_bytes(),
        )
    }

    /// The last recorded verdict, if any.
    pub fn read(state: &Path) -> Result<Option<Verdict>> {
        match crate::fsutil::read_regular(&state.join(VERDICT)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .with_context(|| format!("{VERDICT} in {} is malformed", state.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).context("cannot read the last verdict"),
        }
    }
}

/// This worktree's hub entry and every other one, armed or released.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// This worktree's entry.
    pub own: Entry,
    /// Every other entry of the hub.
    pub others: Vec<Entry>,
}

impl Snapshot {
    /// Reads the hub as it is now, around `own`.
    pub fn take(hub: &Hub, own: &Entry) -> Result<Snapshot> {
        let own_key = hub::key(&own.git_dir);
        let mut others: Vec<Entry> = hub
            .armed()?
            .into_iter()
            .filter(|e| hub::key(&e.git_dir) != own_key)
            .collect();
        // Released entries include earlier arms of this very worktree.
        others.extend(
            hub.released()?
                .into_iter()
                .filter(|e| hub::key(&e.git_dir) != own_key),
        );
        Ok(Snapshot {
            own: own.clone(),
            others,
        })
    }

    /// Keeps it in the state directory (atomically).
    pub fn write(&self, state: &Path) -> Result<()> {
        crate::fsutil::write_atomic(
            &state.join(SNAPSHOT),
            serde_json::to_string_pretty(self)
                .expect("plain data")
                .as_bytes(),
        )
    }

    /// The peers `verify` of `state` judges with: from the hub while armed
    /// (its link in the state directory), from the snapshot after disarm.
    /// `None`: the worktree was armed alone, or by an older grantguard.
    pub fn for_verify(state: &Path, armed: bool) -> Result<Option<Snapshot>> {
        if !armed {
            return match crate::fsutil::read_regular(&state.join(SNAPSHOT)) {
                Ok(bytes) => serde_json::from_slice(&bytes)
                    .map(Some)
                    .with_context(|| format!("{SNAPSHOT} in {} is malformed", state.display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e).context("cannot read the peers snapshot"),
            };
        }
        let Some(link) = hub::Link::read(state)? else {
            return Ok(None);
        };
        let hub = Hub::at(&link.hub);
        let own = hub.entry(&link.key)?.with_context(|| {
            format!(
                "this worktree has no entry in its hub {}: the hub was changed behind \
                 grantguard's back",
                link.hub.display()
            )
        })?;
        Snapshot::take(&hub, &own).map(Some)
    }
}

/// The linked worktrees peers own (see [`Peers::worktrees`]).
#[derive(Debug, Default)]
pub struct PeerWorktrees {
    common_dir: std::path::PathBuf,
    /// Hex name to the admin identities recorded by the peers with it.
    names: std::collections::BTreeMap<String, Vec<Option<hub::Identity>>>,
    /// This worktree's place in the hub's order of arms.
    own_seq: u64,
    /// Each peer's `config.worktree` (see [`PeerConfig`]).
    configs: Vec<PeerConfig>,
}

/// What this verify knows of a peer's `config.worktree`.
#[derive(Clone, Debug)]
struct PeerConfig {
    git_dir: std::path::PathBuf,
    /// The identity of its admin directory at arm (linked worktrees).
    admin: Option<hub::Identity>,
    armed_seq: u64,
    /// Whether it is armed still: its arm may have written the file, and
    /// its own verify judges it.
    armed: bool,
    /// The digest its arm found before writing, which its disarm restores
    /// (what its baseline expects after disarm).
    before: Option<String>,
}

impl PeerWorktrees {
    /// Whether the linked worktree `hex_name` appearing or going since arm
    /// is a peer's doing: gone, any peer with that name accounts for it;
    /// present, only the very admin directory a peer was armed in (an agent
    /// can re-add a removed peer's name).
    pub fn accounts_for(&self, hex_name: &str, present: bool) -> bool {
        let Some(identities) = self.names.get(hex_name) else {
            return false;
        };
        if !present {
            return true;
        }
        let Some(name) = crate::digest::unhex(hex_name) else {
            return false;
        };
        use std::os::unix::ffi::OsStrExt;
        let dir = self
            .common_dir
            .join("worktrees")
            .join(std::ffi::OsStr::from_bytes(&name));
        let now = Entry::identity_of(&dir);
        now.is_some() && identities.contains(&now)
    }

    /// Whether another worktree's `config.worktree`, `before` at this
    /// worktree's arm (`None`: the worktree was not there) and `now` (both
    /// metadata digests), changed by a peer's doing: `None` when no peer
    /// was armed in the worktree whose git dir is `git_dir` (for a linked
    /// one, in that very admin directory). A peer accounts for it when it
    /// took the file as this worktree's arm left it (armed before it, or
    /// finding at its own arm what this arm recorded: red team, fifty-ninth
    /// stop, a file planted before a peer's arm was adopted by it), and is
    /// armed still, or `now` is what its disarm restored. A worktree added
    /// after this arm is taken as the peer's arm found it.
    pub fn accounts_for_config(
        &self,
        git_dir: &Path,
        before: Option<&str>,
        now: &str,
    ) -> Option<bool> {
        let linked = git_dir != self.common_dir;
        let mut owners = self
            .configs
            .iter()
            .filter(|c| {
                c.git_dir == git_dir
                    && (!linked
                        || c.admin
                            .is_some_and(|a| Entry::identity_of(git_dir) == Some(a)))
            })
            .peekable();
        owners.peek()?;
        Some(owners.any(|c| {
            let adopted_in_time =
                c.armed_seq < self.own_seq || before.is_none() || before == c.before.as_deref();
            adopted_in_time && (c.armed || c.before.as_deref() == Some(now))
        }))
    }
}

/// A peer whose entry its own baseline confirms.
#[derive(Debug)]
struct Peer {
    entry: Entry,
    /// The branch's value in its baseline (encoded), `None` for an unborn
    /// branch.
    baseline_value: Option<String>,
    /// The digest of its `config.worktree` before its arm, which its
    /// disarm restores.
    config_before_arm: Option<String>,
}

/// The confirmed peers of one verify.
#[derive(Debug, Default)]
pub struct Peers {
    own_seq: u64,
    peers: Vec<Peer>,
    /// Entries that could not be confirmed, for the result's warnings.
    pub unconfirmed: Vec<String>,
}

impl Peers {
    /// Confirms each entry of `snapshot` against its state's baseline.
    pub fn confirm(snapshot: Option<Snapshot>, baseline: &Baseline) -> Peers {
        let Some(snapshot) = snapshot else {
            return Peers::default();
        };
        let mut out = Peers {
            own_seq: snapshot.own.armed_seq,
            ..Peers::default()
        };
        for entry in snapshot.others {
            match confirm(&entry, baseline) {
                Ok((baseline_value, config_before_arm)) => out.peers.push(Peer {
                    entry,
                    baseline_value,
                    config_before_arm,
                }),
                Err(e) => out.unconfirmed.push(format!(
                    "the hub entry of {} is not confirmed by its state ({e:#}); its branch is \
                     judged as any other ref",
                    entry.work_dir.display()
                )),
            }
        }
        out.peers
            .sort_by_key(|p| (p.entry.armed_seq, p.entry.released_seq));
        out
    }

    /// Whether other worktrees were armed beside this one at all.
    pub fn any(&self) -> bool {
        !self.peers.is_empty()
    }

    /// Whether a worktree armed beside this one (still, or released since)
    /// owns the branch `encoded` (a ref name as the baseline encodes it):
    /// changes to it are judged by the rules for peers' branches, never
    /// excused as "nobody's".
    pub fn own_branch(&self, encoded: &str) -> bool {
        self.peers.iter().any(|p| p.entry.branch == encoded)
    }

    /// The other armed worktrees, for a result that may be theirs to
    /// answer for: each worktree, its granted branch and its state
    /// directory (at most [`crate::result::MAX_LISTED`]).
    pub fn describe(&self) -> Vec<serde_json::Value> {
        self.peers
            .iter()
            .filter(|p| p.entry.released_seq.is_none())
            .take(crate::result::MAX_LISTED)
            .map(|p| {
                serde_json::json!({
                    "work_dir": p.entry.work_dir.display().to_string(),
                    "branch": p.entry.branch,
                    "state": p.entry.state.display().to_string(),
                })
            })
            .collect()
    }

    /// Whether the change of ref `name` from `before` to `now` is a peer's
    /// to judge (see the module docs).
    pub fn excuse_ref(&self, name: &BStr, before: Option<&BString>, now: Option<&BString>) -> bool {
        let encoded = refname::encode(name);
        let before = before.map(|v| refname::encode(v));
        let now = now.map(|v| refname::encode(v));
        let mut accounted = vec![before.clone()];
        let mut owned_now = false;
        let mut last_release: Option<(u64, Option<String>)> = None;
        for peer in self.peers.iter().filter(|p| p.entry.branch == encoded) {
            let adopted_in_time = peer.entry.armed_seq < self.own_seq
                || before.is_none()
                || accounted.contains(&peer.baseline_value);
            if !adopted_in_time {
                continue;
            }
            match peer.entry.released_seq {
                None => owned_now = true,
                Some(released) if released > self.own_seq => {
                    accounted.push(peer.entry.final_value.clone());
                    if last_release.as_ref().is_none_or(|(seq, _)| released > *seq) {
                        last_release = Some((released, peer.entry.final_value.clone()));
                    }
                }
                Some(_) => {}
            }
        }
        owned_now || last_release.is_some_and(|(_, value)| value == now)
    }

    /// The branches of the peers armed now (decoded): their agents may move
    /// them while this verify reads.
    pub fn in_flight(&self) -> BTreeSet<BString> {
        self.peers
            .iter()
            .filter(|p| p.entry.released_seq.is_none())
            .filter_map(|p| refname::decode(&p.entry.branch).ok())
            .collect()
    }

    /// The linked worktrees of the confirmed peers, by name (hex-encoded,
    /// as the `worktrees` metadata value lists them), with their admin
    /// directory's identity at arm.
    pub fn worktrees(&self, common_dir: &Path) -> PeerWorktrees {
        let mut out = PeerWorktrees::default();
        for p in &self.peers {
            // Any peer's worktree may go (a harness removes finished
            // worktrees while others run: red team, fifty-ninth stop).
            if let Some(name) = p.entry.worktree_name(common_dir) {
                out.names
                    .entry(crate::digest::hex(name.as_bytes()))
                    .or_default()
                    .push(p.entry.admin);
            }
            // A peer released before this worktree's arm changed no config
            // since: its file is in this baseline as it was (red team, same
            // stop: such a peer excused a config put back to its own
            // before-arm text).
            if p.entry.released_seq.is_some_and(|r| r < self.own_seq) {
                continue;
            }
            out.configs.push(PeerConfig {
                git_dir: p.entry.git_dir.clone(),
                admin: p.entry.admin,
                armed_seq: p.entry.armed_seq,
                armed: p.entry.released_seq.is_none(),
                before: p.config_before_arm.clone(),
            });
        }
        out.own_seq = self.own_seq;
        out.common_dir = common_dir.to_path_buf();
        out
    }
}

/// The peer's baseline value of its branch, and the digest of its
/// `config.worktree` before its arm, once its state confirms the entry.
fn confirm(entry: &Entry, own: &Baseline) -> Result<(Option<String>, Option<String>)> {
    let (theirs, _, _) = Baseline::read_live_or_retired(&entry.state)?;
    let same = theirs.repo.common_dir == own.repo.common_dir
        && theirs.repo.git_dir == entry.git_dir
        && refname::encode(&theirs.branch) == entry.branch;
    anyhow::ensure!(same, "its baseline is of another worktree or branch");
    anyhow::ensure!(
        theirs.repo.git_dir != own.repo.git_dir,
        "it names this worktree"
    );
    let config = theirs
        .expected_metadata(false)
        .get("config.worktree")
        .cloned();
    Ok((theirs.commit.clone(), config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(armed: u64, released: Option<u64>, base: Option<&str>, fin: Option<&str>) -> Peer {
        Peer {
            entry: Entry {
                git_dir: "/r/.git/worktrees/b".into(),
                work_dir: "/b".into(),
                state: "/s".into(),
                branch: "refs/heads/b".into(),
                armed_seq: armed,
                admin: None,
                released_seq: released,
                final_value: fin.map(str::to_owned),
            },
            baseline_value: base.map(str::to_owned),
            config_before_arm: None,
        }
    }

    fn excused(peers: Vec<Peer>, before: Option<&str>, now: Option<&str>) -> bool {
        let p = Peers {
            own_seq: 5,
            peers,
            unconfirmed: Vec::new(),
        };
        p.excuse_ref(
            "refs/heads/b".into(),
            before.map(BString::from).as_ref(),
            now.map(BString::from).as_ref(),
        )
    }

    #[test]
    fn an_armed_owner_judges_its_branch() {
        assert!(excused(
            vec![peer(3, None, Some("a"), None)],
            Some("a"),
            Some("z")
        ));
        assert!(excused(
            vec![peer(7, None, Some("a"), None)],
            Some("a"),
            Some("z")
        ));
    }

    #[test]
    fn a_later_arm_cannot_adopt_a_move_made_before_it() {
        // The branch was at `a` when this worktree armed; the peer armed at
        // `m`, a value nobody accounts for.
        assert!(!excused(
            vec![peer(7, None, Some("m"), None)],
            Some("a"),
            Some("m")
        ));
        // A branch created after this arm is the new worktree's.
        assert!(excused(
            vec![peer(7, None, Some("m"), None)],
            None,
            Some("m")
        ));
    }

    #[test]
    fn a_released_owner_excuses_only_its_final_value() {
        let released = || vec![peer(7, Some(9), Some("a"), Some("f"))];
        assert!(excused(released(), Some("a"), Some("f")));
        assert!(!excused(released(), Some("a"), Some("g")));
        // Released before this worktree armed: this baseline already has it.
        assert!(!excused(
            vec![peer(2, Some(4), Some("a"), Some("f"))],
            Some("f"),
            Some("g")
        ));
    }

    #[test]
    fn a_chain_of_owners_carries_the_branch() {
        let chain = vec![
            peer(6, Some(8), Some("a"), Some("f")),
            peer(10, None, Some("f"), None),
        ];
        assert!(excused(chain, Some("a"), Some("z")));
        let broken = vec![
            peer(6, Some(8), Some("a"), Some("f")),
            peer(10, None, Some("x"), None),
        ];
        assert!(!excused(broken, Some("a"), Some("z")));
    }

    #[test]
    fn other_branches_are_not_excused() {
        let p = Peers {
            own_seq: 1,
            peers: vec![peer(3, None, Some("a"), None)],
            unconfirmed: Vec::new(),
        };
        let a = BString::from("a");
        assert!(!p.excuse_ref("refs/heads/c".into(), Some(&a), None));
    }
}
