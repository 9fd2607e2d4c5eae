//! `working-tree-encoding`: a file is judged as git judges it (clean when git
//! calls it clean, modified when git does), under the encodings gix decodes
//! and under git's own UTF-16/UTF-32 family that only its iconv knows
//! (`UTF-16LE-BOM`, the spelling git's documentation recommends, any case or
//! dash; `UTF-32`, `UTF-32LE`/`BE`; issue 25), each compared with `git
//! status` on the same bytes, with the index entry's size known (a size
//! that differs is a change to git) and zeroed (as after `git update-index
//! --cacheinfo`: content decides). `UTF-16`, `UTF-16LE` and `UTF-16BE` are
//! judged the same way, not by gix's decoder. A combination grantguard does
//! not reproduce (`text=auto` with such an encoding, a name such as `ucs-2`
//! that iconv reads otherwise) is refused with a message that names the
//! path and the encoding.

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

/// How git and verify find `data/t.txt`'s index entry when they judge it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Entry {
    /// The stat data of the baseline file, whose mtime the new content
    /// does not have: content decides unless the size differs.
    Stat,
    /// Size 0, as after `git update-index --cacheinfo` (or a racily clean
    /// entry git smudged): content decides whatever the size.
    SizeZero,
}

/// Sets the mtime of `data/t.txt` to `secs` since the epoch.
fn set_mtime(sb: &Sandbox, secs: u64) {
    let path = sb.repo.join("data/t.txt");
    let status = std::process::Command::new("touch")
        .arg("-d")
        .arg(format!("@{secs}"))
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Puts `baseline` (the committed bytes) back, with an index entry whose
/// stat data is complete and not racy: git's own refresh of an entry of
/// size 0 records it once the content matches (`git add` cannot be used
/// for an encoding git fails to read, such as `UTF-16BE-BOM`).
fn restore(sb: &Sandbox, baseline: &[u8]) {
    std::fs::write(sb.repo.join("data/t.txt"), baseline).unwrap();
    set_mtime(sb, 1_000_000_000);
    let blob = sb.git(&["rev-parse", "HEAD:data/t.txt"]);
    sb.git(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{blob},data/t.txt"),
    ]);
    let _ = sb.try_git(&["update-index", "-q", "--refresh"]);
    let debug = sb.git(&["ls-files", "--debug", "data/t.txt"]);
    assert!(
        debug.contains(&format!("size: {}\t", baseline.len())),
        "stat data recorded: {debug}"
    );
    assert_eq!(
        sb.git(&["--no-optional-locks", "status", "--porcelain"]),
        ""
    );
}

/// Writes `bytes` to `data/t.txt` with the index entry as `entry` says,
/// then returns what `git status --porcelain` says (without refreshing the
/// index) and asserts that verify decides the same: accepted when git
/// says clean, rejected naming the file when git says modified.
#[track_caller]
fn judge(sb: &Sandbox, baseline: &[u8], bytes: &[u8], entry: Entry, what: &str) -> String {
    restore(sb, baseline);
    std::fs::write(sb.repo.join("data/t.txt"), bytes).unwrap();
    set_mtime(sb, 1_500_000_000);
    if entry == Entry::SizeZero {
        let blob = sb.git(&["rev-parse", "HEAD:data/t.txt"]);
        sb.git(&[
            "update-index",
            "--cacheinfo",
            &format!("100644,{blob},data/t.txt"),
        ]);
        assert!(
            sb.git(&["ls-files", "--debug", "data/t.txt"])
                .contains("size: 0\t")
        );
    }
    let (code, r) = sb.verify();
    let status = sb.git(&["--no-optional-locks", "status", "--porcelain"]);
    let what = format!("{what}, {entry:?} index entry, bytes {bytes:02x?}");
    if status.is_empty() {
        assert_eq!(
            (code, r["status"].as_str()),
            (0, Some("succeeded")),
            "git calls it clean ({what}): {r:#}"
        );
    } else {
        assert_eq!(status, " M data/t.txt", "{what}");
        assert_eq!(code, 1, "git calls it modified ({what}): {r:#}");
        assert_rejected(code, &r, &["worktree_not_clean"]);
        assert!(r.to_string().contains("data/t.txt"), "{what}: {r:#}");
    }
    status
}

