//! Input limits: huge and hostile inputs get a clear error or a correct
//! decision, in bounded time and memory, never a panic. Each big case prints
//! its wall time and peak memory (`/usr/bin/time`); docs/threat-model.md quotes
//! them.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{Sandbox, rules};

/// Runs grantguard with `args` (and `stdin`), measuring wall time and peak
/// RSS through /usr/bin/time when it exists.
fn measure(sb: &Sandbox, label: &str, args: &[&str], stdin: &[u8]) -> Output {
    let time = Path::new("/usr/bin/time");
    let report = sb.root.join("time.txt");
    let mut cmd: Command = if time.exists() {
        let mut c = sb.command(time);
        c.args(["-f", "%e %M", "-o", report.to_str().unwrap()])
            .arg(env!("CARGO_BIN_EXE_grantguard"));
        c
    } else {
        sb.command(env!("CARGO_BIN_EXE_grantguard"))
    };
    let started = std::time::Instant::now();
    let mut child = cmd
        .current_dir(&sb.repo)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let elapsed = started.elapsed();
    let (secs, rss_kb) = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| {
            let last = t.lines().last()?.to_owned();
            let mut it = last.split_whitespace();
            Some((
                it.next()?.parse::<f64>().ok()?,
                it.next()?.parse::<u64>().ok()?,
            ))
        })
        .unwrap_or((elapsed.as_secs_f64(), 0));
    eprintln!("LIMITS {label}: {secs:.2}s, peak RSS {} MiB", rss_kb / 1024);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{label} panicked: {stderr}");
    assert_ne!(out.status.code(), Some(101), "{label} panicked: {stderr}");
    assert!(elapsed.as_secs() < 30, "{label} took {elapsed:?}");
    assert!(rss_kb < 512 * 1024, "{label} used {rss_kb} KiB");
    out
}

fn grant_file(sb: &Sandbox, name: &str, paths: &[String]) -> std::path::PathBuf {
    let path = sb.root.join(name);
    let doc = serde_json::json!({"repository_grant": {
        "version": "1", "allowed_paths": paths,
        "commit_count": {"min": 1, "max": 1}, "publish": false}});
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn arm_args<'a>(sb: &'a Sandbox, grant: &'a Path) -> Vec<&'a str> {
    vec![
        "arm",
        "--repo",
        sb.repo.to_str().unwrap(),
        "--grant",
        grant.to_str().unwrap(),
        "--state",
        sb.state.to_str().unwrap(),
    ]
}

#[test]
fn a_grant_of_ten_thousand_patterns_is_decided_in_bounded_time() {
    let sb = Sandbox::new();
    let mut paths: Vec<String> = (0..9_999).map(|i| format!("docs/p{i}/**/*.md")).collect();
    paths.push("docs/guide.md".into());
    let grant = grant_file(&sb, "big-grant.json", &paths);
    let st = sb.state.to_str().unwrap().to_owned();
    let out = measure(
        &sb,
        "grant check, 10,000 patterns",
        &["grant", "check", grant.to_str().unwrap()],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = measure(&sb, "arm, 10,000 patterns", &arm_args(&sb, &grant), b"");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sb.commit_file("docs/guide.md", "ok\n", "granted");
    sb.commit_file("src/lib.rs", "// no\n", "ungranted");
    let out = measure(
        &sb,
        "verify, 10,000 patterns",
        &["verify", "--json", "--state", &st],
        b"",
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rules(&r),
        ["commit_count_out_of_bounds", "path_not_granted"],
        "{r:#}"
    );
    let line = format!(
        "{head} {head} refs/heads/main\n",
        head = sb.git(&["rev-parse", "HEAD"])
    );
    let out = measure(
        &sb,
        "reference-transaction hook, 10,000 patterns",
        &[
            "hook",
            "reference-transaction",
            "--state",
            &st,
            "--",
            "prepared",
        ],
        line.as_bytes(),
    );
    assert!(!out.status.success(), "the ungranted tip is refused");
}

#[test]
fn patterns_and_paths_of_4096_bytes_are_decided_correctly() {
    let sb = Sandbox::new();
    // 20 segments of 200 bytes under docs/: a 4,025-byte path.
    let long: String = (0..20)
        .map(|i| format!("{}{i:02}", "a".repeat(198)))
        .collect::<Vec<_>>()
        .join("/");
    let granted = format!("docs/{long}");
    let pattern_4096 = format!("docs/{}", "b".repeat(4091));
    assert_eq!(pattern_4096.len(), 4096);
    let grant = grant_file(&sb, "long.json", &[granted.clone(), pattern_4096]);
    let out = measure(
        &sb,
        "grant check, 4096-byte pattern",
        &["grant", "check", grant.to_str().unwrap()],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sb.arm(&grant);
    // The long paths are committed with plumbing (no worktree could hold
    // them under this sandbox's prefix).
    let head = sb.git(&["rev-parse", "HEAD"]);
    for (path, expect_granted) in [(granted.clone(), true), (format!("src/{long}"), false)] {
        let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "x\n");
        sb.git_nohooks(&["read-tree", &head]);
        sb.git_nohooks(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},{path}"),
        ]);
        let tree = sb.git(&["write-tree"]);
        let commit = sb.git_stdin(&["commit-tree", &tree, "-p", &head], "long");
        sb.git_nohooks(&["update-ref", "refs/heads/main", &commit]);
        let out = measure(
            &sb,
            "verify, 4,025-byte path",
            &["verify", "--json", "--state", sb.state.to_str().unwrap()],
            b"",
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            rules(&r).contains(&"path_not_granted".to_owned()),
            !expect_granted,
            "{path:.40}: {r:#}"
        );
    }
}

