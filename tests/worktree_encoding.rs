//! `working-tree-encoding`: a file under an encoding gix decodes is judged as
//! git judges it (clean when git calls it clean, modified when git does);
//! one under an encoding only git's iconv knows (`UTF-16LE-BOM`, the
//! spelling git's documentation recommends) is refused with a message that
//! names the path, the encoding and what to use instead.

mod common;

use common::{Sandbox, assert_accepted, assert_rejected};

/// `text` as UTF-16LE, with a byte-order mark when `bom`.
fn utf16le(text: &str, bom: bool) -> Vec<u8> {
    let mut out = if bom { vec![0xff, 0xfe] } else { Vec::new() };
    for unit in text.encode_utf16() {
        out.extend_from_slice(&unit.to_le_bytes());
    }
    out
}

/// Commits `data/t.txt` under `encoding` before arm, then makes its stat
/// data stale so that content decides (as after a checkout by the harness).
fn sandbox_with(encoding: &str, bom: bool) -> Sandbox {
    let sb = Sandbox::new();
    sb.write(
        ".gitattributes",
        &format!("data/*.txt working-tree-encoding={encoding}\n"),
    );
    std::fs::create_dir_all(sb.repo.join("data")).unwrap();
    std::fs::write(sb.repo.join("data/t.txt"), utf16le("hello\nwörld\n", bom)).unwrap();
    sb.git_nohooks(&["add", "."]);
    sb.git_nohooks(&["commit", "-q", "-m", "encoded"]);
    assert_eq!(
        sb.git(&["cat-file", "-p", "HEAD:data/t.txt"]),
        "hello\nwörld",
        "git stores UTF-8"
    );
    let bytes = std::fs::read(sb.repo.join("data/t.txt")).unwrap();
    std::fs::write(sb.repo.join("data/t.txt"), bytes).unwrap();
    sb
}

#[test]
fn accepts_utf16le_file_git_calls_clean() {
    let sb = sandbox_with("UTF-16LE", false);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    let bytes = std::fs::read(sb.repo.join("data/t.txt")).unwrap();
    std::fs::write(sb.repo.join("data/t.txt"), bytes).unwrap();
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
}

#[test]
fn rejects_utf16le_file_git_calls_modified() {
    let sb = sandbox_with("UTF-16LE", false);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    std::fs::write(
        sb.repo.join("data/t.txt"),
        utf16le("hello\nchanged\n", false),
    )
    .unwrap();
    assert_eq!(sb.git(&["status", "--porcelain"]), " M data/t.txt");
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["worktree_not_clean"]);
}

#[test]
fn rejects_arm_of_utf16le_bom_file_naming_encoding_and_remedy() {
    let sb = sandbox_with("UTF-16LE-BOM", true);
    // git itself calls the checkout clean ...
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    // ... but grantguard cannot decode it the way git does: refused,
    // saying exactly why and what to declare instead.
    let grant = sb.grant(&["docs/"], 1, 1);
    let out = sb.arm_output(&grant, &sb.state);
    assert_eq!(out.status.code(), Some(1));
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    for needle in [
        "repository_unreadable",
        "data/t.txt",
        "working-tree-encoding=UTF-16LE-BOM",
        "cannot decode",
        "UTF-16LE, which git writes without a byte-order mark",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }
    assert!(!text.contains("commit it"), "{text}");
}
