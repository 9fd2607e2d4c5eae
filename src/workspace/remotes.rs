//! The repositories the host's remotes name by a local path, which the
//! command may not write: pushing there is publishing, and `git clone` of
//! a local path hard-links its objects from there (writing them through
//! that path would change the host's objects).
//!
//! Reading `remote.*.url` of the local config alone left a push URL set
//! any other way writable (new user, twenty-third stop on issue 29: the
//! agent pushed to the origin through `pushurl` and the run succeeded),
//! and asking `git remote -v` alone missed what git resolves at push time
//! (red team, same stop: twelve ways). So the URLs are gathered wide, and
//! each is resolved as git's transport resolves a local path:
//!
//! - **Which URLs**: `remote.<name>.url` and `pushurl`, and the values
//!   that may name a remote by its URL (`remote.pushDefault`,
//!   `branch.<name>.remote` and `pushRemote`), from every config file git
//!   reads (every git on `PATH`: each has its own system file and prefix,
//!   and the agent may run any), its includes followed whatever their conditions (an `includeIf
//!   "onbranch:..."` holds once the agent switches branch; `%(prefix)/`
//!   taken as the resolved git's install prefix), and from the
//!   environment's config (`GIT_CONFIG_COUNT`, `git -c`); the legacy
//!   `remotes/` and `branches/` files; what `git remote -v` lists; each of
//!   these rewritten by every `url.<base>.insteadOf` and `pushInsteadOf`
//!   that matches it, not only the longest. The words of a command git
//!   runs to reach a remote (`ext::` URLs, `remote.<name>.receivepack`
//!   and `uploadpack`) count as paths too, as does a remote helper's
//!   address (`<helper>::<address>`). The submodules' remotes count: each
//!   submodule git dir's config, and `.gitmodules` (a relative URL taken
//!   against each of the superproject's local remotes).
//! - **Which path**: `file://` with or without a host, percent-decoded;
//!   `~` and `~user`; a path with a colon after a slash (git's
//!   `url_is_local_not_ssh`); relative ones against the worktree (git
//!   runs a push at its top, which `/proc/self/cwd` then names); and
//!   with its `..` taken lexically as well (the agent can make the
//!   directory a `..` climbs out of); `<scheme>:///path` as a path.
//! - **Which repository**: among the path and the names git tries for it
//!   (`/.git`, `.git/.git`, `.git`), each that is a git dir (a `HEAD`,
//!   and `objects` or a `commondir`), or a `.git` file naming one; its
//!   common dir; each store's `objects` (where a symlink leads) and its
//!   alternates; and where every symlink in the git dir's top, its
//!   `refs/` and its `objects/` leads. A git dir is frozen on its own, never
//!   the worktree around it: an origin whose worktree holds the checkout
//!   is still read-only where a push writes, and a remote naming a
//!   directory that is no repository (`~`, a scratch directory) freezes
//!   nothing (red team, second round: it froze `HOME`).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::trusted_git::TrustedGit;
use crate::repo::Location;

/// How deep git follows includes (`MAX_INCLUDE_DEPTH`).
const MAX_INCLUDE_DEPTH: usize = 10;

/// Every directory, other than the host's own, through which a push to
/// one of the host's remotes named by a local path could write: the
/// remote's git dir, common dir and object stores, canonical.
pub fn local_repositories(git: &TrustedGit, host: &Location) -> Result<Vec<PathBuf>> {
    let mut config = Config::read(git, host)?;
    // The submodules' remotes are publishing targets too (red team,
    // fourth round): their git dirs' config, and `.gitmodules` for those
    // not yet cloned.
    let mut submodule_files = submodule_configs(&host.common_dir.join("modules"), 0);
    submodule_files.push(host.work_dir.join(".gitmodules"));
    config.prefix = None;
    config.follow(git.program(), host, submodule_files, &mut BTreeSet::new());
    let mut written = config.written_urls();
    written.extend(legacy_urls(&host.common_dir));
    written.extend(listed_urls(git, host)?);
    let urls = config.rewritten(written);
    let mut found = Found::new(host);
    let mut local = BTreeSet::new();
    for url in &urls {
        local.extend(local_paths(url, &host.work_dir));
    }
    with_relative_submodules(&mut local, &urls);
    for path in &local {
        found.repositories_at(path);
    }
    for command in &config.commands {
        for word in shell_words(command) {
            for path in local_paths(&word, &host.work_dir) {
                found.repositories_at(&path);
            }
        }
    }
    if let Some(why) = found.refused {
        bail!("{why}");
    }
    Ok(found.dirs)
}

