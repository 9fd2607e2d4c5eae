//! The git config as git reads it for the worktree being armed, and which of
//! its files outrank the repository's own `config`.
//!
//! `arm` writes `core.hooksPath` and the transport lock into the
//! repository's `config`. That file wins over the system and global config,
//! but not over everything: `config.worktree` (with
//! `extensions.worktreeConfig`), any file the repository config includes
//! (`include.path`, `includeIf.*.path`, whatever the condition: conditions
//! such as `onbranch:` change with the agent's work, and an include placed
//! after arm's key overrides it) and `GIT_CONFIG_*` variables come later.
//! A transport setting there would reopen a transport, so `arm` refuses
//! with the key and the file. A `core.hooksPath` there (a team's hooks
//! configured per worktree or in a shared included file) is outranked
//! instead: `arm` writes its own value where git reads it last (the end of
//! `config` after the includes, or the end of `config.worktree`) and chains
//! the team's hooks; only `GIT_CONFIG_*` variables cannot be outranked.

use std::path::PathBuf;

use anyhow::{Context, Result};
use gix::bstr::BStr;

use crate::repo::Location;

/// One value of a key, and where it comes from.
pub struct Setting {
    /// Which kind of scope sets it.
    pub origin: Origin,
    /// The subsection (`file` in `protocol.file.allow`), if any.
    pub subsection: Option<String>,
    /// The value as written.
    pub value: String,
    /// The file (or source) that sets it.
    pub from: String,
}

/// The config scopes that matter to `arm`.
pub struct Scopes {
    /// Every scope git reads for this worktree (system, global, the
    /// repository's, its includes, this worktree's `config.worktree`,
    /// environment overrides).
    pub all: gix::config::File,
    /// The files and sources that outrank the repository's `config`, each
    /// with where it comes from.
    outranking: Vec<(Origin, gix::config::File)>,
}

/// Where a scope that outranks the repository's `config` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A file the repository's `config` includes (directly or not): a value
    /// appended at the end of `config` comes after it.
    ConfigInclude,
    /// This worktree's `config.worktree` or a file it includes: only a value
    /// at the end of `config.worktree` comes after it.
    WorktreeConfig,
    /// `GIT_CONFIG_*` variables: nothing in a file outranks them.
    Environment,
}

const CONTEXT: &str = "cannot read the git configuration to arm";

impl Scopes {
    /// Reads the scopes of the worktree at `location`.
    pub fn read(location: &Location) -> Result<Scopes> {
        // `from_git_dir` takes the dir holding `config` (the common dir) and
        // reads the `config.worktree` beside it, which belongs to the main
        // worktree only; a linked worktree's own is in its git dir.
        let local_path = location.common_dir.join("config");
        let local = gix::config::File::from_path_no_includes(
            local_path.clone(),
            gix::config::Source::Local,
        )
        .context(CONTEXT)?;
        let worktree_config = matches!(local.boolean("extensions.worktreeConfig"), Ok(Some(true)));
        let mut all = match gix::config::File::from_git_dir(location.common_dir.clone()) {
            Ok(all) => all,
            // gix refuses a missing main `config.worktree` under
            // `extensions.worktreeConfig`, which git reads as empty (a
            // sparse checkout set up in a linked worktree leaves exactly
            // that): the same scopes without it.
            Err(_) if worktree_config && !location.common_dir.join("config.worktree").exists() => {
                let mut all = gix::config::File::from_globals().context(CONTEXT)?;
                all.append(local.clone()).context(CONTEXT)?;
                for path in crate::repo::config_includes::included_files(&local_path)? {
                    if path.is_file() {
                        all.append(
                            gix::config::File::from_path_no_includes(
                                path,
                                gix::config::Source::Local,
                            )
                            .context(CONTEXT)?,
                        )
                        .context(CONTEXT)?;
                    }
                }
                if let Some(env) =
                    gix::config::File::from_env(Default::default()).context(CONTEXT)?
                {
                    all.append(env).context(CONTEXT)?;
                }
                all
            }
            Err(e) => return Err(e).context(CONTEXT),
        };
        let mut outranking = Vec::new();
        let mut files: Vec<(Origin, PathBuf)> =
            crate::repo::config_includes::included_files(&local_path)?
                .into_iter()
                .map(|p| (Origin::ConfigInclude, p))
                .collect();
        let own = location.git_dir.join("config.worktree");
        if worktree_config && own.is_file() {
            files.push((Origin::WorktreeConfig, own.clone()));
            files.extend(
                crate::repo::config_includes::included_files(&own)?
                    .into_iter()
                    .map(|p| (Origin::WorktreeConfig, p)),
            );
            let linked = location.git_dir != location.common_dir;
            if linked {
                let file =
                    gix::config::File::from_path_no_includes(own, gix::config::Source::Worktree)
                        .context(CONTEXT)?;
                all.append(file).context(CONTEXT)?;
            }
        }
        for (origin, path) in files.into_iter().filter(|(_, p)| p.is_file()) {
            outranking.push((
                origin,
                gix::config::File::from_path_no_includes(path, gix::config::Source::Local)
                    .context(CONTEXT)?,
            ));
        }
        if let Some(env) = gix::config::File::from_env(Default::default()).context(CONTEXT)? {
            outranking.push((Origin::Environment, env));
        }
        Ok(Scopes { all, outranking })
    }

    /// Every value of `section.<sub>.key` (any subsection) set in a scope
    /// that outranks the repository's `config`.
    pub fn outranking(&self, section: &str, key: &str) -> Vec<Setting> {
        let mut out = Vec::new();
        for (origin, file) in &self.outranking {
            for s in file.sections_by_name(section).into_iter().flatten() {
                for value in s.values(key) {
                    let value: &BStr = value.as_ref();
                    let meta = s.meta();
                    out.push(Setting {
                        origin: *origin,
                        subsection: s.header().subsection_name().map(|n| n.to_string()),
                        value: value.to_string(),
                        from: meta.path.as_ref().map_or_else(
                            || format!("the {:?} configuration", meta.source),
                            |p| p.display().to_string(),
                        ),
                    });
                }
            }
        }
        out
    }
}
