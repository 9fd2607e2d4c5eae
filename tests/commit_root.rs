//! The tree `git commit` writes, read from the index's cache-tree root
//! without decoding the entries (`repo::commit_root`), against git itself:
//!
//! - every index git writes in its ordinary settings yields the tree `git
//!   write-tree` writes from it, and the settings that let git read an
//!   index two ways (`EOIE`), or read entries from elsewhere (a split or a
//!   sparse index), yield nothing, so the hook decodes the entries as
//!   before;
//! - the index `git commit` hands the `pre-commit` hook (plain, `-a`,
//!   `--amend`) has a valid root naming exactly the tree of the commit git
//!   then makes: the premise of the hook's shortcut, on this git. A partial
//!   commit's temporary index has none, and is read whole.

mod common;

use std::path::Path;

use common::Sandbox;
use grantguard::repo::commit_root::valid_root;

fn root(index: &Path) -> Option<String> {
    valid_root(index, gix::hash::Kind::Sha1).map(|id| id.to_string())
}

/// A few files in nested directories and a skip-worktree entry (extended
/// flags), staged under `config`; the cache-tree brought up to date by
/// `git write-tree`, whose tree is returned. (git leaves every node above
/// an intent-to-add entry invalid: such an index has no valid root.)
fn staged_with(sb: &Sandbox, config: &[&str]) -> String {
    for c in config {
        let (key, value) = c.split_once('=').unwrap();
        sb.git(&["config", key, value]);
    }
    for (path, content) in [
        ("docs/a.md", "a\n"),
        ("docs/deep/er/b.md", "b\n"),
        ("src/main.rs", "fn main() {}\n"),
        ("z.txt", "z\n"),
    ] {
        sb.write(path, content);
    }
    sb.git(&["add", "docs", "src", "z.txt"]);
    sb.git(&["update-index", "--skip-worktree", "README.md"]);
    // Written again, so that every setting (a new version, a split) shows.
    sb.git(&["update-index", "--force-write-index"]);
    sb.git(&["write-tree"]).trim().to_owned()
}

#[test]
fn indexes_git_reads_one_way_yield_the_tree_git_writes() {
    for config in [
        &[][..],
        &["index.version=2"],
        &["index.version=3"],
        &["index.version=4"],
        &["index.skipHash=true"],
        &["feature.manyFiles=true"],
    ] {
        let sb = Sandbox::new();
        let tree = staged_with(&sb, config);
        assert_eq!(
            root(&sb.git_dir().join("index")),
            Some(tree),
            "under {config:?}"
        );
    }
}

#[test]
fn indexes_git_may_read_otherwise_yield_nothing() {
    for config in [
        &["index.threads=4"][..],
        &["index.recordEndOfIndexEntries=true"],
        &["core.splitIndex=true", "splitIndex.maxPercentChange=100"],
    ] {
        let sb = Sandbox::new();
        staged_with(&sb, config);
        let index = sb.git_dir().join("index");
        let bytes = std::fs::read(&index).unwrap();
        assert!(
            bytes.windows(4).any(|w| w == b"EOIE" || w == b"link"),
            "under {config:?}, git wrote neither an EOIE nor a link"
        );
        assert_eq!(root(&index), None, "under {config:?}");
    }
    // A sparse index: its directory entries are judged by the full read.
    let sb = Sandbox::new();
    sb.git(&["sparse-checkout", "set", "--cone", "--sparse-index", "docs"]);
    sb.git(&["write-tree"]);
    let index = sb.git_dir().join("index");
    let bytes = std::fs::read(&index).unwrap();
    assert!(bytes.windows(4).any(|w| w == b"sdir"), "git wrote no sdir");
    assert_eq!(root(&index), None);
}

/// Commits with a `pre-commit` hook that keeps a copy of the index git
/// hands it; returns the root read from that copy and the commit's tree.
fn commit_seen_by_hook(sb: &Sandbox, args: &[&str]) -> (Option<String>, String) {
    let hooks = sb.root.join("copying-hooks");
    let copy = sb.root.join("index-at-pre-commit");
    let _ = std::fs::remove_file(&copy);
    std::fs::create_dir_all(&hooks).unwrap();
    common::script(
        &hooks.join("pre-commit"),
        &format!(
            "cp \"${{GIT_INDEX_FILE:-.git/index}}\" '{}'",
            copy.display()
        ),
    );
    let setting = format!("core.hooksPath={}", hooks.display());
    let mut all = vec!["-c", setting.as_str()];
    all.extend_from_slice(args);
    sb.git(&all);
    let tree = sb.git(&["rev-parse", "HEAD^{tree}"]).trim().to_owned();
    (root(&copy), tree)
}