/// The config values that name remotes and rewrite their URLs, from every
/// file git reads and the environment's config.
#[derive(Default)]
struct Config {
    /// `(key, value)`, the key as git lists it (section and variable
    /// lowercased, a subsection as written).
    values: Vec<(Vec<u8>, Vec<u8>)>,
    /// Commands git runs to reach a remote (`receivepack`, `uploadpack`).
    commands: Vec<Vec<u8>>,
    /// The resolved git's install prefix, for `%(prefix)/` in includes.
    prefix: Option<PathBuf>,
}

impl Config {
    /// The config as the resolved git reads it (an error: it cannot), and
    /// as every other git on `PATH` does (each its own system file and
    /// install prefix; the agent may run any: red team, third round).
    fn read(git: &TrustedGit, host: &Location) -> Result<Config> {
        let mut config = Config::default();
        let mut seen = BTreeSet::new();
        config.read_with(git.program(), host, &mut seen)?;
        for other in super::trusted_git::every_on_path("git") {
            if other != git.program() {
                // A git that cannot list its config is one the agent
                // cannot push with either.
                let _ = config.read_with(&other, host, &mut seen);
            }
        }
        Ok(config)
    }

    /// Adds the config `program` reads, each include followed once
    /// (`seen`) whatever its condition.
    fn read_with(
        &mut self,
        program: &Path,
        host: &Location,
        seen: &mut BTreeSet<PathBuf>,
    ) -> Result<()> {
        // `<prefix>/bin/git`, as git's runtime prefix finds its own.
        self.prefix = program
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        let config = self;
        // Every top-level file and the environment's config, includes not
        // followed: they are followed below, whatever their conditions.
        let listed = git_output(
            program,
            host,
            &["config", "--list", "-z", "--show-origin", "--no-includes"],
        )?;
        let mut files = Vec::new();
        let mut fields = listed.split(|&b| b == 0);
        while let (Some(origin), Some(entry)) = (fields.next(), fields.next()) {
            // (git names a file relative to where it runs: the top.)
            let file = origin
                .strip_prefix(b"file:")
                .map(|f| host.work_dir.join(bytes_path(f)));
            config.take(entry, file.as_deref(), &mut files);
        }
        config.follow(program, host, files, seen);
        Ok(())
    }

    /// Adds each config file of `files` and what it includes, as
    /// `program` reads a file, each once (`seen`) whatever its condition.
    fn follow(
        &mut self,
        program: &Path,
        host: &Location,
        mut files: Vec<PathBuf>,
        seen: &mut BTreeSet<PathBuf>,
    ) {
        let config = self;
        let mut depth = 0;
        while !files.is_empty() && depth <= MAX_INCLUDE_DEPTH {
            depth += 1;
            for file in std::mem::take(&mut files) {
                if !seen.insert(file.clone()) || !file.is_file() {
                    continue;
                }
                let mut args = vec![OsStr::new("config"), OsStr::new("--file")];
                args.push(file.as_os_str());
                args.extend(["--list", "-z", "--no-includes"].map(OsStr::new));
                // An included file git cannot parse fails git too.
                let Ok(listed) = git_output(program, host, &args) else {
                    continue;
                };
                for entry in listed.split(|&b| b == 0) {
                    config.take(entry, Some(&file), &mut files);
                }
            }
        }
    }