#[test]
fn a_100_mb_taskspec_is_refused_before_parsing() {
    let sb = Sandbox::new();
    let big = sb.root.join("big.toml");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        f.write_all(b"id = \"t\"\ntitle = \"").unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..100 {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"\"\n").unwrap();
    }
    let out = measure(
        &sb,
        "admit, 100 MB TaskSpec",
        &["admit", big.to_str().unwrap()],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("larger than"));
    let out = measure(
        &sb,
        "arm, 100 MB TaskSpec as grant",
        &arm_args(&sb, &big),
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    let out = measure(
        &sb,
        "grant check, 100 MB",
        &["grant", "check", big.to_str().unwrap()],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_file(&big).unwrap();
}

#[test]
fn a_reference_transaction_of_100_000_lines_is_decided_with_a_bounded_message() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let st = sb.state.to_str().unwrap().to_owned();
    let head = sb.git(&["rev-parse", "HEAD"]);
    let zero = "0".repeat(40);
    let tags: String = (0..100_000)
        .map(|i| format!("{zero} {head} refs/tags/t{i}\n"))
        .collect();
    let out = measure(
        &sb,
        "reference-transaction, 100,000 tag lines",
        &[
            "hook",
            "reference-transaction",
            "--state",
            &st,
            "--",
            "prepared",
        ],
        tags.as_bytes(),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().count() < 40,
        "bounded message: {} lines",
        stderr.lines().count()
    );
    // Scratch refs only (git stash/bisect traffic): allowed, just as fast.
    let scratch: String = (0..100_000)
        .map(|i| format!("{zero} {head} refs/bisect/b{i}\n"))
        .collect();
    let out = measure(
        &sb,
        "reference-transaction, 100,000 scratch lines",
        &[
            "hook",
            "reference-transaction",
            "--state",
            &st,
            "--",
            "prepared",
        ],
        scratch.as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Deterministic garbage: xorshift bytes, with a few NULs and invalid UTF-8.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn binary_garbage_in_every_input_is_a_clear_error() {
    let sb = Sandbox::new();
    let junk = sb.root.join("junk.bin");
    let junk_json = sb.root.join("junk.json");
    let junk_toml = sb.root.join("junk.toml");
    for (i, p) in [&junk, &junk_json, &junk_toml].iter().enumerate() {
        std::fs::write(p, garbage(i as u64 + 7, 64 * 1024)).unwrap();
    }
    let j = junk.to_str().unwrap();
    for file in [&junk, &junk_json, &junk_toml] {
        let f = file.to_str().unwrap();
        for args in [
            vec!["grant", "check", f],
            vec!["admit", f],
            vec!["catalog", "check", f],
            vec!["catalog", "can-run", "x", "--catalog", f],
        ] {
            let out = measure(&sb, &format!("{args:?}"), &args, b"");
            assert_eq!(out.status.code(), Some(1), "{args:?}");
        }
    }
    let good_plan = sb.root.join("plan.json");
    std::fs::write(&good_plan, "[]").unwrap();
    for flag in ["--catalog", "--registry"] {
        let out = measure(
            &sb,
            flag,
            &["admit", good_plan.to_str().unwrap(), flag, j],
            b"",
        );
        assert_eq!(out.status.code(), Some(1), "{flag}");
    }
    let out = measure(&sb, "arm with a garbage grant", &arm_args(&sb, &junk), b"");
    assert_eq!(out.status.code(), Some(1));

    // Hook stdin, with a valid state.
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let st = sb.state.to_str().unwrap().to_owned();
    for phase in [
        "prepared",
        "preparing",
        "committed",
        "aborted",
        "\u{7f}garbage",
    ] {
        let out = measure(
            &sb,
            &format!("reference-transaction {phase:?} with garbage stdin"),
            &["hook", "reference-transaction", "--state", &st, "--", phase],
            &garbage(3, 256 * 1024),
        );
        if matches!(phase, "prepared" | "preparing") {
            assert!(!out.status.success(), "garbage is refused in {phase}");
        }
    }
    measure(
        &sb,
        "pre-push with garbage stdin",
        &["hook", "pre-push", "--state", &st, "--", "origin", "x"],
        &garbage(5, 4096),
    );

    // A garbage baseline: every command that reads it fails closed.
    std::fs::write(sb.state.join("baseline.json"), garbage(11, 4096)).unwrap();
    let out = measure(
        &sb,
        "verify with a garbage baseline",
        &["verify", "--json", "--state", &st],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    let out = measure(
        &sb,
        "status with a garbage baseline",
        &["status", "--state", &st],
        b"",
    );
    assert_ne!(out.status.code(), Some(0));
    let out = measure(
        &sb,
        "pre-commit with a garbage baseline",
        &["hook", "pre-commit", "--state", &st],
        b"",
    );
    assert_ne!(out.status.code(), Some(0));
    let out = measure(
        &sb,
        "disarm with a garbage baseline",
        &["disarm", "--state", &st],
        b"",
    );
    // disarm restores the config from install.json, whatever the baseline.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(sb.state.join("install.json"), garbage(13, 4096)).unwrap();
    let out = measure(
        &sb,
        "disarm with a garbage install record",
        &["disarm", "--state", &st],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
}