/// F1: git reads `UTF-16LE-BOM` as iconv's `UTF-16` without requiring the
/// mark, so bytes without one are decoded (little-endian here), not
/// compared raw.
#[test]
fn utf16le_bom_without_a_mark_is_decoded_as_git_decodes_it() {
    for spelling in ["UTF-16LE-BOM", "utf16le-bom"] {
        let baseline = encoded("UTF-16LE-BOM", "hello\n");
        let sb = armed_with(&format!("working-tree-encoding={spelling}"), &baseline);
        assert_eq!(sb.git(&["cat-file", "-p", "HEAD:data/t.txt"]), "hello");
        // The red-team repro: the blob's own bytes, read as UTF-16, are
        // not the blob.
        let utf8 = b"hello\n";
        assert_eq!(
            judge(&sb, &baseline, utf8, Entry::SizeZero, spelling),
            " M data/t.txt"
        );
        // The same text without a mark is the blob to git.
        let unmarked = encoded("UTF-16LE", "hello\n");
        assert_eq!(
            judge(&sb, &baseline, &unmarked, Entry::SizeZero, spelling),
            ""
        );
        // ... but a size that differs from the index's is a change.
        assert_eq!(
            judge(&sb, &baseline, &unmarked, Entry::Stat, spelling),
            " M data/t.txt"
        );
        let be = [vec![0xfe, 0xff], encoded("UTF-16BE", "hello\n")].concat();
        assert_eq!(judge(&sb, &baseline, &be, Entry::Stat, spelling), "");
        assert_eq!(judge(&sb, &baseline, &be, Entry::SizeZero, spelling), "");
    }
}

/// F2: `UTF-16`, `UTF-16LE` and `UTF-16BE` are not decoded by gix, which
/// sniffs or strips a mark where git reports an error and compares raw
/// bytes.
#[test]
fn utf16_with_or_without_a_mark_is_judged_as_git_judges_it() {
    let text = "hello\n";
    let le = encoded("UTF-16LE", text);
    let be = encoded("UTF-16BE", text);
    let le_marked = [vec![0xff, 0xfe], le.clone()].concat();
    let be_marked = [vec![0xfe, 0xff], be.clone()].concat();
    for (encoding, baseline, edited) in [
        ("UTF-16", &le_marked, &le),
        ("UTF-16LE", &le, &le_marked),
        ("UTF-16BE", &be, &be_marked),
    ] {
        let sb = armed_with(&format!("working-tree-encoding={encoding}"), baseline);
        assert_eq!(sb.git(&["cat-file", "-p", "HEAD:data/t.txt"]), "hello");
        for entry in [Entry::SizeZero, Entry::Stat] {
            assert_eq!(
                judge(&sb, baseline, edited, entry, encoding),
                " M data/t.txt"
            );
            assert_eq!(judge(&sb, baseline, baseline, entry, encoding), "");
        }
    }
}

