//! git's own view of the state `verify` is about to accept, as a cross-check.
//!
//! Whatever `verify` accepts, the harness then pushes, bundles or exports
//! with plain git. The in-process reader (gix, plus the strict ref and object
//! store checks) is built to read as git reads, but "built to" is a claim;
//! this module is the proof for each accepted state. It asks git itself, with
//! the repository's own config (equal to the baseline's: protected metadata
//! is checked first) and nothing else, where HEAD, the branch, its short name
//! and every ref point, which commits `baseline..tip` holds with which trees
//! and parents, and which paths each of them changes, and reports every
//! difference from what `verify` decided.
//!
//! This is the one checking path that runs `git`, and the design allows it
//! because none of these commands runs a configured program: `rev-parse`,
//! `symbolic-ref`, `for-each-ref`, `rev-list` and `diff-tree` are plumbing
//! that never read the worktree (so no filter driver), start no pager
//! (`--no-pager`, no terminal) and run no hook; `diff-tree` reads the index,
//! so `core.fsmonitor` is forced off on the command line, which outranks the
//! repository's config. The environment is scrubbed: no system or global config, no `GIT_*`
//! variable of the caller's, no lazy fetch in a partial clone, no prompt.
//!
//! Replace refs, grafts and the commit-graph are deliberately *not* turned
//! off: the point is to see what the harness's plain git will see.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result, bail};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};

use super::{ChangedPath, Location};

mod index_reading;
pub use index_reading::IndexReading;

/// What `verify` decided, to be compared with git's view.
pub struct Decided<'a> {
    /// Where the repository is.
    pub location: &'a Location,
    /// The granted branch's full name (`refs/heads/...`), as bytes.
    pub branch: &'a BStr,
    /// The branch tip `verify` judged (`None`: unborn).
    pub tip: Option<ObjectId>,
    /// The baseline commit (`None`: the branch was unborn at arm).
    pub baseline: Option<ObjectId>,
    /// Every ref under `refs/` and its raw value: a hex id, or
    /// `ref:<target>` for a symbolic ref.
    pub refs: &'a super::RefMap,
    /// The names `refs` was read for, when verify read only the refs that
    /// can have moved since arm (see [`super::refs_since_arm`]): git is
    /// asked about exactly these. `None`: `refs` holds every ref.
    pub asked: Option<&'a std::collections::BTreeSet<BString>>,
    /// Refs other armed worktrees own: their agents may move them between
    /// verify's read and git's, so neither side's value is compared.
    pub in_flight: &'a std::collections::BTreeSet<BString>,
    /// `baseline..tip`, newest first: id, tree, parents.
    pub commits: Vec<(ObjectId, ObjectId, Vec<ObjectId>)>,
    /// The paths each new commit changed against its first parent.
    pub changes: &'a [(ObjectId, Vec<ChangedPath>)],
    /// The index as verify read it, to be held against git's reading of
    /// the real index file (a copy verify's last look found it still
    /// holds); `None` when there is no index to compare.
    pub index: Option<(IndexView, IndexReading)>,
    /// git's listing of every ref, started when verify began to read them
    /// (see [`Listing::start`]); `None`: started here when needed.
    pub listing: Option<Listing>,
}

/// The index as verify read it (see [`Decided::index`]).
pub struct IndexView {
    /// The entries to hold against `ls-files -s -v -z --sparse` (`None`:
    /// not compared).
    entries: Option<Entries>,
    /// The tree the index must make (the tip's, when verify found it
    /// clean): what git's next commit from this index would write.
    pub tree: ObjectId,
}

/// The index whose entries are compared: as gix read the file, or as git
/// holds it in memory where that differs (see [`IndexView::read`]).
enum Entries {
    AsRead(gix::worktree::Index),
    Adjusted(Box<gix::index::State>),
}

impl Entries {
    fn state(&self) -> &gix::index::State {
        match self {
            Entries::AsRead(file) => file,
            Entries::Adjusted(state) => state,
        }
    }
}

impl IndexView {
    /// The view of `index`, `repo`'s index as verify read and judged it,
    /// which must make `tree`: as git holds it in memory, with the sparse
    /// directories it expands for files present outside the cone (see
    /// `sparse_present`). The judged index, not the file read again: git
    /// reads a copy made after verify read the index, and an index
    /// swapped in between must differ from what verify judged (red team).
    pub fn read(
        repo: &gix::Repository,
        index: gix::worktree::Index,
        tree: ObjectId,
    ) -> Result<IndexView> {
        let adjusted = match repo.workdir() {
            Some(work_dir) => super::sparse_present::index_as_git_reads_it(repo, work_dir, &index)
                .context("cannot read the sparse checkout's files")?,
            None => None,
        };
        // A sparse index with files present under one of its directories:
        // git expands every sparse directory in memory (`ensure_full_index`)
        // where the adjusted index expands only the ones with files present.
        // The entries are then left to the layout check (git's sequential
        // and threaded readings, and gix's, agree) and the tree is compared.
        let entries = match adjusted {
            Some(_) if index.is_sparse() => None,
            Some(adjusted) => Some(Entries::Adjusted(Box::new(adjusted))),
            None => Some(Entries::AsRead(index)),
        };
        Ok(IndexView { entries, tree })
    }
}

/// `entry` as `ls-files -s -v -z --sparse` prints it, without the NUL:
/// tag, mode, id, stage, path (`H 100644 <id> 0\tpath`), into `line`.
fn ls_files_line(entry: &gix::index::Entry, state: &gix::index::State, line: &mut Vec<u8>) {
    use gix::index::entry::Flags;
    line.clear();
    let tag = if entry.stage_raw() != 0 {
        b'M'
    } else if entry.flags.contains(Flags::SKIP_WORKTREE) {
        b'S'
    } else {
        b'H'
    };
    line.push(if entry.flags.contains(Flags::ASSUME_VALID) {
        tag.to_ascii_lowercase()
    } else {
        tag
    });
    // `%06o`: six octal digits, more when the mode needs them.
    let mode = entry.mode.bits();
    let digits = (1..=11)
        .find(|&d| u64::from(mode) < 8u64.pow(d))
        .unwrap_or(11)
        .max(6);
    line.push(b' ');
    line.extend(
        (0..digits)
            .rev()
            .map(|d| b'0' + ((mode >> (3 * d)) & 7) as u8),
    );
    line.push(b' ');
    let mut hex = [0u8; gix::hash::Kind::longest().len_in_hex()];
    line.extend_from_slice(entry.id.hex_to_buf(&mut hex).as_bytes());
    line.push(b' ');
    line.push(b'0' + entry.stage_raw() as u8);
    line.push(b'\t');
    line.extend_from_slice(entry.path(state));
}

