//! The tree `git commit` writes, read from the index's cache-tree root
//! without decoding the entries (`repo::commit_root`), against git itself:
//!
//! - every index git writes in its ordinary settings (`EOIE` and threads
//!   included, in both hashes) yields the tree `git write-tree` writes from
//!   it, and the settings that let git read entries from elsewhere (a split
//!   or a sparse index) leave the entries to read, as before;
//! - the index `git commit` hands the `pre-commit` hook (plain, `-a`,
//!   `--amend`) has a valid root naming exactly the tree of the commit git
//!   then makes: the premise of the hook's shortcut, on this git. A partial
//!   commit's temporary index has none, and is read whole;
//! - an index crafted so that git's threaded reading commits another
//!   cache-tree than its sequential one has no answer but a refusal, in
//!   SHA-1 and in SHA-256 (where git looks for the `EOIE` elsewhere than
//!   it writes it), and the armed hook refuses the commit.

mod common;
#[path = "support/index_bytes.rs"]
mod index_bytes;

use std::path::Path;

use common::Sandbox;
use grantguard::repo::commit_root::{Root, valid_root};
use index_bytes::{extension, header_hash, with_tree};

/// Both object formats, as `git init --object-format` and gix name them.
const FORMATS: [(&str, gix::hash::Kind); 2] = [
    ("sha1", gix::hash::Kind::Sha1),
    ("sha256", gix::hash::Kind::Sha256),
];

fn root_in(index: &Path, hash: gix::hash::Kind) -> Root<String> {
    match valid_root(index, hash) {
        Root::Tree(id) => Root::Tree(id.to_string()),
        Root::FromEntries => Root::FromEntries,
        Root::Ambiguous(why) => Root::Ambiguous(why),
    }
}

fn root(index: &Path) -> Root<String> {
    root_in(index, gix::hash::Kind::Sha1)
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
        &["index.threads=4"],
        &["index.recordEndOfIndexEntries=true"],
    ] {
        for (format, hash) in FORMATS {
            let sb = Sandbox::with_object_format(format);
            let tree = staged_with(&sb, config);
            let index = sb.git_dir().join("index");
            if config.first().is_some_and(|c| c.starts_with("index.re")) {
                let bytes = std::fs::read(&index).unwrap();
                assert!(bytes.windows(4).any(|w| w == b"EOIE"), "{format}: no EOIE");
            }
            assert_eq!(
                root_in(&index, hash),
                Root::Tree(tree),
                "{format} under {config:?}"
            );
        }
    }
}

#[test]
fn indexes_git_reads_entries_from_elsewhere_leave_them_to_read() {
    let sb = Sandbox::new();
    staged_with(
        &sb,
        &["core.splitIndex=true", "splitIndex.maxPercentChange=100"],
    );
    let index = sb.git_dir().join("index");
    let bytes = std::fs::read(&index).unwrap();
    assert!(bytes.windows(4).any(|w| w == b"link"), "git wrote no link");
    assert_eq!(root(&index), Root::FromEntries);
    // A sparse index: its directory entries are judged by the full read.
    let sb = Sandbox::new();
    sb.git(&["sparse-checkout", "set", "--cone", "--sparse-index", "docs"]);
    sb.git(&["write-tree"]);
    let index = sb.git_dir().join("index");
    let bytes = std::fs::read(&index).unwrap();
    assert!(bytes.windows(4).any(|w| w == b"sdir"), "git wrote no sdir");
    assert_eq!(root(&index), Root::FromEntries);
}

/// Commits with a `pre-commit` hook that keeps a copy of the index git
/// hands it; returns the root read from that copy and the commit's tree.
fn commit_seen_by_hook(sb: &Sandbox, args: &[&str]) -> (Root<String>, String) {
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
        assert_eq!(seen, Root::Tree(tree), "git commit {what}");
    }
    // git builds a partial commit's temporary index without a cache-tree
    // update: the hook reads its entries, as before. Never another tree.
    let (seen, tree) = partial;
    assert!(
        seen == Root::FromEntries || seen == Root::Tree(tree),
        "git commit <path>: {seen:?}"
    );
}

