//! The stub file `arm` installs for each hook grantguard checks, and how
//! grantguard reads one back when the kernel starts it through the stub's
//! first line.
//!
//! A stub is a shell script whose last line is the whole invocation:
//!
//! ```text
//! #!/home/u/.local/bin/grantguard stub
//! ...
//! exec '/home/u/.local/bin/grantguard' hook pre-commit --hub '/hub' -- "$@"
//! ```
//!
//! git executes a hook file directly, so the kernel reads the `#!` line and
//! starts grantguard as `grantguard stub <stub path> <git's arguments>`: no
//! shell, which would cost a hook call more than grantguard's own decision.
//! grantguard then reads the stub's `exec` line ([`invocation`]) and does
//! what a shell would do with it, but only from a stub that is byte for
//! byte what `arm` writes, under its own name, in its own hub: an edited
//! stub refuses. A client that runs the file with `sh` runs that same line.
//! Where the binary's path cannot be a `#!` line (it is relative, has
//! blanks, or the line would be longer than every kernel reads), the first
//! line is `#!/bin/sh` and the shell runs the stub as before.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::Invocation;

/// The template of the guarded hooks' stubs (`hooks/guard.sh`).
const GUARD_TEMPLATE: &str = include_str!("../../hooks/guard.sh");

/// The word after the binary in a stub's `#!` line.
pub const STUB_WORD: &str = "stub";

/// Longest `#!` line used: Linux before 5.1 reads 127 bytes of it.
const MAX_SHEBANG: usize = 127;

/// Largest stub file read back (a stub is a few hundred bytes).
const MAX_STUB: u64 = 64 * 1024;

/// The interpreter line (without `#!`) for a stub whose exec line runs
/// `binary` with `values` quoted on it: the binary itself when the kernel
/// can start it from a `#!` line, else `/bin/sh`. The kernel splits the line
/// at the first blank and passes the rest as one argument, so a path with
/// blanks or control characters, or a relative one, cannot be written
/// there; and grantguard reads the exec line back as one line, so no value
/// on it may hold a line break.
pub fn interpreter(binary: &str, values: &[&str]) -> String {
    let line = format!("{binary} {STUB_WORD}");
    let usable = binary.starts_with('/')
        && !binary.chars().any(|c| c.is_whitespace() || c.is_control())
        && line.len() + 2 <= MAX_SHEBANG
        && !values.iter().any(|v| v.contains(['\n', '\r']));
    if usable { line } else { "/bin/sh".into() }
}

/// The stub `arm` writes for the guarded hook `name` that runs `binary`
/// with the hub `hub`, chaining `chain` (the hook effective before arming)
/// if any. grantguard reads a stub back only if it is exactly this text
/// ([`invocation`]).
pub fn render(binary: &str, name: &str, hub: &str, chain: Option<&str>) -> String {
    let values: Vec<&str> = std::iter::once(hub).chain(chain).collect();
    let chain_words = chain.map_or_else(String::new, |p| format!("--chain {} ", sh_quote(p)));
    fill(
        GUARD_TEMPLATE,
        &[
            ("@INTERPRETER@", &interpreter(binary, &values)),
            ("@SETTLED@", &settled_phases(name, chain)),
            ("@GRANTGUARD@", &sh_quote(binary)),
            ("@HOOK@", name),
            ("@HUB@", &sh_quote(hub)),
            ("@CHAIN@", &chain_words),
        ],
    )
}