/// Which part of the state git sees differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// Where the repository is, HEAD, the branch, its short name, the refs.
    Refs,
    /// The index file: its entries and the tree a commit from it writes.
    Index,
    /// The new commits, their trees, parents and changed paths.
    History,
}

/// One difference between git's view and `verify`'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// Which part differs.
    pub area: Area,
    /// What differs, for a human.
    pub message: String,
}

/// Runs git's plumbing and lists every way its view differs from `decided`.
/// An error means git could not be asked at all (not installed, or it
/// refused the repository): the caller fails closed.
pub fn differences(mut decided: Decided<'_>) -> Result<Vec<Difference>> {
    // No query needs the index, and reading the real one costs diff-tree
    // about 8 ms on a 100,000-file checkout: every command gets an index
    // file that does not exist (an empty index to git) in a directory of
    // our own.
    let scratch = tempfile::tempdir().context("cannot make a scratch directory for git")?;
    let empty_index = scratch.path().join("index");
    let git = Git {
        empty_index: &empty_index,
        work_dir: &decided.location.work_dir,
        explicit_git_dir: decided
            .location
            .explicit_git_dir
            .then_some(decided.location.git_dir.as_path()),
    };
    let short = decided
        .branch
        .strip_prefix(b"refs/heads/")
        .unwrap_or(decided.branch);
    // Start every query at once: each is a few milliseconds of process
    // start-up, and they are independent.
    let location = git.spawn(
        &[
            "rev-parse",
            "--absolute-git-dir",
            "--git-common-dir",
            "--show-toplevel",
        ],
        None,
    )?;
    let head = git.spawn(&["symbolic-ref", "-q", "HEAD"], None)?;
    // rev-parse has no way to end its options before a name (git 2.47
    // prints `--end-of-options` back), so a name that looks like an option
    // is not asked about; it is reported as a difference below.
    let looks_like_option = short.starts_with(b"-");
    let short_args: [&OsStr; 3] = [
        "rev-parse".as_ref(),
        "--symbolic-full-name".as_ref(),
        OsStr::from_bytes(if looks_like_option { b"HEAD" } else { short }),
    ];
    let short_name = git.spawn(&short_args, None)?;
    // Asked by name (see `RefQuery::ByName`), or every ref listed.
    let symbolic = |n: &BString| decided.refs.get(n).is_some_and(|v| v.starts_with(b"ref:"));
    let asked = decided.asked.filter(|a| {
        a.len() <= MAX_NAMES_ASKED && a.iter().filter(|n| symbolic(n)).count() <= MAX_SYMBOLIC_ASKED
    });
    let refs = match (asked, decided.listing.take()) {
        (Some(asked), _) => RefQuery::by_name(&git, asked, decided.refs)?,
        (None, Some(listing)) => RefQuery::Early(listing),
        // Read as git writes it (see `compare_refs`): 100,000 refs are six
        // megabytes of output that need not be held at once (issue 29).
        (None, None) => RefQuery::Listing(Streaming::spawn(git.command(LISTING))?),
    };
    let history = match decided.tip {
        Some(tip) => {
            let range = match decided.baseline {
                Some(base) => format!("{base}..{tip}"),
                None => tip.to_string(),
            };
            Some(git.spawn(
                &[
                    "rev-list",
                    "--no-commit-header",
                    "--format=%H %T %P",
                    &range,
                    "--",
                ],
                None,
            )?)
        }
        None => None,
    };
    let diff = if decided.commits.is_empty() {
        None
    } else {
        let mut stdin = Vec::new();
        for (commit, parents) in decided.commits.iter().map(|(c, _, p)| (c, p)) {
            match parents.first() {
                Some(parent) => writeln!(stdin, "{commit} {parent}")?,
                None => writeln!(stdin, "{commit}")?,
            }
        }
        Some(git.spawn(
            &[
                "diff-tree",
                "--stdin",
                "-r",
                "-z",
                "--root",
                "--no-renames",
                "--ignore-submodules=none",
                "--no-ext-diff",
                "--no-textconv",
            ],
            Some(stdin),
        )?)
    };
    let mut out = Vec::new();
    let mut differ = |area, message: String| out.push(Difference { area, message });
    // The index first: its readings were started before the others.
    if let Some((view, reading)) = decided.index.take() {
        let (ls_files, write_tree) = reading.finish()?;
        compare_index(&view, ls_files, write_tree, &mut differ)?;
    }
    compare_location(decided.location, &finish(location)?, &mut differ)?;
    let head = finish_allowing(head, &[1])?;
    let head = head.trim_end_with(|c| c == '\n');
    if head != decided.branch.as_bytes() {
        differ(
            Area::Refs,
            format!(
                "git reads HEAD as {:?}, verify as {:?}",
                head.as_bstr(),
                decided.branch
            ),
        );
    }
    let short_name = finish_allowing(short_name, &[128])?;
    let resolved = short_name.trim_end_with(|c| c == '\n');
    if looks_like_option {
        differ(
            Area::Refs,
            format!(
                "the branch's short name {:?} starts with '-', which git reads as an option",
                short.as_bstr()
            ),
        );
    } else if decided.tip.is_some() && resolved != decided.branch.as_bytes() {
        differ(
            Area::Refs,
            format!(
                "git resolves the short name {:?} to {:?}, not to the branch {:?}: a file or ref \
                 shadows it",
                short.as_bstr(),
                resolved.as_bstr(),
                decided.branch
            ),
        );
    }
    match refs {
        RefQuery::Early(listing) => {
            let mut all = listing.finish()?;
            let mut early = Vec::new();
            compare_refs(
                decided.refs,
                decided.in_flight,
                decided.asked,
                &mut all,
                &mut |area, message| early.push((area, message)),
            )?;
            // Usually nothing. git listed before verify read what it
            // judged: a commit that ended in between differs without any
            // store being read two ways (red team: a legitimate commit
            // refused as a broken store). Only a listing made after the
            // read, as in the late case below, says which it is.
            if !early.is_empty() {
                let mut late = Streaming::spawn(git.command(LISTING))?;
                compare_refs(
                    decided.refs,
                    decided.in_flight,
                    decided.asked,
                    &mut late,
                    &mut differ,
                )?;
                late.finish()?;
            }
        }
        RefQuery::Listing(mut all) => {
            compare_refs(
                decided.refs,
                decided.in_flight,
                decided.asked,
                &mut all,
                &mut differ,
            )?;
            all.finish()?;
        }
        RefQuery::ByName {
            names,
            ids,
            symbolic,
        } => {
            let listed = listing_by_name(names, ids, symbolic)?;
            compare_refs(
                decided.refs,
                decided.in_flight,
                None,
                &mut listed.as_slice(),
                &mut differ,
            )?;
        }
    }
    if let Some(history) = history {
        compare_history(&decided.commits, &finish(history)?, &mut differ);
    }
    if let Some(diff) = diff {
        compare_changes(decided.changes, &finish(diff)?, &mut differ);
    }
    Ok(out)
}

