//! `working-tree-encoding`: a file is judged as git judges it (clean when git
//! calls it clean, modified when git does), under the encodings gix decodes
//! and under git's own UTF-16/UTF-32 family that only its iconv knows
//! (`UTF-16LE-BOM`, the spelling git's documentation recommends, any case or
//! dash; `UTF-32`, `UTF-32LE`/`BE`; issue 25), each compared with `git
//! status` on the same bytes. A combination grantguard does not reproduce
//! (`text=auto` with such an encoding) is refused with a message that names
//! the path and the encoding.

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

/// `text` in `encoding` as git would write it at checkout: with a
/// byte-order mark for the `-BOM` spellings and for `UTF-16`/`UTF-32`.
fn encoded(encoding: &str, text: &str) -> Vec<u8> {
    let upper = encoding
        .to_ascii_uppercase()
        .replace("UTF", "UTF-")
        .replace("UTF--", "UTF-");
    let u16s = |le: bool| -> Vec<u8> {
        text.encode_utf16()
            .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
            .collect()
    };
    let u32s = |le: bool| -> Vec<u8> {
        text.chars()
            .flat_map(|c| {
                let v = c as u32;
                if le { v.to_le_bytes() } else { v.to_be_bytes() }
            })
            .collect()
    };
    match upper.as_str() {
        "UTF-16LE-BOM" | "UTF-16" => [vec![0xff, 0xfe], u16s(true)].concat(),
        "UTF-16LE" => u16s(true),
        "UTF-16BE" => u16s(false),
        "UTF-32" => [vec![0xff, 0xfe, 0, 0], u32s(true)].concat(),
        "UTF-32LE" => u32s(true),
        "UTF-32BE" => u32s(false),
        other => panic!("no test encoder for {other}"),
    }
}