#[test]
fn git_commit_hands_the_hook_a_valid_root_naming_the_tree_it_commits() {
    let sb = Sandbox::new();
    // Staged, with the cache-tree invalidated above the change.
    sb.write("docs/one.md", "one\n");
    sb.git(&["add", "docs/one.md"]);
    let plain = commit_seen_by_hook(&sb, &["commit", "-q", "-m", "plain"]);
    // Every tracked change, staged by commit itself.
    sb.write("docs/guide.md", "changed\n");
    let all = commit_seen_by_hook(&sb, &["commit", "-q", "-a", "-m", "all"]);
    // Only the named path, through a temporary index.
    sb.write("docs/one.md", "one, changed\n");
    sb.write("src/lib.rs", "pub fn g() {}\n");
    sb.git(&["add", "src/lib.rs"]);
    let partial = commit_seen_by_hook(&sb, &["commit", "-q", "-m", "partial", "docs/one.md"]);
    // Amending.
    sb.write("docs/two.md", "two\n");
    sb.git(&["add", "docs/two.md"]);
    let amend = commit_seen_by_hook(&sb, &["commit", "-q", "--amend", "-m", "amended"]);
    for (what, (seen, tree)) in [("plain", plain), ("-a", all), ("--amend", amend)] {
        assert_eq!(seen, Some(tree), "git commit {what}");
    }
    // git builds a partial commit's temporary index without a cache-tree
    // update: the hook reads its entries, as before. Never another tree.
    let (seen, tree) = partial;
    assert!(
        seen.is_none() || seen == Some(tree),
        "git commit <path>: {seen:?}"
    );
}

/// SHA-1 over each extension header from `offset` to the end of `body`:
/// the hash git's `EOIE` carries.
fn header_hash(body: &[u8], offset: usize) -> Vec<u8> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    let mut at = offset;
    while at + 8 <= body.len() {
        hasher.update(&body[at..at + 8]);
        let size = u32::from_be_bytes(body[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 8 + size;
    }
    hasher.try_finalize().unwrap().as_slice().to_vec()
}

fn extension(sig: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = sig.to_vec();
    out.extend((data.len() as u32).to_be_bytes());
    out.extend(data);
    out
}

/// issue 24's attack on the shortcut: an unknown optional extension at the
/// end hides a cache-tree and an `EOIE` pointing at it. git's sequential
/// reading skips the extension and commits the visible cache-tree; its
/// threaded reading honours the `EOIE` and commits the hidden one. The
/// shortcut reads sequentially, so it must not answer at all.
#[test]
fn a_cache_tree_only_the_threaded_reading_sees_leaves_the_shortcut_without_an_answer() {
    let sb = Sandbox::new();
    let visible = staged_with(&sb, &[]);
    let hidden = sb
        .git_stdin(
            &["mktree"],
            &format!(
                "100644 blob {}\tforged.md\n",
                sb.git_stdin(&["hash-object", "-w", "--stdin"], "forged\n")
                    .trim()
            ),
        )
        .trim()
        .to_owned();
    let index = sb.git_dir().join("index");
    let bytes = std::fs::read(&index).unwrap();
    let mut body = bytes[..bytes.len() - 20].to_vec();
    // The hidden extension: a cache-tree whose root is valid and names
    // the forged tree, then the EOIE that points at it.
    let count = sb.git(&["ls-files"]).lines().count();
    let mut node = format!("\0{count} 0\n").into_bytes();
    node.extend(
        gix::ObjectId::from_hex(hidden.as_bytes())
            .unwrap()
            .as_slice(),
    );
    let tree = extension(b"TREE", &node);
    let hidden_at = body.len() + 8;
    let eoie_len = 8 + 4 + 20;
    let mut data = tree.clone();
    let mut walked = body.clone();
    walked.extend(b"ZZZZ");
    walked.extend(((tree.len() + eoie_len) as u32).to_be_bytes());
    walked.extend(&tree);
    let mut eoie = (hidden_at as u32).to_be_bytes().to_vec();
    eoie.extend(header_hash(&walked, hidden_at));
    data.extend(extension(b"EOIE", &eoie));
    body.extend(extension(b"ZZZZ", &data));
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(&body);
    body.extend(hasher.try_finalize().unwrap().as_slice());

    let write_tree = |threads: &str| {
        std::fs::write(&index, &body).unwrap();
        sb.git(&["-c", threads, "write-tree"]).trim().to_owned()
    };
    assert_eq!(write_tree("index.threads=1"), visible);
    assert_eq!(
        write_tree("index.threads=4"),
        hidden,
        "git's threaded reading honours the hidden EOIE"
    );
    std::fs::write(&index, &body).unwrap();
    assert_eq!(root(&index), None);
}