/// `template` with each placeholder replaced by its value, in one pass:
/// a value is never searched for placeholders (a path may hold `@HUB@`).
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match values.iter().find(|(key, _)| rest.starts_with(key)) {
            Some((key, value)) => {
                out.push_str(value);
                rest = &rest[key.len()..];
            }
            None => {
                out.push('@');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The stub's answer, when a shell runs it, to the `reference-transaction`
/// phases that come too late to refuse (`committed`, `aborted`): run the
/// chained hook, or nothing, without starting grantguard (which answers
/// them the same way, [`super::run`]).
fn settled_phases(name: &str, original: Option<&str>) -> String {
    if name != "reference-transaction" {
        return String::new();
    }
    let action = match original {
        // A chained hook that has gone or lost its execute bit is skipped,
        // as git skips it.
        Some(p) => {
            let q = sh_quote(p);
            format!("[ -x {q} ] && [ ! -d {q} ] || exit 0; exec {q} \"$@\"")
        }
        None => "exit 0".into(),
    };
    format!(
        "# committed and aborted come too late to refuse: only the chained hook runs.\n\
         case \"$1\" in committed|aborted) {action} ;; esac\n"
    )
}

/// `s` as one shell word: single-quoted, each `'` written `'\''`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The words of a line written with [`sh_quote`] and bare words (letters,
/// digits and `-_./=@%+:,`), separated by single spaces; `"$@"` stays a
/// word of its own. `None` for anything else: grantguard reads back only
/// what `arm` writes, and refuses the rest.
pub fn sh_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut rest = line;
    loop {
        let (word, after) = match rest.strip_prefix(ALL_ARGS) {
            Some(after) => (ALL_ARGS.to_owned(), after),
            None => word_at(rest)?,
        };
        words.push(word);
        rest = match after.strip_prefix(' ') {
            Some(next) => next,
            None if after.is_empty() => return Some(words),
            None => return None,
        };
    }
}

/// The shell's word for "every argument", where git's arguments go.
const ALL_ARGS: &str = "\"$@\"";

/// The word at the start of `s` (bare characters, `'...'` parts and `\'`,
/// concatenated up to a space or the end) and what follows it.
fn word_at(s: &str) -> Option<(String, &str)> {
    let bare = |c: char| c.is_ascii_alphanumeric() || "-_./=@%+:,".contains(c);
    let mut out = String::new();
    let mut chars = s.char_indices();
    let mut end = s.len();
    let mut any = false;
    while let Some((i, c)) = chars.next() {
        match c {
            ' ' => {
                end = i;
                break;
            }
            '\'' => loop {
                match chars.next()?.1 {
                    '\'' => break,
                    c => out.push(c),
                }
            },
            '\\' => match chars.next()?.1 {
                '\'' => out.push('\''),
                _ => return None,
            },
            c if bare(c) => out.push(c),
            _ => return None,
        }
        any = true;
    }
    any.then(|| (out, &s[end..]))
}

/// What a stub says to run, for `args` from git: the invocation of its
/// `exec` line, `grantguard hook NAME --hub DIR [--chain HOOK] -- "$@"`.
/// Only a stub that is exactly what `arm` writes for those values
/// ([`render`]), naming the hub it lives in (`<hub>/hooks/<name>`), is
/// read: an edited stub would otherwise pass the check here and do
/// something else under `sh`, or name an empty hub, for which the hook
/// would find nothing armed.
pub fn invocation(stub: &Path, args: Vec<OsString>) -> Result<Invocation, String> {
    let mut text = String::new();
    // Never `File::open`: a FIFO planted as the stub would block the hook
    // (and disarm) for ever (issue 24).
    crate::fsutil::open_regular(stub)
        .and_then(|f| f.take(MAX_STUB).read_to_string(&mut text))
        .map_err(|e| format!("cannot read the hook stub {}: {e}", stub.display()))?;
    let malformed = || format!("the hook stub {} is not one arm wrote", stub.display());
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("exec "))
        .ok_or_else(malformed)?;
    let words = sh_words(&line["exec ".len()..]).ok_or_else(malformed)?;
    // The binary first, `"$@"` last: git's arguments go there.
    let [binary, words @ .., last] = words.as_slice() else {
        return Err(malformed());
    };
    if last != ALL_ARGS {
        return Err(malformed());
    }
    let mut argv: Vec<OsString> = words.iter().map(OsString::from).collect();
    argv.extend(args);
    let invocation = hook_invocation(&argv).ok_or_else(malformed)?;
    // The stub of `pre-push` copied over `pre-commit` would check pushes.
    if stub.file_name() != Some(std::ffi::OsStr::new(&invocation.name)) {
        return Err(malformed());
    }
    let hub = invocation.hub.as_deref().ok_or_else(malformed)?;
    let chain = invocation.chain.as_deref().map(Path::to_string_lossy);
    let hub_text = hub.to_str().ok_or_else(malformed)?;
    if render(binary, &invocation.name, hub_text, chain.as_deref()) != text {
        return Err(malformed());
    }
    if !lives_in(stub, hub) {
        return Err(format!(
            "the hook stub {} names the hub {}, not the one it is in",
            stub.display(),
            hub.display()
        ));
    }
    Ok(invocation)
}