/// Holds git's index entries, as `ls-files` printed them into `ls_files`,
/// against `view`'s one by one; then git's next tree, as `write-tree`
/// printed it, against the view's.
fn compare_index(
    view: &IndexView,
    mut ls_files: impl std::io::BufRead,
    write_tree: Result<Vec<u8>>,
    differ: &mut impl FnMut(Area, String),
) -> Result<()> {
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    if let Some(entries) = &view.entries {
        let state = entries.state();
        let mut counted = 0usize;
        let mut first_difference = None;
        while next_record(&mut ls_files, &mut theirs)? {
            if first_difference.is_none()
                && let Some(entry) = state.entries().get(counted)
            {
                ls_files_line(entry, state, &mut ours);
                if ours != theirs {
                    first_difference = Some((theirs.clone(), ours.clone()));
                }
            }
            counted += 1;
        }
        if counted != state.entries().len() {
            differ(
                Area::Index,
                format!(
                    "git reads {counted} index entries, verify {}",
                    state.entries().len()
                ),
            );
        }
        if let Some((theirs, ours)) = first_difference {
            differ(
                Area::Index,
                format!(
                    "git reads the index entry {:?} where verify reads {:?}",
                    theirs.as_bstr(),
                    ours.as_bstr()
                ),
            );
        }
    }
    let write_tree = write_tree?;
    let tree = write_tree.trim_end_with(|c| c == '\n');
    if tree != view.tree.to_string().as_bytes() {
        differ(
            Area::Index,
            format!(
                "git's next commit from this index would write the tree {:?}, not the tip's {}: \
                 its cache-tree names another tree",
                tree.as_bstr(),
                view.tree
            ),
        );
    }
    Ok(())
}

struct Git<'a> {
    /// `GIT_INDEX_FILE` for every command: a path that does not exist, or
    /// the copy of the real index the index queries read.
    empty_index: &'a Path,
    work_dir: &'a Path,
    /// The git dir, when the harness's git reaches the repository through
    /// `GIT_DIR` and `GIT_WORK_TREE` (see [`super::layout`]): git is asked
    /// the same way.
    explicit_git_dir: Option<&'a Path>,
}

impl Git<'_> {
    /// Starts `git --no-pager <args>` in the worktree with a scrubbed
    /// environment, feeding `stdin` if given.
    fn spawn<S: AsRef<OsStr>>(&self, args: &[S], stdin: Option<Vec<u8>>) -> Result<Running> {
        let mut cmd = self.command(args);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd
            .spawn()
            .context("cannot run git for the cross-check (is git installed?)")?;
        if let Some(bytes) = stdin {
            let mut pipe = child.stdin.take().expect("stdin is piped");
            // diff-tree reads all of its input before it answers; a few
            // dozen lines fit in the pipe, so this cannot block.
            std::thread::spawn(move || pipe.write_all(&bytes));
        }
        Ok(Running::drain(child))
    }

    /// `git --no-pager <args>` in the worktree with a scrubbed environment,
    /// stdin closed, output piped; not started.
    fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new("git");
        cmd.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", "/nonexistent")
            .env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_INDEX_FILE", self.empty_index)
            .arg("--no-pager")
            // The caller may not own the checkout; these commands run no
            // configured program, which is what the ownership check guards.
            .arg("-c")
            .arg(format!("safe.directory={}", self.work_dir.display()))
            // diff-tree reads the index (for sparse checkouts), and reading
            // the index asks `core.fsmonitor`, a program (the index here is
            // an empty one, but the key is off all the same). Nothing else
            // these commands do consults a configured program; the
            // adversarial config test plants one for every key that names a
            // program.
            .args(["-c", "core.fsmonitor=false"])
            // None of these commands fires a hook today; should one start
            // to, no hook the repository configures (git ≥ 2.54) runs.
            .args(crate::hooks::events::configured_hooks_off())
            .args(args)
            .current_dir(self.work_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(git_dir) = self.explicit_git_dir {
            cmd.env("GIT_DIR", git_dir)
                .env("GIT_WORK_TREE", self.work_dir);
        }
        // Killed with grantguard: a git blocked on a FIFO the agent put
        // where it reads (red team) would outlive verify's deadline, which
        // exits the process, and be left running for ever. Each is waited
        // for, or killed, by the thread that started it.
        // SAFETY: prctl is async-signal-safe; nothing else runs here.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }
}

fn finish(child: Running) -> Result<Vec<u8>> {
    finish_allowing(child, &[])
}

/// A git process of the cross-check whose output a thread of its own
/// reads as it comes: all of them run at once, none waits on a full pipe
/// (`ls-files` writes megabytes on a large index) until its turn.
struct Running(std::thread::JoinHandle<std::io::Result<Output>>);

impl Running {
    fn drain(child: std::process::Child) -> Running {
        Running(std::thread::spawn(move || child.wait_with_output()))
    }
}

/// A git process whose output is read as it comes, by the caller: what
/// `ls-files` prints of a large index (8 MB for 100,000 entries) is
/// compared record by record instead of held. Its stderr is drained by a
/// thread, so that git never waits on it.
struct Streaming {
    child: std::process::Child,
    output: std::io::BufReader<std::process::ChildStdout>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

impl Streaming {
    fn spawn(mut command: Command) -> Result<Streaming> {
        let mut child = command
            .spawn()
            .context("cannot run git for the cross-check (is git installed?)")?;
        let output = std::io::BufReader::with_capacity(
            1 << 16,
            child.stdout.take().expect("stdout is piped"),
        );
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let stderr = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stderr, &mut bytes);
            bytes
        });
        Ok(Streaming {
            child,
            output,
            stderr,
        })
    }

    /// Waits for git once its output was read to the end: exit 0, or the
    /// error with what git said.
    fn finish(mut self) -> Result<()> {
        let status = self.child.wait().context("git did not finish")?;
        let stderr = self.stderr.join().unwrap_or_default();
        if !status.success() {
            bail!(
                "git failed ({status}) in the cross-check: {}",
                String::from_utf8_lossy(&stderr).trim()
            );
        }
        Ok(())
    }
}

