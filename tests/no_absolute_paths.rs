//! `.ci/no-absolute-paths.sh`, run on a scratch repository: it flags the
//! checkout's own location, `$HOME` and the usual homes of other machines,
//! and leaves alone the absolute paths the product itself uses and paths
//! built from a variable.

mod common;

use std::path::Path;

use common::Sandbox;

fn check(sb: &Sandbox, repo: &Path) -> (bool, String) {
    let out = sb
        .command(repo.join(".ci/no-absolute-paths.sh"))
        .current_dir(repo)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn flags_machine_paths_and_leaves_product_paths_alone() {
    let sb = Sandbox::empty();
    let repo = sb.root.join("checkout");
    sb.run_git(&sb.root, &["init", "-q", "checkout"]);
    std::fs::create_dir_all(repo.join(".ci")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/no-absolute-paths.sh"),
        repo.join(".ci/no-absolute-paths.sh"),
    )
    .unwrap();
    let legit = "/proc/self/fd /dev/null /usr/bin/env /tmp/x /nonexistent /run/user \
                 /sys/fs /etc/hosts \"$ws/work/upper\" /proc/<pid>/root/ ${HOME}/x \
                 ~/.local/bin /s/workspaces/run-1/work/view\n";
    std::fs::write(repo.join("legit.txt"), legit).unwrap();
    sb.run_git(&repo, &["add", "."]);
    let (ok, out) = check(&sb, &repo);
    assert!(ok, "product paths flagged:\n{out}");

    let bad = format!(
        "cd {} && cargo test\nHOME={}/.cargo\nsee /home/alice/project\n(/root/.cargo)\n\
         file:///work/elsewhere/README.md\n",
        repo.display(),
        sb.home.display()
    );
    std::fs::write(repo.join("bad.txt"), bad).unwrap();
    sb.run_git(&repo, &["add", "bad.txt"]);
    let (ok, out) = check(&sb, &repo);
    assert!(!ok, "machine paths not flagged:\n{out}");
    let flagged: Vec<&str> = out.lines().collect();
    assert_eq!(flagged.len(), 5, "{out}");
    for (line, hit) in flagged.iter().enumerate() {
        assert!(
            hit.starts_with(&format!("bad.txt:{}: /", line + 1)),
            "{out}"
        );
    }
    assert!(!out.contains("legit.txt"), "{out}");

    // An allowed exception, with its reason.
    std::fs::write(
        repo.join(".ci/absolute-paths.allow"),
        "# an example home in a doc\nbad.txt\t/home/alice\n",
    )
    .unwrap();
    let (_, out) = check(&sb, &repo);
    assert!(!out.contains("/home/alice"), "{out}");
    assert_eq!(out.lines().count(), 4, "{out}");
}