    /// Keeps one `key NL value` entry of a listing of `file` (`None`: the
    /// environment's config), and queues the file an include names.
    fn take(&mut self, entry: &[u8], file: Option<&Path>, includes: &mut Vec<PathBuf>) {
        let Some(nl) = entry.iter().position(|&b| b == b'\n') else {
            return;
        };
        let (key, value) = (&entry[..nl], &entry[nl + 1..]);
        let lower = key.to_ascii_lowercase();
        if lower.starts_with(b"include") && lower.ends_with(b".path") {
            // git reads the name as it is (`:(optional)` is for path-typed
            // variables only); a later git may take the prefix in an
            // include too, so both are read: more frozen, never less.
            let mut values = vec![value];
            values.extend(value.strip_prefix(b":(optional)"));
            for value in values {
                let target = match (value.strip_prefix(b"%(prefix)/"), &self.prefix) {
                    (Some(rest), Some(prefix)) => prefix.join(bytes_path(rest)),
                    _ => expand_home(&bytes_path(value)),
                };
                let target = match (target.is_relative(), file.and_then(Path::parent)) {
                    (true, Some(dir)) => dir.join(target),
                    (true, None) => continue,
                    (false, _) => target,
                };
                includes.push(target);
            }
        } else if lower.starts_with(b"remote.")
            && (lower.ends_with(b".receivepack") || lower.ends_with(b".uploadpack"))
        {
            self.commands.push(value.to_vec());
        } else if lower.starts_with(b"remote.")
            || lower.starts_with(b"url.")
            || lower.starts_with(b"branch.")
            || lower.starts_with(b"submodule.")
        {
            self.values.push((key.to_vec(), value.to_vec()));
        }
    }

    /// The values that name a remote's URL as written: each `url` and
    /// `pushurl`, and the remote names of `remote.pushDefault` and
    /// `branch.<name>.remote` and `pushRemote`, which may be URLs.
    fn written_urls(&self) -> Vec<Vec<u8>> {
        let names_url = |lower: &[u8]| {
            (lower.starts_with(b"remote.")
                && (lower.ends_with(b".url")
                    || lower.ends_with(b".pushurl")
                    || lower == b"remote.pushdefault"))
                || (lower.starts_with(b"branch.")
                    && (lower.ends_with(b".remote") || lower.ends_with(b".pushremote")))
                || (lower.starts_with(b"submodule.") && lower.ends_with(b".url"))
        };
        self.values
            .iter()
            .filter(|(key, _)| names_url(&key.to_ascii_lowercase()))
            .map(|(_, value)| value.clone())
            .collect()
    }

    /// `urls`, and each rewritten by every `insteadOf` and `pushInsteadOf`
    /// rule that matches it.
    fn rewritten(&self, urls: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut rewrites = Vec::new();
        for (key, value) in &self.values {
            let lower = key.to_ascii_lowercase();
            if lower.starts_with(b"url.")
                && (lower.ends_with(b".insteadof") || lower.ends_with(b".pushinsteadof"))
            {
                let dot = key
                    .iter()
                    .rposition(|&b| b == b'.')
                    .expect("a key with a dot");
                rewrites.push((key[4..dot].to_vec(), value.clone()));
            }
        }
        let mut out = urls.clone();
        for url in &urls {
            for (base, prefix) in &rewrites {
                if let Some(rest) = url.strip_prefix(prefix.as_slice()) {
                    out.push([base.as_slice(), rest].concat());
                }
            }
        }
        out
    }
}

/// Adds to `local` each relative submodule URL of `urls` (`../sub.git`)
/// taken against each path already there: git takes one against a remote
/// of the superproject. Against the paths found before only: against the
/// derived ones too, the list doubled with every relative URL (red team,
/// fifth round: with 20 of them a run never started).
fn with_relative_submodules(local: &mut BTreeSet<PathBuf>, urls: &[Vec<u8>]) {
    let bases: Vec<PathBuf> = local.iter().cloned().collect();
    for url in urls
        .iter()
        .filter(|u| u.starts_with(b"./") || u.starts_with(b"../"))
    {
        for base in &bases {
            local.insert(lexical(&base.join(bytes_path(url))));
        }
    }
}

/// The config file of every submodule git dir under `modules` (a
/// submodule's own submodules are under its `modules/`).
fn submodule_configs(modules: &Path, depth: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(modules) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        if depth > 16 || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if is_git_dir(&dir) {
            out.push(dir.join("config"));
            out.extend(submodule_configs(&dir.join("modules"), depth + 1));
        } else {
            // A name with a slash: `modules/a/b`.
            out.extend(submodule_configs(&dir, depth + 1));
        }
    }
    out
}