/// The next non-empty NUL-terminated record of `output`, without its NUL,
/// into `record`; `false` at the end.
fn next_record(output: &mut impl std::io::BufRead, record: &mut Vec<u8>) -> Result<bool> {
    loop {
        record.clear();
        let read = output
            .read_until(0, record)
            .context("cannot read git's output")?;
        if record.last() == Some(&0) {
            record.pop();
        }
        if read == 0 || !record.is_empty() {
            return Ok(read != 0);
        }
    }
}

/// The arguments of git's listing of every ref, as [`compare_refs`] reads it.
const LISTING: &[&str] = &[
    "for-each-ref",
    "--format=%(refname)%00%(objectname)%00%(symref)",
];

/// git's listing of every ref, started as soon as verify knows it reads
/// every ref, so that git lists while verify reads and judges (on two
/// cores, most of `for-each-ref`'s time is hidden: issue 29). A ref that
/// moved between this listing and verify's read is a difference that says
/// nothing about the store, so any difference has git list again, after
/// the read (see [`differences`]): only what that listing finds counts, as
/// when the listing was started at the end.
pub struct Listing(Detached);

impl Listing {
    /// Starts `for-each-ref` in the repository at `location`, asked as
    /// [`differences`] asks git, its output an unlinked file in `dir`:
    /// the state directory, not a `/tmp` the agent may have filled (red
    /// team: a full `/tmp` refused every full read).
    pub fn start(location: &Location, dir: &Path) -> Result<Listing> {
        let git = Git {
            // `for-each-ref` reads no index; this one can never exist.
            empty_index: Path::new("/dev/null/index"),
            work_dir: &location.work_dir,
            explicit_git_dir: location
                .explicit_git_dir
                .then_some(location.git_dir.as_path()),
        };
        Detached::start(git.command(LISTING), dir).map(Listing)
    }

    fn finish(self) -> Result<std::io::BufReader<std::fs::File>> {
        self.0.finish()
    }
}

/// A git process of the cross-check started before verify needs its
/// answer ([`Listing`], [`IndexReading`]). Its output goes to an unlinked
/// file, not a pipe that would stop git once full, and is read after git
/// exits.
struct Detached {
    child: Option<std::process::Child>,
    output: std::fs::File,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl Detached {
    /// Starts `command` with its output to an unlinked file in `dir`.
    fn start(mut command: Command, dir: &Path) -> Result<Detached> {
        let output = tempfile::tempfile_in(dir).context("cannot make a file for git's output")?;
        command.stdout(Stdio::from(
            output
                .try_clone()
                .context("cannot share git's output file")?,
        ));
        let mut child = command
            .spawn()
            .context("cannot run git for the cross-check (is git installed?)")?;
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let stderr = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stderr, &mut bytes);
            bytes
        });
        Ok(Detached {
            child: Some(child),
            output,
            stderr: Some(stderr),
        })
    }

    /// Waits for git: exit 0 gives its output to read from the start;
    /// anything else is the error with what git said.
    fn finish(mut self) -> Result<std::io::BufReader<std::fs::File>> {
        use std::io::Seek;
        let mut child = self.child.take().expect("a process is finished once");
        let status = child.wait().context("git did not finish")?;
        let stderr = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        if !status.success() {
            bail!(
                "git failed ({status}) in the cross-check: {}",
                String::from_utf8_lossy(&stderr).trim()
            );
        }
        let mut output = self
            .output
            .try_clone()
            .context("cannot read git's output")?;
        output
            .seek(std::io::SeekFrom::Start(0))
            .context("cannot read git's output")?;
        Ok(std::io::BufReader::with_capacity(1 << 16, output))
    }
}

impl Drop for Detached {
    /// An answer verify did not need (it found something first): git is
    /// stopped and reaped.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for `child`; exit 0 or one of `allowed` gives its stdout.
fn finish_allowing(child: Running, allowed: &[i32]) -> Result<Vec<u8>> {
    let Output {
        status,
        stdout,
        stderr,
    } = child
        .0
        .join()
        .map_err(|_| anyhow::anyhow!("the reader of git's output failed"))?
        .context("git did not finish")?;
    match status.code() {
        Some(0) => Ok(stdout),
        Some(code) if allowed.contains(&code) => Ok(Vec::new()),
        _ => bail!(
            "git failed ({status}) in the cross-check: {}",
            String::from_utf8_lossy(&stderr).trim()
        ),
    }
}

fn compare_location(
    location: &Location,
    output: &[u8],
    differ: &mut impl FnMut(Area, String),
) -> Result<()> {
    let lines: Vec<&[u8]> = output.lines().collect();
    let [git_dir, common_dir, top] = lines[..] else {
        bail!("unexpected output of git rev-parse: {:?}", output.as_bstr());
    };
    let work_dir = &location.work_dir;
    let resolve = |p: &[u8]| {
        let p = Path::new(OsStr::from_bytes(p));
        let p = if p.is_relative() {
            work_dir.join(p)
        } else {
            p.to_owned()
        };
        p.canonicalize()
            .with_context(|| format!("cannot resolve {}", p.display()))
    };
    for (what, theirs, ours) in [
        ("git dir", git_dir, &location.git_dir),
        ("common dir", common_dir, &location.common_dir),
        ("worktree", top, &location.work_dir),
    ] {
        let theirs = resolve(theirs)?;
        if theirs != *ours {
            differ(
                Area::Refs,
                format!(
                    "git finds the {what} at {}, verify at {}",
                    theirs.display(),
                    ours.display()
                ),
            );
        }
    }
    Ok(())
}

/// Most names asked one by one ([`RefQuery::ByName`]); beyond, git lists
/// every ref and [`compare_refs`] reads only their lines.
const MAX_NAMES_ASKED: usize = 4096;

/// Most names read as symbolic refs asked one by one: each is a `git
/// symbolic-ref` process; beyond, git lists every ref.
const MAX_SYMBOLIC_ASKED: usize = 32;

/// How git is asked about the refs.
enum RefQuery<'a> {
    /// `for-each-ref` listing every ref, started early (see [`Listing`]).
    Early(Listing),
    /// `for-each-ref` listing every ref.
    Listing(Streaming),
    /// Each asked name looked up on its own: `cat-file --batch-check`
    /// resolves a full name by reading its loose file or its `packed-refs`
    /// record, where `for-each-ref <name>` reads every loose ref in the
    /// name's directory (100,000 loose tags for `refs/tags/main`: most of
    /// a full listing). `symbolic-ref` gives the target of each name verify
    /// reads as symbolic; a name git alone would take for symbolic cannot
    /// differ in value, since the strict reader accepts only `ref: ` for
    /// that and refuses a file that starts so but is not one.
    ByName {
        names: Vec<&'a BString>,
        ids: Running,
        symbolic: Vec<(&'a BString, Running)>,
    },
}

impl<'a> RefQuery<'a> {
    fn by_name(
        git: &Git<'_>,
        asked: &'a BTreeSet<BString>,
        ours: &super::RefMap,
    ) -> Result<RefQuery<'a>> {
        let names: Vec<&BString> = asked.iter().collect();
        let mut stdin = Vec::new();
        for name in &names {
            stdin.extend_from_slice(name);
            stdin.push(b'\n');
        }
        let ids = git.spawn(&["cat-file", "--batch-check=%(objectname)"], Some(stdin))?;
        let mut symbolic = Vec::new();
        for name in &names {
            if ours.get(*name).is_some_and(|v| v.starts_with(b"ref:")) {
                let args: [&OsStr; 3] = [
                    "symbolic-ref".as_ref(),
                    "-q".as_ref(),
                    OsStr::from_bytes(name),
                ];
                symbolic.push((*name, git.spawn(&args, None)?));
            }
        }
        Ok(RefQuery::ByName {
            names,
            ids,
            symbolic,
        })
    }
}