/// A sandbox whose baseline has `data/t.txt` under `attributes` (a line
/// for `data/*.txt`) holding `text`, written as `bytes`; armed, with one
/// granted commit, and the file's stat data made stale so that git and
/// verify compare content.
fn armed_with(attributes: &str, bytes: &[u8]) -> Sandbox {
    let sb = Sandbox::new();
    sb.write(".gitattributes", &format!("data/*.txt {attributes}\n"));
    std::fs::create_dir_all(sb.repo.join("data")).unwrap();
    std::fs::write(sb.repo.join("data/t.txt"), bytes).unwrap();
    sb.git_nohooks(&["add", "."]);
    sb.git_nohooks(&["commit", "-q", "-m", "encoded"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::write(sb.repo.join("data/t.txt"), bytes).unwrap();
    sb
}

/// Writes `bytes` to `data/t.txt`, then asserts verify decides as `git
/// status` does.
#[track_caller]
fn assert_agrees_with_git(sb: &Sandbox, bytes: &[u8], what: &str) {
    std::fs::write(sb.repo.join("data/t.txt"), bytes).unwrap();
    let status = sb.git(&["status", "--porcelain"]);
    let (code, r) = sb.verify();
    if status.is_empty() {
        assert_accepted(code, &r);
    } else {
        assert_eq!(status, " M data/t.txt", "{what}");
        assert_rejected(code, &r, &["worktree_not_clean"]);
        assert!(r.to_string().contains("data/t.txt"), "{what}: {r:#}");
    }
}

#[test]
fn judges_gits_utf16_and_utf32_family_as_git_status_does() {
    let text = "hello\nwörld 😀\n";
    for encoding in [
        "UTF-16LE-BOM",
        "utf16le-bom",
        "Utf-16le-Bom",
        "UTF-16",
        "UTF-32",
        "UTF-32LE",
        "utf32be",
        "UTF16LE",
        "UTF-16BE",
    ] {
        let bytes = encoded(encoding, text);
        let sb = armed_with(&format!("working-tree-encoding={encoding}"), &bytes);
        assert_eq!(
            sb.git(&["cat-file", "-p", "HEAD~1:data/t.txt"]),
            text.trim_end(),
            "git stores UTF-8 ({encoding})"
        );
        // As checked out: clean to git and to verify.
        assert_agrees_with_git(&sb, &bytes, encoding);
        assert!(sb.git(&["status", "--porcelain"]).is_empty(), "{encoding}");
        // Another text in the same encoding: modified to both.
        assert_agrees_with_git(&sb, &encoded(encoding, "changed\n"), encoding);
        // The same text in UTF-8: git decodes it as the encoding.
        assert_agrees_with_git(&sb, text.as_bytes(), encoding);
        // An odd byte count (no valid UTF-16/32): git compares raw bytes.
        assert_agrees_with_git(&sb, &[bytes.as_slice(), b"x"].concat(), encoding);
    }
}

#[test]
fn judges_byte_order_marks_as_git_does() {
    let text = "hello\nwörld\n";
    // UTF-16LE-BOM read as UTF-16: a big-endian mark is fine, no mark is
    // an error (raw bytes compared).
    let sb = armed_with(
        "working-tree-encoding=UTF-16LE-BOM",
        &encoded("UTF-16LE-BOM", text),
    );
    let be: Vec<u8> = [vec![0xfe, 0xff], encoded("UTF-16BE", text)].concat();
    assert_agrees_with_git(&sb, &be, "big-endian mark");
    assert_agrees_with_git(&sb, &encoded("UTF-16LE", text), "no mark");
    // A fixed byte order prohibits the mark.
    let sb = armed_with("working-tree-encoding=UTF-32LE", &encoded("UTF-32LE", text));
    let marked = [vec![0xff, 0xfe, 0, 0], encoded("UTF-32LE", text)].concat();
    assert_agrees_with_git(&sb, &marked, "prohibited mark");
}

#[test]
fn judges_the_documented_windows_script_setup_with_crlf() {
    // gitattributes(5): `*.ps1 text working-tree-encoding=UTF-16LE-BOM eol=CRLF`.
    let text = "one\r\ntwo\r\n";
    let bytes = encoded("UTF-16LE-BOM", text);
    let sb = armed_with("text working-tree-encoding=UTF-16LE-BOM eol=CRLF", &bytes);
    assert_eq!(sb.git(&["cat-file", "-p", "HEAD~1:data/t.txt"]), "one\ntwo");
    assert_agrees_with_git(&sb, &bytes, "as checked out");
    assert_agrees_with_git(
        &sb,
        &encoded("UTF-16LE-BOM", "one\ntwo\n"),
        "LF in the file",
    );
    assert_agrees_with_git(&sb, &encoded("UTF-16LE-BOM", "one\r\nthree\r\n"), "changed");
    let sb = armed_with("-text working-tree-encoding=UTF-16LE-BOM", &bytes);
    assert_agrees_with_git(&sb, &bytes, "-text as committed");
    assert_agrees_with_git(&sb, &encoded("UTF-16LE-BOM", "one\ntwo\n"), "-text, LF");
}

#[test]
fn refuses_what_it_does_not_reproduce_naming_path_and_encoding() {
    let sb = Sandbox::new();
    sb.write(
        ".gitattributes",
        "data/*.txt text=auto working-tree-encoding=UTF-16LE-BOM\n",
    );
    std::fs::create_dir_all(sb.repo.join("data")).unwrap();
    let bytes = encoded("UTF-16LE-BOM", "hello\n");
    std::fs::write(sb.repo.join("data/t.txt"), &bytes).unwrap();
    sb.git_nohooks(&["add", "."]);
    sb.git_nohooks(&["commit", "-q", "-m", "encoded"]);
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::write(sb.repo.join("data/t.txt"), &bytes).unwrap();
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    let grant = sb.grant(&["docs/"], 1, 1);
    let out = sb.arm_output(&grant, &sb.state);
    assert_eq!(out.status.code(), Some(1));
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    for needle in [
        "repository_unreadable",
        "data/t.txt",
        "working-tree-encoding=UTF-16LE-BOM",
        "text=auto",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }
}