/// The URLs of the legacy remote files: `remotes/<name>` (`URL:` lines)
/// and `branches/<name>` (`<url>#<branch>`), which git still reads.
fn legacy_urls(common_dir: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let read = |dir: &str| -> Vec<Vec<u8>> {
        let Ok(entries) = std::fs::read_dir(common_dir.join(dir)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| crate::fsutil::read_regular_limited(&e.path(), 1 << 20).ok())
            .collect()
    };
    for text in read("remotes") {
        for line in text.split(|&b| b == b'\n') {
            if let Some(url) = line.strip_prefix(b"URL:") {
                out.push(url.trim_ascii().to_vec());
            }
        }
    }
    for text in read("branches") {
        let line = text.split(|&b| b == b'\n').next().unwrap_or_default();
        let url = line.split(|&b| b == b'#').next().unwrap_or_default();
        out.push(url.trim_ascii().to_vec());
    }
    out
}

/// Every fetch and push URL `git remote -v` lists: the rewriting as git
/// does it, with the conditions that hold now.
fn listed_urls(git: &TrustedGit, host: &Location) -> Result<Vec<Vec<u8>>> {
    let listed = git_output(git.program(), host, &["remote", "-v"])?;
    Ok(parse_listing(&listed))
}

/// The URLs of `git remote -v` lines (`<name> TAB <url> (fetch)` or
/// `(push)`).
fn parse_listing(listing: &[u8]) -> Vec<Vec<u8>> {
    listing
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let tab = line.iter().position(|&b| b == b'\t')?;
            let rest = &line[tab + 1..];
            let url = rest
                .strip_suffix(b" (fetch)")
                .or_else(|| rest.strip_suffix(b" (push)"))?;
            Some(url.to_vec())
        })
        .collect()
}