/// The answers of [`RefQuery::ByName`] as `for-each-ref` lines (`name NUL
/// id NUL target`), of the names git finds: what [`compare_refs`] reads.
fn listing_by_name(
    names: Vec<&BString>,
    ids: Running,
    symbolic: Vec<(&BString, Running)>,
) -> Result<Vec<u8>> {
    let ids = finish(ids)?;
    let lines: Vec<&[u8]> = ids.lines().collect();
    if lines.len() != names.len() {
        bail!(
            "git cat-file answered {} lines for {} names",
            lines.len(),
            names.len()
        );
    }
    let mut targets = std::collections::BTreeMap::new();
    for (name, running) in symbolic {
        let target = finish_allowing(running, &[1])?;
        targets.insert(name, target.trim_end_with(|c| c == '\n').to_vec());
    }
    let mut out = Vec::new();
    for (name, line) in names.into_iter().zip(lines) {
        // `<name> missing` (or `ambiguous`) otherwise.
        let found = !line.is_empty() && line.iter().all(u8::is_ascii_hexdigit);
        if !found {
            continue;
        }
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(line);
        out.push(0);
        if let Some(target) = targets.get(name) {
            out.extend_from_slice(target);
        }
        out.push(b'\n');
    }
    Ok(out)
}

/// Lines of `for-each-ref` output (`name NUL id NUL target`), one at a
/// time: git's own, read as it writes them, or lines made from other
/// answers ([`listing_by_name`]).
trait RefLines {
    /// The next line, without its newline, into `line`; `false` at the end.
    fn next_line(&mut self, line: &mut Vec<u8>) -> Result<bool>;
}

impl RefLines for &[u8] {
    fn next_line(&mut self, line: &mut Vec<u8>) -> Result<bool> {
        if self.is_empty() {
            return Ok(false);
        }
        let (this, rest) = match self.find_byte(b'\n') {
            Some(at) => (&self[..at], &self[at + 1..]),
            None => (*self, &[][..]),
        };
        line.clear();
        line.extend_from_slice(this);
        *self = rest;
        Ok(true)
    }
}

impl RefLines for Streaming {
    fn next_line(&mut self, line: &mut Vec<u8>) -> Result<bool> {
        read_line(&mut self.output, line)
    }
}

impl RefLines for std::io::BufReader<std::fs::File> {
    fn next_line(&mut self, line: &mut Vec<u8>) -> Result<bool> {
        read_line(self, line)
    }
}

/// The next line of `output`, without its newline, into `line`; `false`
/// at the end.
fn read_line(output: &mut impl std::io::BufRead, line: &mut Vec<u8>) -> Result<bool> {
    line.clear();
    let read = output
        .read_until(b'\n', line)
        .context("cannot read git's output")?;
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    Ok(read != 0)
}

/// The refs as git lists them: `for-each-ref` resolves symbolic refs and
/// leaves out those that resolve to nothing (and any ref it cannot read).
/// With `asked`, only the lines of those refs count.
///
/// git lists refs in name order, which is the map's: the two are walked
/// side by side ([`super::refs::Beside`]), with no other copy of either
/// (a 100,000-ref store; issue 29).
fn compare_refs(
    ours: &super::RefMap,
    in_flight: &BTreeSet<BString>,
    asked: Option<&BTreeSet<BString>>,
    lines: &mut impl RefLines,
    differ: &mut impl FnMut(Area, String),
) -> Result<()> {
    let mut beside = super::refs::Beside::new(ours);
    let mut line = Vec::new();
    while lines.next_line(&mut line)? {
        let mut fields = line.splitn(3, |&b| b == 0);
        let first = fields.next().unwrap_or_default().as_bstr();
        if asked.is_some_and(|asked| !asked.contains(first)) {
            continue;
        }
        let (name, Some(id), Some(symref)) = (first, fields.next(), fields.next()) else {
            differ(
                Area::Refs,
                format!("unexpected for-each-ref line {:?}", line.as_bstr()),
            );
            continue;
        };
        // A ref listed twice compares twice.
        let ours_value = beside
            .take(name)
            .map(|(_, value)| value)
            .or_else(|| ours.get(name));
        if in_flight.contains(name) {
            continue;
        }
        let resolved = match ours_value {
            Some(value) if !value.starts_with(b"ref:") => Some((value.as_bstr(), None)),
            Some(_) => resolve(ours, name),
            None => None,
        };
        let target = (!symref.is_empty()).then(|| symref.as_bstr());
        match resolved {
            Some((our_id, our_target)) if our_id == id.as_bstr() && our_target == target => {}
            Some((our_id, _)) => differ(
                Area::Refs,
                format!(
                    "git reads {name:?} as {:?}, verify as {our_id:?}",
                    id.as_bstr()
                ),
            ),
            None => differ(
                Area::Refs,
                format!(
                    "git sees a ref {name:?} ({:?}) that verify does not",
                    id.as_bstr()
                ),
            ),
        }
    }
    for (name, _) in beside.rest() {
        if !in_flight.contains(name) && resolve(ours, name.as_bstr()).is_some() {
            differ(
                Area::Refs,
                format!("verify sees a ref {name:?} that git does not list"),
            );
        }
    }
    Ok(())
}