/// Every spelling of the family against every kind of content, with the
/// index entry's size known and zeroed: verify says what `git status` says.
#[test]
fn every_spelling_and_mark_agrees_with_git_status() {
    let text = "hi\r\nwörld 😀\n";
    let u16s = |le: bool, t: &str| -> Vec<u8> {
        t.encode_utf16()
            .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
            .collect()
    };
    let u32s = |le: bool, t: &str| -> Vec<u8> {
        t.chars()
            .flat_map(|c| {
                let v = c as u32;
                if le { v.to_le_bytes() } else { v.to_be_bytes() }
            })
            .collect()
    };
    let variants: Vec<(&str, Vec<u8>)> = vec![
        (
            "UTF-16LE, mark",
            [vec![0xff, 0xfe], u16s(true, text)].concat(),
        ),
        (
            "UTF-16BE, mark",
            [vec![0xfe, 0xff], u16s(false, text)].concat(),
        ),
        ("UTF-16LE", u16s(true, text)),
        ("UTF-16BE", u16s(false, text)),
        (
            "UTF-32LE, mark",
            [vec![0xff, 0xfe, 0, 0], u32s(true, text)].concat(),
        ),
        (
            "UTF-32BE, mark",
            [vec![0, 0, 0xfe, 0xff], u32s(false, text)].concat(),
        ),
        ("UTF-32LE", u32s(true, text)),
        ("UTF-32BE", u32s(false, text)),
        ("UTF-8", text.as_bytes().to_vec()),
        ("UTF-16LE, LF", u16s(true, &text.replace("\r\n", "\n"))),
        ("UTF-16LE, odd", [u16s(true, text), vec![b'x']].concat()),
        (
            "UTF-16LE, two marks",
            [vec![0xff, 0xfe, 0xff, 0xfe], u16s(true, text)].concat(),
        ),
        (
            "UTF-16LE, lone surrogate",
            [u16s(true, text), vec![0x00, 0xd8]].concat(),
        ),
        ("mark only", vec![0xff, 0xfe]),
        ("empty", Vec::new()),
    ];
    let mut outcomes = std::collections::BTreeSet::new();
    for attributes in [
        "working-tree-encoding=UTF-16LE-BOM",
        "working-tree-encoding=Utf16le-Bom",
        "working-tree-encoding=UTF-16",
        "working-tree-encoding=utf16",
        "working-tree-encoding=UTF-16LE",
        "working-tree-encoding=utf16le",
        "working-tree-encoding=UTF-16BE",
        "working-tree-encoding=UTF-32",
        "working-tree-encoding=UTF-32LE",
        "working-tree-encoding=utf-32be",
        "text working-tree-encoding=UTF-16LE-BOM",
        "-text working-tree-encoding=UTF-16",
        "eol=crlf working-tree-encoding=UTF-16LE",
    ] {
        let encoding = attributes.rsplit('=').next().unwrap();
        // As git writes it at checkout (`encoded` knows no CRLF rules).
        let baseline = encoded(encoding, text);
        let sb = armed_with(attributes, &baseline);
        for (name, bytes) in &variants {
            for entry in [Entry::Stat, Entry::SizeZero] {
                let what = format!("{attributes}, {name}");
                let status = judge(&sb, &baseline, bytes, entry, &what);
                outcomes.insert((entry, status.is_empty()));
            }
        }
    }
    // Both verdicts came up under both kinds of entry.
    assert_eq!(outcomes.len(), 4, "{outcomes:?}");
}

/// The other names `encoding_rs` gives UTF-16 are names iconv reads
/// otherwise: refused with the path and the encoding named, not decoded.
#[test]
fn refuses_other_names_for_utf16_naming_path_and_encoding() {
    for encoding in ["UCS-2", "unicode", "csUnicode"] {
        let sb = Sandbox::new();
        sb.write(
            ".gitattributes",
            &format!("data/*.txt working-tree-encoding={encoding}\n"),
        );
        sb.write("data/t.txt", "");
        sb.git_nohooks(&["add", "."]);
        sb.git_nohooks(&["commit", "-q", "-m", "encoded"]);
        let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
        assert_eq!(out.status.code(), Some(1), "{encoding}");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        for needle in [
            "repository_unreadable",
            "data/t.txt",
            &format!("working-tree-encoding={encoding}"),
        ] {
            assert!(text.contains(needle), "{needle:?} missing from {text}");
        }
    }
}

/// git converts CRLF on the way in for `text`, `text=input`, `eol=lf` and
/// `eol=crlf` only, spelled so: `eol=CRLF`, `eol=bogus` and a bare `eol`
/// are no `eol` to it, and CRLF then stays in the content it compares.
#[test]
fn converts_line_endings_for_exactly_the_attributes_git_honours() {
    let lf = encoded("UTF-16LE-BOM", "one\ntwo\n");
    let crlf = encoded("UTF-16LE-BOM", "one\r\ntwo\r\n");
    let mut verdicts = Vec::new();
    for eol in [
        "eol=CRLF",
        "eol=Lf",
        "eol=bogus",
        "eol",
        "eol=crlf",
        "eol=lf",
        "text=input",
        "text",
    ] {
        let sb = armed_with(&format!("{eol} working-tree-encoding=UTF-16LE-BOM"), &lf);
        assert_eq!(sb.git(&["cat-file", "-p", "HEAD:data/t.txt"]), "one\ntwo");
        let status = judge(&sb, &lf, &crlf, Entry::SizeZero, eol);
        let converts = ["eol=crlf", "eol=lf", "text=input", "text"].contains(&eol);
        assert_eq!(status.is_empty(), converts, "{eol}: git says {status:?}");
        verdicts.push(judge(&sb, &lf, &crlf, Entry::Stat, eol));
        assert_eq!(judge(&sb, &lf, &lf, Entry::SizeZero, eol), "", "{eol}");
    }
    assert!(
        verdicts.iter().all(|v| v == " M data/t.txt"),
        "{verdicts:?}"
    );
}