/// The output of the resolved git with `args`, run at the host's worktree
/// top with its git dir named and this process's environment (which the
/// command inherits: its config counts).
fn git_output<S: AsRef<OsStr>>(program: &Path, host: &Location, args: &[S]) -> Result<Vec<u8>> {
    let out = Command::new(program)
        .arg("--git-dir")
        .arg(&host.git_dir)
        .args(args)
        .current_dir(&host.work_dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", program.display()))?;
    if !out.status.success() {
        bail!(
            "git cannot list the remotes of {}, whose local ones the command must not write: {}",
            host.work_dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// The local paths a URL can reach: the path it names (and that path
/// with its `..` taken lexically), or, for an `ext::` URL, each word of
/// the command git runs.
fn local_paths(url: &[u8], work_dir: &Path) -> Vec<PathBuf> {
    if let Some(command) = url.strip_prefix(b"ext::") {
        return shell_words(command)
            .iter()
            .flat_map(|word| local_paths(word, work_dir))
            .collect();
    }
    // `<helper>::<address>`: git runs `git-remote-<helper>` with the
    // address, which may be a local path (git-remote-gcrypt's; red team,
    // fourth round).
    if let Some(at) = url.windows(2).position(|w| w == b"::")
        && !url[..at].contains(&b'/')
    {
        return local_paths(&url[at + 2..], work_dir);
    }
    let Some(path) = local_path(url, work_dir) else {
        return Vec::new();
    };
    let lexical = lexical(&path);
    if lexical == path {
        vec![path]
    } else {
        vec![path, lexical]
    }
}

/// The words of a shell command line, quotes and backslashes taken as
/// the shell takes them (what git runs for `receivepack`, `uploadpack`
/// and `ext::` is a shell command).
fn shell_words(command: &[u8]) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let mut word: Option<Vec<u8>> = None;
    let mut quote = None;
    let mut bytes = command.iter().copied();
    while let Some(b) = bytes.next() {
        match (quote, b) {
            (None, b' ' | b'\t' | b'\n') => words.extend(word.take()),
            (None, b'\'' | b'"') => {
                quote = Some(b);
                word.get_or_insert_with(Vec::new);
            }
            (Some(q), _) if b == q => quote = None,
            (None | Some(b'"'), b'\\') => {
                word.get_or_insert_with(Vec::new).extend(bytes.next());
            }
            _ => word.get_or_insert_with(Vec::new).push(b),
        }
    }
    words.extend(word);
    words
}

/// `path` with each `..` removing the component before it, as if every
/// directory on the way existed.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    out.push(component);
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The local path a URL names, as git's transport takes it (`None`: not a
/// local path).
fn local_path(url: &[u8], work_dir: &Path) -> Option<PathBuf> {
    let path = if let Some(rest) = url.strip_prefix(b"file://") {
        // `file://host/path`: the host is not looked at.
        let start = rest.iter().position(|&b| b == b'/')?;
        crate::repo::canonical::percent_decode(&rest[start..])
    } else if let Some(at) = url.windows(4).position(|w| w == b":///") {
        // Another scheme with no host (`rsync:///path`): a local path to
        // a helper.
        url[at + 3..].to_vec()
    } else {
        // git's `url_is_local_not_ssh`: no colon, or a slash before it.
        let colon = url.iter().position(|&b| b == b':');
        let slash = url.iter().position(|&b| b == b'/');
        match (colon, slash) {
            (Some(c), Some(s)) if s < c => {}
            (Some(_), _) => return None,
            (None, _) => {}
        }
        if url.windows(3).any(|w| w == b"://") {
            return None;
        }
        url.to_vec()
    };
    if path.is_empty() {
        return None;
    }
    // The process's own directory names the worktree's top when git
    // pushes, not grantguard's (red team, fourth round).
    for own in [&b"/proc/self/cwd"[..], b"/proc/thread-self/cwd"] {
        if let Some(rest) = path.strip_prefix(own)
            && (rest.is_empty() || rest.starts_with(b"/"))
        {
            let rest = bytes_path(rest.strip_prefix(b"/").unwrap_or(rest));
            return Some(work_dir.join(rest));
        }
    }
    Some(work_dir.join(expand_home(&bytes_path(&path))))
}

/// `~` expanded as git expands a path
/// ([`crate::repo::config_includes::expand_home`]); one git cannot expand
/// as it is.
fn expand_home(path: &Path) -> PathBuf {
    crate::repo::config_includes::expand_home(path.as_os_str().as_bytes())
        .unwrap_or_else(|| path.to_path_buf())
}

fn bytes_path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// The directories found to freeze, and the host they must not cover.
struct Found<'a> {
    host: &'a Location,
    dirs: Vec<PathBuf>,
    /// The directories [`Found::symlinks_within`] walked.
    walked: BTreeSet<PathBuf>,
    /// Why a remote cannot be kept read-only, if one cannot.
    refused: Option<String>,
}

impl<'a> Found<'a> {
    fn new(host: &'a Location) -> Found<'a> {
        Found {
            host,
            dirs: Vec::new(),
            walked: BTreeSet::new(),
            refused: None,
        }
    }

    /// The repositories git finds for the local path `path`: the path and
    /// the names git's `enter_repo` tries, each a directory or a `.git`
    /// file naming one.
    fn repositories_at(&mut self, path: &Path) {
        for suffix in ["/.git", "", ".git/.git", ".git"] {
            let mut candidate = path.as_os_str().to_owned();
            candidate.push(suffix);
            let candidate = PathBuf::from(candidate);
            if is_git_dir(&candidate) {
                self.repository(&candidate, 0);
            } else if let Some(dir) = gitfile_target(&candidate).filter(|d| is_git_dir(d)) {
                self.repository(&dir, 0);
            }
        }
    }

    /// A directory git may take for a repository, its common dir, its
    /// object stores.
    fn repository(&mut self, dir: &Path, depth: usize) {
        let Ok(dir) = dir.canonicalize() else {
            return;
        };
        if depth > 2 || self.dirs.contains(&dir) {
            return;
        }
        self.add(&dir);
        if let Ok(common) = crate::fsutil::read_regular_limited(&dir.join("commondir"), 1 << 20) {
            let common = bytes_path(common.trim_ascii_end());
            self.repository(&dir.join(common), depth + 1);
        }
        if let Ok(objects) = dir.join("objects").canonicalize() {
            self.add(&objects);
            self.symlinks_within(&objects);
            for store in super::alternates(&objects) {
                self.add(&store);
            }
        }
        // A push writes through a symlink the read-only git dir holds
        // (red team, second round: `refs/` led out of the origin).
        self.symlinks_within(&dir);
    }

    /// Freezes where each symlink anywhere under `dir` leads, and walks
    /// on into a symlinked directory (red team, fifth round: `refs/heads`
    /// led to a directory whose own symlink led on, and that last
    /// directory stayed writable). Each directory is walked once, whole
    /// (sixth round: a depth budget left a directory first reached near
    /// its end, or 64 levels down, unwalked). A symlink to a directory
    /// that holds the checkout or `HOME`, or to `/`, is refused rather
    /// than followed: freezing it would freeze what the command needs,
    /// and walking it would walk the machine (sixth round: 4,596 paths
    /// frozen, 10 s).
    fn symlinks_within(&mut self, dir: &Path) {
        let mut queue = vec![dir.to_path_buf()];
        while let Some(dir) = queue.pop() {
            let Ok(canonical) = dir.canonicalize() else {
                continue;
            };
            if !self.walked.insert(canonical) {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_symlink() {
                    let Ok(target) = entry.path().canonicalize() else {
                        continue;
                    };
                    if self.too_broad(&target) {
                        self.refused.get_or_insert_with(|| {
                            format!(
                                "{} is a symlink to {}, which holds the checkout or HOME: the \
                                 repository it is in, a remote of the host, cannot be kept \
                                 read-only without it; remove the symlink, or run without \
                                 --isolate",
                                entry.path().display(),
                                target.display()
                            )
                        });
                        continue;
                    }
                    self.add(&target);
                    if target.is_dir() {
                        queue.push(target);
                    }
                } else if kind.is_dir() {
                    queue.push(entry.path());
                }
            }
        }
    }

    /// Whether freezing `target` would freeze what the command needs: `/`,
    /// or a directory holding the checkout, its git dir or `HOME`.
    fn too_broad(&self, target: &Path) -> bool {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let needed = [
            Some(self.host.work_dir.as_path()),
            Some(self.host.common_dir.as_path()),
            home.as_deref(),
        ];
        target.parent().is_none()
            || needed
                .into_iter()
                .flatten()
                .any(|needed| needed.starts_with(target))
    }

    /// Keeps `dir` unless it is, holds or lies within the host's worktree
    /// or common dir (freezing those would freeze the workspace).
    fn add(&mut self, dir: &Path) {
        let Location {
            work_dir,
            common_dir,
            ..
        } = self.host;
        let overlaps = |host: &Path| dir.starts_with(host) || host.starts_with(dir);
        if !overlaps(work_dir) && !overlaps(common_dir) && !self.dirs.iter().any(|d| d == dir) {
            self.dirs.push(dir.to_path_buf());
        }
    }
}

/// Whether `dir` is a git dir as git's `is_git_directory` tells one: a
/// `HEAD`, and `objects` or a `commondir` (a linked worktree's).
fn is_git_dir(dir: &Path) -> bool {
    dir.is_dir()
        && dir.join("HEAD").exists()
        && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
}

/// The git dir a `.git` file at `path` names, read as the submodule
/// checks read one ([`crate::repo::submodule_meta::resolve_gitfile`]).
fn gitfile_target(path: &Path) -> Option<PathBuf> {
    if !path.is_file() {
        return None;
    }
    let text = crate::fsutil::read_regular_limited(path, 1 << 20).ok()?;
    crate::repo::submodule_meta::resolve_gitfile(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host checkout at `work`, with its `.git` directory.
    fn host_at(work: &Path) -> Location {
        Location {
            work_dir: work.to_path_buf(),
            git_dir: work.join(".git"),
            common_dir: work.join(".git"),
            explicit_git_dir: false,
        }
    }

    #[test]
    fn the_listing_gives_each_url_with_its_spaces() {
        let listing = b"origin\t/srv/a b/origin.git (fetch)\norigin\tfile:///srv/push.git (push)\n\
                       odd line\n";
        assert_eq!(
            parse_listing(listing),
            [&b"/srv/a b/origin.git"[..], b"file:///srv/push.git"]
        );
    }

    #[test]
    fn a_url_names_a_local_path_as_git_reads_it() {
        let work = Path::new("/w/co");
        let path = |url: &str| local_path(url.as_bytes(), work);
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
        for (url, expected) in [
            ("/srv/o.git", Some(PathBuf::from("/srv/o.git"))),
            ("file:///srv/o.git", Some("/srv/o.git".into())),
            ("file://localhost/srv/o.git", Some("/srv/o.git".into())),
            ("file:///srv/o%2Egit", Some("/srv/o.git".into())),
            ("../o.git", Some("/w/co/../o.git".into())),
            ("../a:b/o.git", Some("/w/co/../a:b/o.git".into())),
            ("~/o.git", Some(home.join("o.git"))),
            (
                "~root/o.git",
                crate::repo::config_includes::home_of(b"root").map(|h| h.join("o.git")),
            ),
            ("https://example.invalid/o.git", None),
            ("example.invalid:o.git", None),
            ("ssh://example.invalid/o.git", None),
            ("file://nohostpath", None),
            ("gcrypt::/srv/o.git", None),
            ("rsync:///srv/o.git", Some("/srv/o.git".into())),
            ("/proc/self/cwd/../o.git", Some("/w/co/../o.git".into())),
            ("", None),
        ] {
            assert_eq!(path(url), expected, "{url}");
        }
    }

    #[test]
    fn every_matching_rewrite_counts() {
        let config = Config {
            values: vec![
                (b"remote.origin.url".to_vec(), b"m:o.git".to_vec()),
                (
                    b"remote.origin.pushurl".to_vec(),
                    b"https://h/o.git".to_vec(),
                ),
                (b"url./srv/.insteadOf".to_vec(), b"m:".to_vec()),
                (b"url./long/.insteadof".to_vec(), b"m:o".to_vec()),
                (b"url./push/.pushInsteadOf".to_vec(), b"https://h/".to_vec()),
                (b"branch.main.pushRemote".to_vec(), b"/srv/b.git".to_vec()),
                (b"remote.pushDefault".to_vec(), b"/srv/d.git".to_vec()),
            ],
            ..Config::default()
        };
        let urls: BTreeSet<Vec<u8>> = config
            .rewritten(config.written_urls())
            .into_iter()
            .collect();
        for url in [
            "m:o.git",
            "https://h/o.git",
            "/srv/o.git",
            "/long/.git",
            "/push/o.git",
            "/srv/b.git",
            "/srv/d.git",
        ] {
            assert!(urls.contains(url.as_bytes()), "{url}: {urls:?}");
        }
    }

    #[test]
    fn a_repository_is_found_by_the_names_git_tries_and_frozen_where_a_push_writes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        // The host checkout inside a non-bare origin's worktree.
        let origin = root.join("origin");
        let work = origin.join("agents/co");
        std::fs::create_dir_all(work.join(".git")).unwrap();
        let git_dir = |dir: &Path| {
            std::fs::create_dir_all(dir.join("objects")).unwrap();
            std::fs::create_dir_all(dir.join("refs")).unwrap();
            std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        };
        git_dir(&origin.join(".git"));
        // A bare repository named without its `.git`, and a `.git` file.
        git_dir(&root.join("bare.git"));
        git_dir(&root.join("real.git"));
        std::fs::write(root.join("link.git"), "gitdir: real.git\n").unwrap();
        // The bare one's branches kept out of it, through a symlink, and
        // a symlink there leading further.
        let elsewhere = root.join("elsewhere");
        let further = root.join("further");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::create_dir_all(&further).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join("bare.git/refs/heads")).unwrap();
        std::os::unix::fs::symlink(&further, elsewhere.join("team")).unwrap();
        // A directory that is no repository (a remote `~`).
        let plain = root.join("plain");
        std::fs::create_dir_all(plain.join("objects")).unwrap();
        let host = host_at(&work);
        let mut found = Found::new(&host);
        for path in [
            origin.clone(),
            root.join("bare"),
            root.join("link"),
            plain.clone(),
        ] {
            found.repositories_at(&path);
        }
        for frozen in [
            origin.join(".git"),
            origin.join(".git/objects"),
            root.join("bare.git"),
            root.join("real.git"),
            elsewhere,
            further,
        ] {
            assert!(found.dirs.contains(&frozen), "{frozen:?}: {:?}", found.dirs);
        }
        assert!(!found.dirs.contains(&origin), "it holds the checkout");
        assert!(
            !found.dirs.iter().any(|d| d.starts_with(&plain)),
            "no repository: {:?}",
            found.dirs
        );
    }

    #[test]
    fn a_command_splits_into_words_as_the_shell_splits_it() {
        let words = shell_words(br#"git receive-pack '/a b/o.git' "x\"y" c\ d #"#);
        let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        assert_eq!(
            words,
            [
                &b"git"[..],
                b"receive-pack",
                b"/a b/o.git",
                b"x\"y",
                b"c d",
                b"#"
            ]
        );
        assert!(shell_words(b"  ").is_empty());
        assert_eq!(shell_words(b"''"), [Vec::<u8>::new()]);
    }

    #[test]
    fn symlinks_are_followed_at_any_depth_but_not_to_what_the_command_needs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let work = root.join("co");
        std::fs::create_dir_all(work.join(".git")).unwrap();
        let host = host_at(&work);
        let origin = root.join("origin.git");
        for sub in ["objects", "refs/heads"] {
            std::fs::create_dir_all(origin.join(sub)).unwrap();
        }
        std::fs::write(origin.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        // 70 directories down, and first reached through a symlink from
        // `objects/info`: still walked whole.
        let deep = (0..70).fold(origin.join("refs/heads"), |d, _| d.join("a"));
        std::fs::create_dir_all(&deep).unwrap();
        let far = root.join("far");
        std::fs::create_dir_all(&far).unwrap();
        std::os::unix::fs::symlink(&far, deep.join("team")).unwrap();
        std::os::unix::fs::symlink(origin.join("refs"), origin.join("objects/info")).unwrap();
        let mut found = Found::new(&host);
        found.repositories_at(&origin);
        assert!(found.dirs.contains(&far), "{:?}", found.dirs);
        assert!(found.refused.is_none());
        // A symlink to the directory holding the checkout.
        std::os::unix::fs::symlink(&root, origin.join("refs/up")).unwrap();
        let mut found = Found::new(&host);
        found.repositories_at(&origin);
        let why = found.refused.expect("refused");
        assert!(why.contains("holds the checkout or HOME"), "{why}");
        assert!(!found.dirs.contains(&root));
    }

    #[test]
    fn relative_submodule_urls_are_taken_against_each_remote_once() {
        let mut local: BTreeSet<PathBuf> = ["/srv/super.git", "/srv/mirror/super.git"]
            .map(PathBuf::from)
            .into();
        let urls: Vec<Vec<u8>> = (0..40)
            .map(|i| format!("../s{i}.git").into_bytes())
            .chain([b"https://h/o.git".to_vec()])
            .collect();
        with_relative_submodules(&mut local, &urls);
        assert_eq!(local.len(), 2 + 2 * 40);
        assert!(local.contains(Path::new("/srv/s39.git")));
        assert!(local.contains(Path::new("/srv/mirror/s0.git")));
    }

    #[test]
    fn a_path_also_counts_with_its_dot_dots_taken_lexically() {
        let work = Path::new("/w/co");
        assert_eq!(
            local_paths(b"/w/co/nd/../../o.git", work),
            [PathBuf::from("/w/co/nd/../../o.git"), "/w/o.git".into()]
        );
        assert_eq!(
            local_paths(b"gcrypt::/srv/o.git", work),
            [PathBuf::from("/srv/o.git")]
        );
        assert_eq!(
            local_paths(b"ext::git %s /srv/o.git", work),
            [
                PathBuf::from("/w/co/git"),
                "/w/co/%s".into(),
                "/srv/o.git".into()
            ]
        );
    }
}