/// Whether `stub` is in `<hub>/hooks/`: as written (git runs
/// `core.hooksPath`, which `arm` set to `<hub>/hooks`, joined with the
/// name), else after resolving `..` and symlinks on both sides. A relative
/// path (a client running `./pre-commit` there) is taken from here.
fn lives_in(stub: &Path, hub: &Path) -> bool {
    let Ok(stub) = std::path::absolute(stub) else {
        return false;
    };
    let Some(dir) = stub.parent() else {
        return false;
    };
    let hooks = hub.join(super::hub::STUBS_DIR);
    dir == hooks
        || matches!(
            (dir.canonicalize(), hooks.canonicalize()),
            (Ok(a), Ok(b)) if a == b
        )
}

/// Reads `hook NAME (--hub|--state) DIR [--chain HOOK] -- ARGS`, exactly
/// the shape the stubs pass, without the command-line parser: git starts a
/// hook several times per commit, and only the stubs' plain shape is
/// accepted here (anything else goes to the full parser).
pub fn hook_invocation(args: &[OsString]) -> Option<Invocation> {
    let [hook, name, place_flag, state, rest @ ..] = args else {
        return None;
    };
    let hub = match place_flag.to_str() {
        Some("--hub") => true,
        Some("--state") => false,
        _ => return None,
    };
    if hook != "hook" {
        return None;
    }
    let name = name.to_str().filter(|n| !n.starts_with('-'))?.to_owned();
    let (chain, rest) = match rest {
        [flag, chain, rest @ ..] if flag == "--chain" => (Some(PathBuf::from(chain)), rest),
        _ => (None, rest),
    };
    let [separator, args @ ..] = rest else {
        return None;
    };
    // clap reads an empty `--state` as a value; only plain values here.
    if separator != "--" || state.is_empty() || state.to_string_lossy().starts_with('-') {
        return None;
    }
    let place = Some(PathBuf::from(state));
    Some(Invocation {
        name,
        state: if hub { None } else { place.clone() },
        hub: if hub { place } else { None },
        chain,
        args: args.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn interpreter_is_the_binary_only_where_a_kernel_reads_it_whole() {
        assert_eq!(
            interpreter("/usr/bin/grantguard", &["/hub"]),
            "/usr/bin/grantguard stub"
        );
        assert_eq!(interpreter("/a b/grantguard", &[]), "/bin/sh");
        assert_eq!(interpreter("/a\tb/grantguard", &[]), "/bin/sh");
        assert_eq!(interpreter("relative/grantguard", &[]), "/bin/sh");
        assert_eq!(
            interpreter(&format!("/{}", "x".repeat(200)), &[]),
            "/bin/sh"
        );
        assert_eq!(interpreter("/bin/gg", &["/hub", "a\nexec b"]), "/bin/sh");
        // The longest usable: `#!` + path + ` stub` in 127 bytes.
        let longest = format!("/{}", "x".repeat(MAX_SHEBANG - 2 - 1 - STUB_WORD.len() - 1));
        assert_eq!(interpreter(&longest, &[]), format!("{longest} stub"));
        let one_more = format!("{longest}x");
        assert_eq!(interpreter(&one_more, &[]), "/bin/sh");
    }

    #[test]
    fn shell_quoting_survives_quotes_and_spaces() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn reads_back_the_stub_line_shape() {
        let line = format!(
            "{} hook pre-commit --hub {} --chain {} -- \"$@\"",
            sh_quote("/bin/gg"),
            sh_quote("/h u b/it's"),
            sh_quote("a  b")
        );
        assert_eq!(
            sh_words(&line).unwrap(),
            [
                "/bin/gg",
                "hook",
                "pre-commit",
                "--hub",
                "/h u b/it's",
                "--chain",
                "a  b",
                "--",
                "\"$@\""
            ]
        );
    }

    #[test]
    fn refuses_what_arm_never_writes() {
        for bad in [
            "'open", "a;b", "$(x)", "`x`", "a\\b", "\"x\"", "a  b", "", "*", "'a'\\",
        ] {
            assert_eq!(sh_words(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_reference_transaction_settles_late_phases_in_the_stub() {
        assert_eq!(settled_phases("pre-commit", None), "");
        assert_eq!(settled_phases("pre-push", None), "");
        let none = settled_phases("reference-transaction", None);
        assert!(none.contains("committed|aborted) exit 0 ;;"), "{none}");
        let chained = settled_phases("reference-transaction", Some("/h/it's"));
        assert!(
            chained.contains(r#"exec '/h/it'\''s' "$@" ;;"#),
            "{chained}"
        );
        assert!(
            chained.contains(r#"committed|aborted) [ -x '/h/it'\''s' ] &&"#),
            "{chained}"
        );
    }

    #[test]
    fn a_stub_file_becomes_its_invocation_with_gits_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let hub = dir.path().join("hub");
        std::fs::create_dir_all(hub.join("hooks")).unwrap();
        let hub_text = hub.to_str().unwrap();
        let stub = hub.join("hooks/reference-transaction");
        let text = render(
            "/bin/gg",
            "reference-transaction",
            hub_text,
            Some("/o/it's"),
        );
        std::fs::write(&stub, &text).unwrap();
        let inv = invocation(&stub, vec!["prepared".into()]).unwrap();
        assert_eq!(inv.name, "reference-transaction");
        assert_eq!(inv.hub.as_deref(), Some(hub.as_path()));
        assert_eq!(inv.chain, Some(PathBuf::from("/o/it's")));
        assert_eq!(inv.args, [OsString::from("prepared")]);

        let missing = dir.path().join("missing");
        assert!(
            invocation(&missing, Vec::new())
                .unwrap_err()
                .contains("cannot read")
        );
    }

    #[test]
    fn refuses_a_stub_arm_did_not_write_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let hub = dir.path().join("hub");
        std::fs::create_dir_all(hub.join("hooks")).unwrap();
        let hub_text = hub.to_str().unwrap();
        let stub = hub.join("hooks/pre-commit");
        let text = render("/bin/gg", "pre-commit", hub_text, None);
        let exec = text.lines().last().unwrap().to_owned();
        let elsewhere = dir.path().join("empty-hub");
        std::fs::create_dir_all(&elsewhere).unwrap();
        for edited in [
            // What sh would run differently: lines before or after exec.
            text.replacen('\n', "\nexit 0\n", 1),
            text.replace(&exec, &format!("exit 0\n{exec}")),
            format!("{text}exec true\n"),
            text.replace(&exec, &exec.replace("'/bin/gg'", "'/bin/true'")),
            text.replace("\n", "\r\n"),
            text.replace(&exec, &format!("{exec} x")),
            text.replace(&exec, &format!("{exec}; rm -rf /")),
            text.replace(" hook pre-commit ", " verify pre-commit "),
            text.replace("--hub", "--state"),
            String::new(),
        ] {
            std::fs::write(&stub, &edited).unwrap();
            let err = invocation(&stub, Vec::new()).unwrap_err();
            assert!(err.contains("is not one arm wrote"), "{edited:?}: {err}");
        }
        // A stub exactly as arm would write it for another (empty) hub: the
        // hook would find nothing armed there.
        let other = render("/bin/gg", "pre-commit", elsewhere.to_str().unwrap(), None);
        std::fs::write(&stub, other).unwrap();
        let err = invocation(&stub, Vec::new()).unwrap_err();
        assert!(err.contains("not the one it is in"), "{err}");
        // The same hub reached through a symlink, `..` or a relative path
        // is the same hub.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&hub, &link).unwrap();
        std::fs::write(&stub, &text).unwrap();
        assert!(invocation(&link.join("hooks/pre-commit"), Vec::new()).is_ok());
        assert!(invocation(&hub.join("hooks/../hooks/pre-commit"), Vec::new()).is_ok());
        let here = std::env::current_dir().unwrap();
        let relative = pathdiff(&stub, &here);
        assert!(invocation(&relative, Vec::new()).is_ok(), "{relative:?}");
        // A stub beside the hub, or another hook's stub under this name.
        std::fs::write(dir.path().join("pre-commit"), &text).unwrap();
        let beside = hub.join("../pre-commit");
        assert!(
            invocation(&beside, Vec::new())
                .unwrap_err()
                .contains("not the one")
        );
        let push = render("/bin/gg", "pre-push", hub_text, None);
        std::fs::write(&stub, push).unwrap();
        let err = invocation(&stub, Vec::new()).unwrap_err();
        assert!(err.contains("is not one arm wrote"), "{err}");
    }

    /// `path` relative to `base` (both absolute), through `..` as needed.
    fn pathdiff(path: &Path, base: &Path) -> PathBuf {
        let mut base = base.components().peekable();
        let mut path = path.components().peekable();
        while let (Some(a), Some(b)) = (base.peek(), path.peek()) {
            if a != b {
                break;
            }
            base.next();
            path.next();
        }
        base.map(|_| std::path::Component::ParentDir)
            .chain(path)
            .collect()
    }

    #[test]
    fn values_are_never_searched_for_placeholders() {
        let text = render(
            "/bin/@HUB@",
            "reference-transaction",
            "/h/@CHAIN@",
            Some("/o/@HOOK@"),
        );
        assert!(text.contains("exec '/bin/@HUB@' hook reference-transaction --hub '/h/@CHAIN@' --chain '/o/@HOOK@' -- \"$@\""), "{text}");
        assert!(text.contains("exec '/o/@HOOK@' \"$@\" ;;"), "{text}");
        assert_eq!(fill("a@X@b@@c@", &[("@X@", "@X@1")]), "a@X@1b@@c@");
    }

    fn args(list: &[&str]) -> Vec<std::ffi::OsString> {
        list.iter().map(Into::into).collect()
    }

    #[test]
    fn the_stub_forms_are_read_without_clap() {
        let hub = hook_invocation(&args(&["hook", "pre-commit", "--hub", "/h", "--", "x"]))
            .expect("hub form");
        assert_eq!(hub.hub, Some(PathBuf::from("/h")));
        assert_eq!(hub.state, None);
        assert_eq!(hub.args, args(&["x"]));
        let state = hook_invocation(&args(&[
            "hook",
            "reference-transaction",
            "--state",
            "/s",
            "--chain",
            ".husky/_/reference-transaction",
            "--",
            "prepared",
        ]))
        .expect("state form");
        assert_eq!(state.state, Some(PathBuf::from("/s")));
        assert_eq!(
            state.chain,
            Some(PathBuf::from(".husky/_/reference-transaction"))
        );
    }

    #[test]
    fn anything_else_goes_to_clap() {
        for other in [
            &["hook", "pre-commit", "--hub", "/h"][..],
            &["hook", "pre-commit", "--other", "/h", "--"],
            &["hook", "--help", "--hub", "/h", "--"],
            &["hook", "pre-commit", "--hub", "", "--"],
            &["hook", "pre-commit", "--hub", "-x", "--"],
            &["verify", "pre-commit", "--hub", "/h", "--"],
        ] {
            assert!(hook_invocation(&args(other)).is_none(), "{other:?}");
        }
    }

    proptest! {
        #[test]
        fn quoting_round_trips(words in prop::collection::vec(any::<String>(), 1..6)) {
            let words: Vec<String> = words.into_iter().filter(|w| !w.contains('\n')).collect();
            prop_assume!(!words.is_empty());
            let line = words.iter().map(|w| sh_quote(w)).collect::<Vec<_>>().join(" ");
            prop_assert_eq!(sh_words(&line), Some(words));
        }

        #[test]
        fn never_panics(line in any::<String>()) {
            let _ = sh_words(&line);
        }
    }
}