/// issue 24's attack on the shortcut: an unknown optional extension at the
/// end hides a cache-tree and an `EOIE` pointing at it. git's sequential
/// reading skips the extension and commits the visible cache-tree; its
/// threaded reading honours the `EOIE` and commits the hidden one. git
/// looks for an `EOIE` of SHA-1's size in either hash, and in SHA-256 its
/// hash runs on into the trailing checksum, which git does not verify:
/// the attack's checksum starts with the rest of that hash (red team).
/// Returns the crafted file, the visible tree (`staged_with`'s, or with
/// `staging` false the index's as it is) and the hidden one.
fn hiding_a_cache_tree(
    sb: &Sandbox,
    hash: gix::hash::Kind,
    staging: bool,
) -> (Vec<u8>, String, String) {
    let visible = if staging {
        staged_with(sb, &[])
    } else {
        sb.git(&["write-tree"]).trim().to_owned()
    };
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
    let hash_len = hash.len_in_bytes();
    let bytes = std::fs::read(sb.git_dir().join("index")).unwrap();
    let mut body = bytes[..bytes.len() - hash_len].to_vec();
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
    let headers = header_hash(&walked, hidden_at, hash);
    let mut eoie = (hidden_at as u32).to_be_bytes().to_vec();
    eoie.extend(&headers[..20]);
    data.extend(extension(b"EOIE", &eoie));
    body.extend(extension(b"ZZZZ", &data));
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(&body);
    let mut checksum = hasher.try_finalize().unwrap().as_slice().to_vec();
    checksum[..hash_len - 20].copy_from_slice(&headers[20..]);
    body.extend(checksum);
    (body, visible, hidden)
}

#[test]
fn a_cache_tree_only_the_threaded_reading_sees_has_no_answer_but_a_refusal() {
    for (format, hash) in FORMATS {
        let sb = Sandbox::with_object_format(format);
        let (body, visible, hidden) = hiding_a_cache_tree(&sb, hash, true);
        let index = sb.git_dir().join("index");
        let write_tree = |threads: &str| {
            std::fs::write(&index, &body).unwrap();
            sb.git(&["-c", threads, "write-tree"]).trim().to_owned()
        };
        assert_eq!(write_tree("index.threads=1"), visible, "{format}");
        assert_eq!(
            write_tree("index.threads=4"),
            hidden,
            "{format}: git's threaded reading honours the hidden EOIE"
        );
        std::fs::write(&index, &body).unwrap();
        assert!(
            matches!(root_in(&index, hash), Root::Ambiguous(_)),
            "{format}"
        );
    }
}