/// git converts neither a symlink (its target is compared) nor an
/// intent-to-add entry (reported as added): one matching the encoding's
/// pattern is judged as git judges it, not refused.
#[test]
fn symlinks_and_intent_to_add_under_the_encoding_are_judged_as_git_does() {
    let bytes = encoded("UTF-16", "hello\n");
    let sb = Sandbox::new();
    sb.write(
        ".gitattributes",
        "data/*.txt working-tree-encoding=UTF-16\n",
    );
    std::fs::create_dir_all(sb.repo.join("data")).unwrap();
    std::fs::write(sb.repo.join("data/t.txt"), &bytes).unwrap();
    std::os::unix::fs::symlink("t.txt", sb.repo.join("data/l.txt")).unwrap();
    sb.git_nohooks(&["add", "."]);
    sb.git_nohooks(&["commit", "-q", "-m", "encoded"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    std::fs::remove_file(sb.repo.join("data/l.txt")).unwrap();
    std::os::unix::fs::symlink("other.txt", sb.repo.join("data/l.txt")).unwrap();
    assert_eq!(sb.git(&["status", "--porcelain"]), " M data/l.txt");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert!(r.to_string().contains("data/l.txt"), "{r:#}");
    std::fs::remove_file(sb.repo.join("data/l.txt")).unwrap();
    std::os::unix::fs::symlink("t.txt", sb.repo.join("data/l.txt")).unwrap();
    std::fs::write(sb.repo.join("data/new.txt"), &bytes).unwrap();
    sb.git(&["add", "-N", "data/new.txt"]);
    assert_eq!(sb.git(&["status", "--porcelain"]), " A data/new.txt");
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(r.to_string().contains("data/new.txt"), "{r:#}");
}

/// The executable bit counts only with `core.fileMode` on, as in git.
#[test]
fn executable_bit_counts_as_core_filemode_says() {
    use std::os::unix::fs::PermissionsExt;
    for filemode in ["true", "false"] {
        let bytes = encoded("UTF-16LE-BOM", "hello\n");
        let sb = Sandbox::new();
        sb.git(&["config", "core.fileMode", filemode]);
        sb.write(
            ".gitattributes",
            "data/*.txt working-tree-encoding=UTF-16LE-BOM\n",
        );
        std::fs::create_dir_all(sb.repo.join("data")).unwrap();
        std::fs::write(sb.repo.join("data/t.txt"), &bytes).unwrap();
        sb.git_nohooks(&["add", "."]);
        sb.git_nohooks(&["commit", "-q", "-m", "encoded"]);
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        sb.commit_file("docs/a.md", "a\n", "docs");
        let path = sb.repo.join("data/t.txt");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let status = sb.git(&["--no-optional-locks", "status", "--porcelain"]);
        let (code, r) = sb.verify();
        if filemode == "true" {
            assert_eq!(status, " M data/t.txt");
            assert_rejected(code, &r, &["worktree_not_clean"]);
        } else {
            assert_eq!(status, "");
            assert_accepted(code, &r);
        }
    }
}

/// `UTF-16BE-BOM` and the `-BOM` spellings of UTF-32 are names iconv does
/// not know: git reports an error and compares the raw bytes (a baseline
/// git cannot `add`, so its blob is stored as the raw bytes).
#[test]
fn bom_spellings_iconv_does_not_know_compare_raw_bytes_as_git_does() {
    for encoding in ["UTF-16BE-BOM", "UTF-32LE-BOM", "utf32be-bom"] {
        let sb = Sandbox::new();
        sb.write(
            ".gitattributes",
            &format!("data/*.txt working-tree-encoding={encoding}\n"),
        );
        let baseline = [vec![0xfe, 0xff], encoded("UTF-16BE", "hello\n")].concat();
        std::fs::create_dir_all(sb.repo.join("data")).unwrap();
        std::fs::write(sb.repo.join("data/t.txt"), &baseline).unwrap();
        let blob = sb.git(&["hash-object", "-w", "--no-filters", "data/t.txt"]);
        sb.git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},data/t.txt"),
        ]);
        sb.git_nohooks(&["add", ".gitattributes"]);
        sb.git_nohooks(&["commit", "-q", "-m", "raw"]);
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        sb.commit_file("docs/a.md", "a\n", "docs");
        let utf8 = b"hello\n".to_vec();
        let le = [vec![0xff, 0xfe], encoded("UTF-16LE", "hello\n")].concat();
        for entry in [Entry::Stat, Entry::SizeZero] {
            assert_eq!(judge(&sb, &baseline, &baseline, entry, encoding), "");
            for other in [&utf8, &le] {
                assert_eq!(
                    judge(&sb, &baseline, other, entry, encoding),
                    " M data/t.txt"
                );
            }
        }
    }
}

