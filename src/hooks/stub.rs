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
//! what a shell would do with it. A client that runs the file with `sh`
//! runs that same line. Where the binary's path cannot be a `#!` line (it
//! has blanks, or the line would be longer than every kernel reads), the
//! first line is `#!/bin/sh` and the shell runs the stub as before.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::Invocation;

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
pub fn invocation(stub: &Path, args: Vec<OsString>) -> Result<Invocation, String> {
    let mut text = String::new();
    std::fs::File::open(stub)
        .and_then(|f| f.take(MAX_STUB).read_to_string(&mut text))
        .map_err(|e| format!("cannot read the hook stub {}: {e}", stub.display()))?;
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("exec "))
        .ok_or_else(|| format!("the hook stub {} has no exec line", stub.display()))?;
    let malformed = || format!("the hook stub {} is not one arm wrote", stub.display());
    let words = sh_words(&line["exec ".len()..]).ok_or_else(malformed)?;
    // The binary (ours) first, `"$@"` last: git's arguments go there.
    let [_binary, words @ .., last] = words.as_slice() else {
        return Err(malformed());
    };
    if last != ALL_ARGS {
        return Err(malformed());
    }
    let mut argv: Vec<OsString> = words.iter().map(OsString::from).collect();
    argv.extend(args);
    hook_invocation(&argv).ok_or_else(malformed)
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
    fn a_stub_file_becomes_its_invocation_with_gits_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let stub = dir.path().join("reference-transaction");
        std::fs::write(
            &stub,
            "#!/bin/gg stub\n# comment\nexec '/bin/gg' hook reference-transaction --hub '/h' -- \"$@\"\n",
        )
        .unwrap();
        let inv = invocation(&stub, vec!["prepared".into()]).unwrap();
        assert_eq!(inv.name, "reference-transaction");
        assert_eq!(inv.hub.as_deref(), Some(Path::new("/h")));
        assert_eq!(inv.chain, None);
        assert_eq!(inv.args, [OsString::from("prepared")]);

        for text in [
            "#!/bin/gg stub\n",
            "exec '/bin/gg' hook pre-commit --hub '/h' --\n",
            "exec '/bin/gg' hook pre-commit --hub '/h' -- \"$@\" x\n",
            "exec '/bin/gg' hook pre-commit --hub '/h' -- \"$@\"; rm -rf /\n",
            "exec '/bin/gg' verify --state '/h' -- \"$@\"\n",
        ] {
            std::fs::write(&stub, text).unwrap();
            assert!(invocation(&stub, Vec::new()).is_err(), "{text:?}");
        }
        let missing = dir.path().join("missing");
        assert!(
            invocation(&missing, Vec::new())
                .unwrap_err()
                .contains("cannot read")
        );
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