/// Follows a ref in `refs` to an object id, as for-each-ref shows it: the
/// id and, for a symbolic ref, its immediate target. `None` for a symbolic
/// ref that resolves to nothing (git leaves those out).
fn resolve<'a>(refs: &'a super::RefMap, name: &BStr) -> Option<(&'a BStr, Option<&'a BStr>)> {
    let mut value = refs.get(name)?.as_bstr();
    let mut first_target = None;
    // git follows at most 5 levels of symbolic refs (SYMREF_MAXDEPTH).
    for _ in 0..=5 {
        match value.strip_prefix(b"ref:") {
            Some(target) => {
                let target = target.trim_start().as_bstr();
                first_target.get_or_insert(target);
                value = refs.get(target)?.as_bstr();
            }
            None => return Some((value, first_target)),
        }
    }
    None
}

fn compare_history(
    ours: &[(ObjectId, ObjectId, Vec<ObjectId>)],
    output: &[u8],
    differ: &mut impl FnMut(Area, String),
) {
    let expected: Vec<String> = ours
        .iter()
        .map(|(id, tree, parents)| {
            let parents: Vec<String> = parents.iter().map(ToString::to_string).collect();
            format!("{id} {tree} {}", parents.join(" "))
        })
        .collect();
    let theirs: Vec<String> = output
        .lines()
        .map(|l| l.to_str_lossy().into_owned())
        .collect();
    // rev-list orders by commit date; a linear history is in the same order
    // either way, but compare as sets so a date skew is not a difference.
    let (a, b): (BTreeSet<_>, BTreeSet<_>) = (expected.iter().collect(), theirs.iter().collect());
    for line in a.difference(&b) {
        differ(
            Area::History,
            format!("verify reads the new commit as {line:?}; git does not"),
        );
    }
    for line in b.difference(&a) {
        differ(
            Area::History,
            format!("git reads a new commit as {line:?} (id, tree, parents); verify does not"),
        );
    }
}

/// One changed path as `diff-tree --raw` shows it: path, old mode, new mode,
/// new id (modes in octal, `000000` and the null id for "absent").
type RawChange = (BString, String, String, String);

