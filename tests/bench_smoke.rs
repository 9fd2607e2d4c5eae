//! The benchmark runner (`bench/run.sh`) starts and prints its table on tiny
//! repositories. The real benchmarks are slow and noisy and never run here;
//! this only keeps the runner from rotting.

use std::process::Command;

#[test]
fn bench_runner_prints_its_table_on_tiny_repositories() {
    let home = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/bench/run.sh"))
        .arg("--smoke")
        // The debug binary cargo built for the tests; no nested cargo build.
        .env("GRANTGUARD", env!("CARGO_BIN_EXE_grantguard"))
        // Exercise the built-in timing loop: the runner must work without
        // hyperfine.
        .env("BENCH_NO_HYPERFINE", "1")
        .env("HOME", home.path())
        .env("TMPDIR", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench/run.sh --smoke failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("built-in loop"), "{stdout}");
    for figure in [
        "git commit, armed vs no hooks, small",
        "git commit, armed vs no hooks, large",
        "pre-commit vs git diff --cached, large",
        "  pre-commit, other clients, large",
        "verify vs git CLI, large",
        "verify peak RSS",
        "ref-transaction vs rev-list --count, deep",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(figure))
            .unwrap_or_else(|| panic!("no {figure:?} row in:\n{stdout}"));
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 5, "{line}");
        if !figure.contains("RSS") || cells[1] != "n/a" {
            for number in &cells[1..4] {
                assert!(number.parse::<f64>().is_ok(), "{number:?} in {line}");
            }
        }
    }
}