/// The survey first asks which attribute files name `working-tree-encoding`
/// at all (one look per directory, not per path): an encoding is found
/// wherever git would find it. A deep directory after many others, a
/// directory whose files come after its subdirectory's, a macro from the
/// root used below, `info/attributes`, and a `.gitattributes` that is only
/// in the index (git reads the index's when the worktree has none).
#[test]
fn finds_an_encoding_wherever_the_attributes_name_it() {
    // What a case is called, the attribute files it writes, the path they
    // put under the encoding.
    type Layout = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static str,
    );
    let layouts: [Layout; 5] = [
        (
            "a deep directory",
            &[(
                "z/deep/.gitattributes",
                "*.txt working-tree-encoding=UCS-2\n",
            )],
            "z/deep/t.txt",
        ),
        (
            "files after a subdirectory's",
            &[("m/.gitattributes", "t.txt working-tree-encoding=UCS-2\n")],
            "m/t.txt",
        ),
        (
            "a macro from the root",
            &[
                (".gitattributes", "[attr]wide working-tree-encoding=UCS-2\n"),
                ("z/deep/.gitattributes", "*.txt wide\n"),
            ],
            "z/deep/t.txt",
        ),
        (
            "info/attributes",
            &[(
                ".git/info/attributes",
                "z/deep/t.txt working-tree-encoding=UCS-2\n",
            )],
            "z/deep/t.txt",
        ),
        (
            "the index only",
            &[(
                "z/deep/.gitattributes",
                "*.txt working-tree-encoding=UCS-2\n",
            )],
            "z/deep/t.txt",
        ),
    ];
    for (what, files, path) in layouts {
        let sb = Sandbox::new();
        for i in 0..20 {
            sb.write(&format!("a{i:02}/f.md"), "a\n");
        }
        sb.write("m/a/x.md", "x\n");
        sb.write("m/t.txt", "");
        sb.write("z/a.md", "a\n");
        sb.write("z/deep/t.txt", "");
        sb.write("z/zz.md", "z\n");
        for (file, text) in files {
            sb.write(file, text);
        }
        sb.git_nohooks(&["add", "."]);
        sb.git_nohooks(&["commit", "-q", "-m", "encoded"]);
        if what == "the index only" {
            std::fs::remove_file(sb.repo.join("z/deep/.gitattributes")).unwrap();
            assert_eq!(
                sb.git(&["check-attr", "working-tree-encoding", "--", path]),
                format!("{path}: working-tree-encoding: UCS-2"),
                "git reads the index's file"
            );
        }
        let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{what}: {text}");
        for needle in ["repository_unreadable", path, "working-tree-encoding=UCS-2"] {
            assert!(
                text.contains(needle),
                "{what}: {needle:?} missing from {text}"
            );
        }
    }
}

/// A file under an encoding read here, named by a macro of the root's
/// `.gitattributes` used deep below: verify judges it as `git status` does
/// (clean accepted, changed refused), which it does only if the survey
/// found the encoding.
#[test]
fn judges_a_file_whose_encoding_a_nested_macro_names_as_git_does() {
    let sb = Sandbox::new();
    sb.write(
        ".gitattributes",
        "[attr]wide working-tree-encoding=UTF-16LE-BOM\n",
    );
    for i in 0..20 {
        sb.write(&format!("a{i:02}/f.md"), "a\n");
    }
    sb.write("z/deep/.gitattributes", "*.txt wide\n");
    let bytes = encoded("UTF-16LE-BOM", "hello\n");
    std::fs::create_dir_all(sb.repo.join("z/deep")).unwrap();
    std::fs::write(sb.repo.join("z/deep/t.txt"), &bytes).unwrap();
    sb.git_nohooks(&["add", "."]);
    sb.git_nohooks(&["commit", "-q", "-m", "encoded"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::write(sb.repo.join("z/deep/t.txt"), &bytes).unwrap();
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    std::fs::write(
        sb.repo.join("z/deep/t.txt"),
        encoded("UTF-16LE-BOM", "hellO\n"),
    )
    .unwrap();
    assert_eq!(sb.git(&["status", "--porcelain"]), " M z/deep/t.txt");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert!(r.to_string().contains("z/deep/t.txt"), "{r:#}");
}
