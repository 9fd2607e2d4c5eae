//! The `grantguard` command line: argument parsing and exit codes only; the
//! work is done by the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use grantguard::grant::{FIELD, Grant, GrantError, GrantEvidence};
use grantguard::result::exit;
use serde::Serialize;
use serde_json::value::RawValue;

#[derive(Parser)]
#[command(
    name = "grantguard",
    version,
    about = "Enforce a repository grant on a git checkout"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Work with grant files.
    #[command(subcommand)]
    Grant(GrantCommand),
}

#[derive(Subcommand)]
enum GrantCommand {
    /// Validate a grant file (JSON or TOML) and print its id.
    Check {
        /// The grant or TaskSpec file.
        file: PathBuf,
        /// Print a JSON report on stdout.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Grant(GrantCommand::Check { file, json }) => grant_check(&file, json),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// `grant check --json` for a valid grant. A struct, not `json!`, so that the
/// fields keep this order and `canonical` is the canonical text byte for byte
/// (a `serde_json::Value` would sort its keys).
#[derive(Serialize)]
struct ValidReport {
    valid: bool,
    grant_id: String,
    canonical: Box<RawValue>,
    evidence: GrantEvidence,
}

/// `grant check --json` for an invalid grant.
#[derive(Serialize)]
struct InvalidReport<'a> {
    valid: bool,
    errors: &'a [GrantError],
}

fn to_json(report: &impl Serialize) -> String {
    serde_json::to_string(report).expect("reports are plain data")
}

fn grant_check(file: &std::path::Path, as_json: bool) -> i32 {
    let outcome = Grant::load_file(file).and_then(|g| {
        g.ok_or_else(|| {
            vec![GrantError {
                path: FIELD.into(),
                message: "missing: this document carries no grant, so it authorises nothing \
                          (labels, descriptions and execution_refs never create one)"
                    .into(),
            }]
        })
    });
    match outcome {
        Ok(grant) => {
            if as_json {
                let report = ValidReport {
                    valid: true,
                    grant_id: grant.id(),
                    canonical: grant.canonical_json(),
                    evidence: grant.evidence(),
                };
                println!("{}", to_json(&report));
            } else {
                println!("valid grant {}", grant.id());
                println!(
                    "  {} allowed path pattern(s); {}..={} new commit(s); publish: false",
                    grant.allowed_paths().len(),
                    grant.min_commits(),
                    grant.max_commits()
                );
            }
            exit::SUCCESS
        }
        Err(errors) => {
            for e in &errors {
                if e.path.is_empty() {
                    eprintln!("{}", e.message);
                } else {
                    eprintln!("{e}");
                }
            }
            if as_json {
                let report = InvalidReport {
                    valid: false,
                    errors: &errors,
                };
                println!("{}", to_json(&report));
            }
            exit::PERMANENT
        }
    }
}