#[test]
fn the_armed_hook_refuses_a_commit_from_a_cache_tree_git_reads_two_ways() {
    for (format, hash) in FORMATS {
        let sb = Sandbox::with_object_format(format);
        // Granted: the visible staging, all under docs/, src/ and z.txt;
        // not the hidden tree's forged.md.
        sb.arm(&sb.grant(&["docs/", "src/", "z.txt", "README.md"], 1, 1));
        let head = sb.git(&["rev-parse", "HEAD"]);
        let (body, _, _) = hiding_a_cache_tree(&sb, hash, true);
        std::fs::write(sb.git_dir().join("index"), &body).unwrap();
        let out = sb.try_git(&["-c", "index.threads=4", "commit", "-q", "-m", "forged"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{format}: {stderr}");
        assert!(
            stderr.contains("the index cannot be judged"),
            "{format}: {stderr}"
        );
        assert!(stderr.contains("EOIE"), "{format}: {stderr}");
        assert_eq!(sb.git(&["rev-parse", "HEAD"]), head, "{format}");
    }
}

/// The same file left behind after a granted commit, its visible reading
/// the tip's tree: verify refuses it (git's next commit with threads would
/// commit the hidden tree), in SHA-256 too, where verify once looked for
/// the `EOIE` where git writes it, not where git reads it (red team).
#[test]
fn verify_refuses_a_cache_tree_git_reads_two_ways_left_after_a_granted_commit() {
    for (format, hash) in FORMATS {
        let sb = Sandbox::with_object_format(format);
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        sb.commit_file("docs/guide.md", "granted\n", "docs");
        let (code, r) = sb.verify();
        common::assert_accepted(code, &r);
        let (body, visible, _) = hiding_a_cache_tree(&sb, hash, false);
        assert_eq!(visible, sb.git(&["rev-parse", "HEAD^{tree}"]).trim());
        std::fs::write(sb.git_dir().join("index"), &body).unwrap();
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{format}: {r:#}");
        assert_eq!(common::rules(&r), ["worktree_not_clean"], "{format}: {r:#}");
        assert!(r.to_string().contains("EOIE"), "{format}: {r:#}");
    }
}

/// A tree like the index's but with `src/lib.rs` changed: what the
/// agent wants committed, written through a scratch index.
fn ungranted_tree(sb: &Sandbox) -> String {
    let scratch = sb.root.join("scratch-index");
    std::fs::copy(sb.git_dir().join("index"), &scratch).unwrap();
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "forged\n");
    let with_scratch = |args: &[&str]| sb.git_with_index(&scratch, args);
    let entry = format!("100644,{},src/lib.rs", blob.trim());
    with_scratch(&["update-index", "--add", "--cacheinfo", &entry]);
    with_scratch(&["write-tree"])
}

/// A root node naming `tree` over `count` entries whose count line is
/// `line` (with `{n}` for the count), then `after`.
fn root_node(line: &str, count: usize, tree: &str, after: &[u8]) -> Vec<u8> {
    let mut node = format!("\0{}", line.replace("{n}", &count.to_string())).into_bytes();
    node.extend(gix::ObjectId::from_hex(tree.as_bytes()).unwrap().as_slice());
    node.extend(after);
    node
}

/// Cache-tree forms no writer uses, which gits read differently: 2.45's
/// `strtol` honours `N 0x` and ` N 0`, 2.55's `parse_int` drops both and
/// honours `--N` (read as N), which `strtol` drops; every git honours a
/// root followed by bytes its nodes do not use. gix drops them all (red
/// team). Left after a granted commit, verify refuses each, whichever git
/// it runs beside; and this git honours at least the last.
#[test]
fn verify_refuses_a_cache_tree_in_a_form_gits_read_differently() {
    for (line, after) in [
        ("--{n} 0\n", &b""[..]),
        ("{n} 0x\n", b""),
        (" {n} 0\n", b""),
        ("{n} 0\n", b"junk"),
    ] {
        let sb = Sandbox::new();
        sb.git(&["config", "index.version", "2"]);
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        sb.commit_file("docs/guide.md", "granted\n", "docs");
        let evil = ungranted_tree(&sb);
        let count = sb.git(&["ls-files"]).lines().count();
        let index = sb.git_dir().join("index");
        let bytes = std::fs::read(&index).unwrap();
        let forged = with_tree(
            &bytes,
            gix::hash::Kind::Sha1,
            &root_node(line, count, &evil, after),
        );
        std::fs::write(&index, &forged).unwrap();
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{line:?}: {r:#}");
        assert_eq!(common::rules(&r), ["worktree_not_clean"], "{line:?}: {r:#}");
        assert!(r.to_string().contains("cache-tree"), "{line:?}: {r:#}");
        if !after.is_empty() {
            std::fs::write(&index, &forged).unwrap();
            assert_eq!(sb.git(&["write-tree"]).trim(), evil, "git honours the root");
        }
    }
}

/// A split index's and a sparse index's cache-tree is judged for its form
/// too: the shortcut leaves their entries to the full reading, which drops
/// a cache-tree git honours (red team: the hook passed, only the
/// reference-transaction hook stopped the commit).
#[test]
fn the_hook_refuses_a_split_or_sparse_index_whose_cache_tree_gits_read_differently() {
    for setup in [
        &["config", "core.splitIndex", "true"][..],
        &["sparse-checkout", "set", "--cone", "--sparse-index", "docs"],
    ] {
        let sb = Sandbox::new();
        sb.git(&["config", "index.version", "2"]);
        sb.git(setup);
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        let head = sb.git(&["rev-parse", "HEAD"]);
        sb.write("docs/guide.md", "granted\n");
        sb.git(&["add", "docs/guide.md"]);
        let staged = sb.git(&["write-tree"]);
        let evil = ungranted_tree(&sb);
        let index = sb.git_dir().join("index");
        let bytes = std::fs::read(&index).unwrap();
        let signature: &[u8; 4] = if setup[0] == "config" {
            b"link"
        } else {
            b"sdir"
        };
        assert!(bytes.windows(4).any(|w| w == signature), "{setup:?}");
        let count = sb.git(&["ls-files", "--sparse"]).lines().count();
        let node = root_node("{n} 0\n", count, &evil, b"junk");
        std::fs::write(&index, with_tree(&bytes, gix::hash::Kind::Sha1, &node)).unwrap();
        let out = sb.try_git(&["commit", "-q", "-m", "forged"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{setup:?}: {stderr}");
        assert!(
            stderr.contains("grantguard (pre-commit)"),
            "{setup:?}: {stderr}"
        );
        assert_eq!(sb.git(&["rev-parse", "HEAD"]), head, "{setup:?}");
        assert_ne!(staged, evil);
    }
}
