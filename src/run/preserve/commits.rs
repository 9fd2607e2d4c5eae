//! The commits the reset makes unreachable from the branch and HEAD, and the
//! index, as one git bundle.
//!
//! Its own module because it is the one place git writes objects: into a
//! scratch repository of ours (`git init --template=`, empty config), with
//! the checkout's object store as a read-only alternate. The index is
//! snapshotted from a copy (`write-tree`, which runs no program), the
//! commit is made and the bundle written by the scratch repository, so no
//! hook, signing program or other setting of the checkout takes part.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::git::{git, run_git, text};
use super::{BUNDLE, REF_BRANCH, REF_HEAD, REF_INDEX, REF_OTHER, Repo, absolute};

/// What the bundle holds.
pub(super) struct Snapshot {
    /// The commit whose tree is the index as the agent left it.
    pub index_commit: String,
    /// The refs in the bundle.
    pub bundle_refs: Vec<String>,
    /// The bundle.
    pub bundle_file: PathBuf,
}

/// Writes `dir/commits.bundle` (see the parent module), using `scratch`
/// (a directory of ours) for the scratch repository.
pub(super) fn snapshot(
    repo: &Repo,
    dir: &Path,
    scratch: &Path,
    object_format: &str,
    head: &Option<String>,
    branch_tip: &Option<String>,
) -> Result<Snapshot> {
    let work_dir = &repo.work_dir;
    // A scratch repository of ours: the index snapshot's objects go into
    // it (the checkout's object store is only read, as an alternate), and
    // it makes the bundle.
    let scratch_git = scratch.join("repo.git");
    run_git(
        &mut git(scratch),
        &[
            "init".as_ref(),
            "-q".as_ref(),
            "--bare".as_ref(),
            "--template=".as_ref(),
            format!("--object-format={object_format}").as_ref(),
            scratch_git.as_os_str(),
        ],
    )?;
    let objects = absolute(
        work_dir,
        &text(work_dir, &["rev-parse", "--git-path", "objects"])?,
    );
    let scratch_objects = scratch_git.join("objects");
    std::fs::create_dir_all(scratch_objects.join("info"))?;
    let mut alternates = objects.as_os_str().as_encoded_bytes().to_vec();
    alternates.push(b'\n');
    std::fs::write(scratch_objects.join("info/alternates"), alternates)?;

    // The index, as a tree and a commit in the scratch repository.
    let index = absolute(
        work_dir,
        &text(work_dir, &["rev-parse", "--git-path", "index"])?,
    );
    let index_copy = scratch.join("index");
    if index.exists() {
        // Read only when regular and bounded: the agent may have planted a
        // FIFO or a huge file there.
        let bytes =
            crate::fsutil::read_regular_limited(&index, crate::repo::index_layout::MAX_INDEX_BYTES)
                .with_context(|| format!("cannot copy the index {}", index.display()))?;
        std::fs::write(&index_copy, bytes)
            .with_context(|| format!("cannot copy the index {}", index.display()))?;
    }
    // write-tree runs in the checkout (a split index names its shared part
    // there), writing into the scratch object directory; it runs no
    // program. Everything else runs in the scratch repository, whose config
    // is empty (no `commit.gpgSign`, no hooks).
    let tree = git(work_dir)
        .env("GIT_INDEX_FILE", &index_copy)
        .env("GIT_OBJECT_DIRECTORY", &scratch_objects)
        .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &objects)
        .args(["write-tree"])
        .output()
        .context("cannot start git")?;
    if !tree.status.success() {
        bail!(
            "cannot snapshot the index ({}); unresolved conflicts cannot be preserved",
            String::from_utf8_lossy(&tree.stderr).trim()
        );
    }
    let tree = String::from_utf8_lossy(&tree.stdout).trim().to_owned();
    let in_scratch = || {
        let mut cmd = git(scratch);
        cmd.arg("--git-dir")
            .arg(&scratch_git)
            .env("GIT_AUTHOR_NAME", "grantguard")
            .env("GIT_AUTHOR_EMAIL", "grantguard@localhost")
            .env("GIT_COMMITTER_NAME", "grantguard")
            .env("GIT_COMMITTER_EMAIL", "grantguard@localhost");
        cmd
    };
    let mut args = vec![
        "commit-tree".to_owned(),
        "--no-gpg-sign".into(),
        tree,
        "-m".into(),
        "grantguard: the index as the agent left it".into(),
    ];
    if let Some(head) = &head {
        args.extend(["-p".into(), head.clone()]);
    }
    let index_commit = String::from_utf8_lossy(&run_git(&mut in_scratch(), &args)?)
        .trim()
        .to_owned();

    // The bundle: every tip not already in the baseline's history.
    let mut bundle_refs = vec![REF_INDEX.to_owned()];
    run_git(&mut in_scratch(), &["update-ref", REF_INDEX, &index_commit])?;
    // The other refs the agent changed, each under a name of ours: always
    // in the bundle (an annotated tag on a baseline commit is an object
    // the baseline does not reach).
    for (n, r) in repo.other_refs.iter().enumerate() {
        if let Some(id) = r.agent.as_deref().filter(|v| !v.starts_with("ref:")) {
            let name = format!("{REF_OTHER}{n}");
            run_git(&mut in_scratch(), &["update-ref", &name, id])?;
            bundle_refs.push(name);
        }
    }
    for (name, tip) in [(REF_HEAD, &head), (REF_BRANCH, &branch_tip)] {
        if let Some(tip) = tip {
            run_git(&mut in_scratch(), &["update-ref", name, tip])?;
            let beyond = match &repo.baseline {
                Some(base) => !run_git(
                    &mut in_scratch(),
                    &["rev-list", "-n", "1", tip, &format!("^{base}"), "--"],
                )?
                .is_empty(),
                None => true,
            };
            if beyond {
                bundle_refs.push(name.to_owned());
            }
        }
    }
    let bundle_file = dir.join(BUNDLE);
    let mut args: Vec<String> = vec!["bundle".into(), "create".into(), "-q".into()];
    args.push(bundle_file.display().to_string());
    args.extend(bundle_refs.iter().cloned());
    if let Some(base) = &repo.baseline {
        args.push(format!("^{base}"));
    }
    run_git(&mut in_scratch(), &args)?;
    run_git(
        &mut in_scratch(),
        &["bundle", "verify", "-q", &bundle_file.display().to_string()],
    )?;
    Ok(Snapshot {
        index_commit,
        bundle_refs,
        bundle_file,
    })
}