fn compare_changes(
    ours: &[(ObjectId, Vec<ChangedPath>)],
    output: &[u8],
    differ: &mut impl FnMut(Area, String),
) {
    let null = |len: usize| "0".repeat(len);
    let mut expected: BTreeSet<(String, RawChange)> = BTreeSet::new();
    for (commit, changes) in ours {
        let hex_len = commit.kind().len_in_hex();
        for c in changes {
            let mode = |m: Option<gix::objs::tree::EntryMode>| {
                m.map_or_else(|| "000000".to_owned(), |m| format!("{:06o}", m.value()))
            };
            expected.insert((
                commit.to_string(),
                (
                    c.path.clone(),
                    mode(c.old_mode),
                    mode(c.new_mode),
                    c.new_id.map_or_else(|| null(hex_len), |id| id.to_string()),
                ),
            ));
        }
    }
    let mut theirs = BTreeSet::new();
    let mut tokens = output.split(|&b| b == 0).filter(|t| !t.is_empty());
    let mut commit = String::new();
    while let Some(token) = tokens.next() {
        if let Some(record) = token.strip_prefix(b":") {
            let fields: Vec<&[u8]> = record.split(|&b| b == b' ').collect();
            let path = tokens.next().unwrap_or_default();
            if let [old_mode, new_mode, _old_id, new_id, _status] = fields[..] {
                theirs.insert((
                    commit.clone(),
                    (
                        BString::from(path),
                        old_mode.to_str_lossy().into_owned(),
                        new_mode.to_str_lossy().into_owned(),
                        new_id.to_str_lossy().into_owned(),
                    ),
                ));
                continue;
            }
            differ(
                Area::History,
                format!("unexpected diff-tree record {:?}", token.as_bstr()),
            );
        } else {
            commit = token.to_str_lossy().into_owned();
        }
    }
    for (commit, (path, old, new, id)) in expected.difference(&theirs) {
        differ(
            Area::History,
            format!(
                "verify sees commit {commit} change {path:?} ({old} -> {new} {id}); git does not"
            ),
        );
    }
    for (commit, (path, old, new, id)) in theirs.difference(&expected) {
        differ(
            Area::History,
            format!(
                "git sees commit {commit} change {path:?} ({old} -> {new} {id}); verify does not"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> crate::repo::RefMap {
        pairs
            .iter()
            .map(|(n, v)| (BString::from(*n), BString::from(*v)))
            .collect()
    }

    fn diffs_of(ours: &crate::repo::RefMap, output: &str) -> Vec<String> {
        diffs_in(ours, &mut output.as_bytes())
    }

    /// What [`compare_refs`] finds between `ours` and all of `lines`.
    fn diffs_in(ours: &crate::repo::RefMap, lines: &mut impl RefLines) -> Vec<String> {
        let mut out = Vec::new();
        compare_refs(ours, &BTreeSet::new(), None, lines, &mut |_, m| out.push(m)).unwrap();
        out
    }

    #[test]
    fn symbolic_refs_compare_by_target_and_dangling_ones_are_left_out() {
        let ours = map(&[
            ("refs/heads/main", "aa"),
            ("refs/remotes/o/HEAD", "ref:refs/heads/main"),
            ("refs/remotes/o/gone", "ref:refs/heads/nothere"),
        ]);
        let git = "refs/heads/main\0aa\0\nrefs/remotes/o/HEAD\0aa\0refs/heads/main\n";
        assert!(diffs_of(&ours, git).is_empty());
    }

    #[test]
    fn a_ref_only_one_side_sees_or_reads_differently_is_a_difference() {
        let ours = map(&[("refs/heads/main", "aa"), ("refs/tags/t", "bb")]);
        assert_eq!(diffs_of(&ours, "refs/heads/main\0aa\0\n").len(), 1);
        assert_eq!(
            diffs_of(&ours, "refs/heads/main\0cc\0\nrefs/tags/t\0bb\0\n").len(),
            1
        );
        assert_eq!(
            diffs_of(
                &ours,
                "refs/heads/main\0aa\0\nrefs/tags/t\0bb\0\nrefs/heads/x\0aa\0\n"
            )
            .len(),
            1
        );
    }

    /// git lists in name order; lines out of it compare all the same: a
    /// ref the walk went past and git lists later is no difference, and
    /// one git never lists, or reads otherwise, is one.
    #[test]
    fn lines_out_of_name_order_compare_as_in_order() {
        let ours = map(&[
            ("refs/heads/a", "aa"),
            ("refs/heads/b", "bb"),
            ("refs/tags/c", "cc"),
        ]);
        let shuffled = "refs/tags/c\0cc\0\nrefs/heads/a\0aa\0\nrefs/heads/b\0bb\0\n";
        assert!(diffs_of(&ours, shuffled).is_empty());
        let twice =
            "refs/heads/a\0aa\0\nrefs/heads/b\0bb\0\nrefs/tags/c\0cc\0\nrefs/heads/a\0aa\0\n";
        assert!(diffs_of(&ours, twice).is_empty());
        let missing = "refs/tags/c\0cc\0\nrefs/heads/b\0bb\0\n";
        assert_eq!(diffs_of(&ours, missing).len(), 1);
        let other_value = "refs/tags/c\0cc\0\nrefs/heads/a\0ab\0\nrefs/heads/b\0bb\0\n";
        assert_eq!(diffs_of(&ours, other_value).len(), 1);
        let extra =
            "refs/tags/c\0cc\0\nrefs/heads/0\0aa\0\nrefs/heads/a\0aa\0\nrefs/heads/b\0bb\0\n";
        assert_eq!(diffs_of(&ours, extra).len(), 1);
    }

    /// The listing started early reads as one started at the end: every
    /// ref as git lists it, a ref verify reads otherwise a difference, and
    /// a git that fails an error; one not needed is stopped.
    #[test]
    fn a_listing_started_early_compares_as_one_started_late() {
        let dir = tempfile::tempdir().unwrap();
        let repo_dir = dir.path().join("r");
        let git = |args: &[&str]| crate::test_git::git(&repo_dir, dir.path(), args);
        std::fs::create_dir(&repo_dir).unwrap();
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(repo_dir.join("a.txt"), "a\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "one"]);
        let head = git(&["rev-parse", "HEAD"]);
        let tags: String = (0..3000)
            .map(|i| format!("create refs/tags/t{i:04} {head}\n"))
            .collect();
        crate::test_git::git_stdin(
            &repo_dir,
            dir.path(),
            &["update-ref", "--stdin"],
            tags.as_bytes(),
        );
        git(&["pack-refs", "--all"]);
        git(&["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
        let location = Location {
            work_dir: repo_dir.clone(),
            git_dir: repo_dir.join(".git"),
            common_dir: repo_dir.join(".git"),
            explicit_git_dir: false,
        };
        let strict = crate::repo::refstore::read(&location.git_dir, &location.common_dir).unwrap();
        assert_eq!(strict.refs.len(), 3002);
        let diffs = |ours: &super::super::RefMap| {
            let mut all = Listing::start(&location, dir.path())
                .unwrap()
                .finish()
                .unwrap();
            diffs_in(ours, &mut all)
        };
        assert_eq!(diffs(&strict.refs), Vec::<String>::new());
        let mut other = strict.refs.clone();
        other.insert("refs/tags/t1500".into(), "1".repeat(40).into());
        let found = diffs(&other);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("refs/tags/t1500"), "{found:?}");
        // git cannot list: an error, with what git said.
        let nowhere = Location {
            work_dir: dir.path().to_owned(),
            git_dir: dir.path().join("none"),
            common_dir: dir.path().join("none"),
            explicit_git_dir: true,
        };
        let err = Listing::start(&nowhere, dir.path())
            .unwrap()
            .finish()
            .unwrap_err();
        assert!(format!("{err:#}").contains("git failed"), "{err:#}");
        // Not needed: dropped, git is reaped (no zombie left behind).
        let listing = Listing::start(&location, dir.path()).unwrap();
        let pid = listing.0.child.as_ref().unwrap().id();
        drop(listing);
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "git {pid} was not reaped"
        );
    }

    /// A git of the cross-check dies with what started it: one blocked
    /// for ever (here on a stdin nobody writes) does not outlive verify.
    #[test]
    fn a_git_of_the_cross_check_dies_with_the_thread_that_started_it() {
        let dir = tempfile::tempdir().unwrap();
        let pid = std::thread::spawn({
            let work_dir = dir.path().to_owned();
            move || {
                let git = Git {
                    empty_index: Path::new("/dev/null/index"),
                    work_dir: &work_dir,
                    explicit_git_dir: None,
                };
                let mut cmd = git.command(&["hash-object", "--stdin"]);
                let child = cmd.stdin(Stdio::piped()).spawn().unwrap();
                let pid = child.id();
                // Neither waited for nor killed, its stdin left open.
                std::mem::forget(child);
                pid
            }
        })
        .join()
        .unwrap();
        let state = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.chars().next().unwrap()))
        };
        let started = std::time::Instant::now();
        while state() != Some('Z') && started.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(state(), Some('Z'), "git {pid} still runs");
        // SAFETY: reaps the forgotten child, which is ours.
        unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), 0) };
    }

    /// With names asked, the lines of other refs do not count (a listing
    /// when too many were asked); an asked ref's line still must parse.
    #[test]
    fn only_the_lines_of_asked_refs_count() {
        let ours = map(&[("refs/heads/main", "aa")]);
        let asked: BTreeSet<BString> = [BString::from("refs/heads/main")].into();
        let diffs = |output: &str| {
            let mut out = Vec::new();
            compare_refs(
                &ours,
                &BTreeSet::new(),
                Some(&asked),
                &mut output.as_bytes(),
                &mut |_, m| out.push(m),
            )
            .unwrap();
            out
        };
        assert!(diffs("refs/heads/main\0aa\0\nrefs/tags/x\0bb\0\nodd line\n").is_empty());
        assert_eq!(diffs("refs/heads/main\0aa\n").len(), 2);
        assert_eq!(diffs("refs/tags/x\0bb\0\n").len(), 1);
    }

    /// Asked by name, git answers for exactly the names: values, symbolic
    /// targets, names it has not, and a packed or loose store alike; a
    /// value verify reads otherwise, a ref only one side has, and a symbolic
    /// ref git reads as another target are differences.
    #[test]
    fn refs_asked_by_name_are_compared_as_listed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r");
        let git = |args: &[&str]| crate::test_git::git(&repo, dir.path(), args);
        std::fs::create_dir(&repo).unwrap();
        git(&["init", "-q", "--ref-format=files"]);
        git(&["commit", "-q", "--allow-empty", "-m", "one"]);
        let a = git(&["rev-parse", "HEAD"]);
        git(&["tag", "packed"]);
        git(&["pack-refs", "--all"]);
        git(&["commit", "-q", "--allow-empty", "-m", "two"]);
        let b = git(&["rev-parse", "HEAD"]);
        git(&["tag", "loose"]);
        git(&["symbolic-ref", "refs/heads/alias", "refs/tags/loose"]);
        let branch = git(&["symbolic-ref", "HEAD"]);
        let scratch = tempfile::tempdir().unwrap();
        let runner = Git {
            empty_index: &scratch.path().join("index"),
            work_dir: &repo,
            explicit_git_dir: None,
        };
        let compare = |ours: &crate::repo::RefMap| {
            let asked: BTreeSet<BString> = ours
                .keys()
                .cloned()
                .chain([BString::from("refs/tags/absent")])
                .collect();
            let query = RefQuery::by_name(&runner, &asked, ours).unwrap();
            let RefQuery::ByName {
                names,
                ids,
                symbolic,
            } = query
            else {
                panic!("asked by name");
            };
            let listed = listing_by_name(names, ids, symbolic).unwrap();
            diffs_in(ours, &mut listed.as_slice())
        };
        let right = map(&[
            (&branch, &b),
            ("refs/tags/packed", &a),
            ("refs/tags/loose", &b),
            ("refs/heads/alias", "ref:refs/tags/loose"),
        ]);
        assert_eq!(compare(&right), Vec::<String>::new());
        let mut wrong = right.clone();
        wrong.insert("refs/tags/packed".into(), b.as_str().into());
        wrong.insert("refs/tags/extra".into(), a.as_str().into());
        wrong.insert("refs/heads/alias".into(), "ref:refs/tags/packed".into());
        let diffs = compare(&wrong);
        assert_eq!(diffs.len(), 3, "{diffs:#?}");
    }

    /// The index queries against real git, on an index with every kind of
    /// entry `ls-files -s -v` tags differently: a file, an executable, a
    /// symlink, a gitlink, skip-worktree and assume-valid entries, and a
    /// conflict's three stages. Read as it is, no difference; with one
    /// entry of verify's view changed, that entry is the difference; with
    /// an entry fewer, the count; with another tree, the tree.
    #[test]
    fn index_entries_compare_with_what_git_lists_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let repo_dir = dir.path().join("r");
        let git = |args: &[&str]| crate::test_git::git(&repo_dir, dir.path(), args);
        std::fs::create_dir(&repo_dir).unwrap();
        git(&["init", "-q"]);
        std::fs::write(repo_dir.join("a.txt"), "a\n").unwrap();
        std::fs::write(repo_dir.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("a.txt", repo_dir.join("link")).unwrap();
        std::fs::write(repo_dir.join("hidden"), "h\n").unwrap();
        std::fs::write(repo_dir.join("assumed"), "s\n").unwrap();
        git(&["add", "."]);
        git(&["update-index", "--chmod=+x", "run.sh"]);
        git(&["commit", "-q", "-m", "one"]);
        let commit = git(&["rev-parse", "HEAD"]);
        git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{commit},sub"),
        ]);
        git(&["update-index", "--skip-worktree", "hidden"]);
        git(&["update-index", "--assume-unchanged", "assumed"]);
        let blob = git(&["hash-object", "-w", "a.txt"]);
        let stages: String = (1..=3)
            .map(|stage| format!("100644 {blob} {stage}\tconflict\n"))
            .collect();
        crate::test_git::git_stdin(
            &repo_dir,
            dir.path(),
            &["update-index", "--index-info"],
            stages.as_bytes(),
        );
        let listed = git(&["ls-files", "-s", "-v"]);
        for tag in [
            "H 100644", "H 100755", "H 120000", "H 160000", "S 100644", "h 100644", "M 100644",
        ] {
            assert!(listed.contains(tag), "no {tag:?} in {listed}");
        }

        let repo = gix::open(&repo_dir).unwrap();
        let index = repo.index_or_empty().unwrap();
        let location = Location {
            work_dir: repo_dir.clone(),
            git_dir: repo_dir.join(".git"),
            common_dir: repo_dir.join(".git"),
            explicit_git_dir: false,
        };
        // The tree git's next commit from this index would write is not
        // the point here (the conflict keeps write-tree from writing one):
        // only the entries are compared below.
        let compare = |state: gix::index::State| {
            let scratch = tempfile::tempdir().unwrap();
            let copy = crate::repo::index_copy::IndexCopy::take(&location.git_dir, scratch.path())
                .unwrap()
                .expect_copy();
            assert!(copy.still_the_index(&location.git_dir).unwrap());
            let reading = IndexReading::start(&location, std::sync::Arc::new(copy)).unwrap();
            let (ls_files, write_tree) = reading.finish().unwrap();
            let view = IndexView {
                entries: Some(Entries::Adjusted(Box::new(state))),
                tree: ObjectId::empty_tree(gix::hash::Kind::Sha1),
            };
            let mut out = Vec::new();
            let result = compare_index(&view, ls_files, write_tree, &mut |_, m| out.push(m));
            (result.map_err(|e| e.to_string()), out)
        };
        let as_read: gix::index::State = gix::index::State::clone(&index);
        // write-tree refuses an index with a conflict: the comparison
        // reports git's failure, after the entries.
        let (result, diffs) = compare(as_read.clone());
        assert!(diffs.is_empty(), "{diffs:#?}");
        assert!(result.unwrap_err().contains("git failed"));

        let mut changed = as_read.clone();
        let run = changed
            .entries()
            .iter()
            .position(|e| e.path(&changed) == "run.sh")
            .unwrap();
        changed.entries_mut()[run].mode = gix::index::entry::Mode::FILE;
        let (_, diffs) = compare(changed);
        assert_eq!(diffs.len(), 1, "{diffs:#?}");
        assert!(
            diffs[0].contains("H 100755") && diffs[0].contains("H 100644"),
            "{diffs:#?}"
        );

        let mut fewer = as_read;
        fewer.remove_entries(|_, path, _| path == "a.txt");
        let (_, diffs) = compare(fewer);
        assert!(
            diffs
                .iter()
                .any(|d| d.contains("git reads 9 index entries, verify 8")),
            "{diffs:#?}"
        );
    }

    #[test]
    fn a_symbolic_ref_cycle_resolves_to_nothing() {
        let ours = map(&[("refs/a", "ref:refs/b"), ("refs/b", "ref:refs/a")]);
        assert!(diffs_of(&ours, "").is_empty());
    }
}
