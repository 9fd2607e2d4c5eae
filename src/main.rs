//! The `grantguard` command line: argument parsing and exit codes only; the
//! work is done by the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use grantguard::grant::{FIELD, Grant, GrantError};
use grantguard::result::exit;
use serde_json::json;

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
    /// Admit a plan: validate every task and print the admitted contracts.
    Admit {
        /// The plan: a JSON array of TaskSpecs, a TOML file of [[task]]
        /// tables, or a single TaskSpec.
        plan: PathBuf,
        /// The tool catalog (TOML, [[tool]] tables) to project workers with.
        #[arg(long)]
        catalog: Option<PathBuf>,
        /// The role registry (TOML, [[role]] tables).
        #[arg(long)]
        registry: Option<PathBuf>,
        /// Report rejections on stderr as one JSON ToolResult instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Work with tool catalogs.
    #[command(subcommand)]
    Catalog(CatalogCommand),
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
        Command::Admit {
            plan,
            catalog,
            registry,
            json,
        } => admit(&plan, catalog.as_deref(), registry.as_deref(), json),
        Command::Catalog(command) => catalog(command),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
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
                let report = json!({
                    "valid": true,
                    "grant_id": grant.id(),
                    "canonical": grant.canonical_value(),
                    "evidence": grant.evidence(),
                });
                println!("{report}");
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
                println!("{}", json!({"valid": false, "errors": errors}));
            }
            exit::PERMANENT
        }
    }
}

#[derive(Subcommand)]
enum CatalogCommand {
    /// Validate a tool catalog.
    Check {
        /// The catalog file (TOML, [[tool]] tables).
        file: PathBuf,
    },
    /// Check whether a tool may run with the granted capabilities.
    CanRun {
        /// The tool's name.
        tool: String,
        /// The catalog file.
        #[arg(long)]
        catalog: PathBuf,
        /// A granted capability (repeat for several).
        #[arg(long = "capability", value_name = "CAP")]
        capabilities: Vec<String>,
    },
}

/// `grantguard admit`: admitted contracts on stdout, rejections on stderr.
fn admit(
    plan: &std::path::Path,
    catalog: Option<&std::path::Path>,
    registry: Option<&std::path::Path>,
    as_json: bool,
) -> i32 {
    use grantguard::contract::admission;
    let result = match admission::admit_files(plan, catalog, registry) {
        Ok(report) => {
            match serde_json::to_string_pretty(&report.contracts()) {
                Ok(text) => println!("{text}"),
                Err(e) => {
                    eprintln!("grantguard admit: internal defect: cannot serialise contracts: {e}");
                    return exit::INTERNAL;
                }
            }
            if !as_json {
                eprint!("{}", report.render());
            }
            report.to_tool_result()
        }
        Err(input) => {
            if !as_json {
                eprint!("{}", input.render());
            }
            input.to_tool_result()
        }
    };
    if as_json {
        eprintln!("{}", json!(result));
    }
    result.exit_code()
}

fn catalog(command: CatalogCommand) -> i32 {
    use grantguard::contract::catalog::ToolCatalog;
    let (file, can_run) = match &command {
        CatalogCommand::Check { file } => (file, None),
        CatalogCommand::CanRun {
            tool,
            catalog,
            capabilities,
        } => (catalog, Some((tool, capabilities))),
    };
    let catalog = match ToolCatalog::load_file(file) {
        Ok(catalog) => catalog,
        Err(errors) => {
            eprintln!(
                "grantguard catalog: invalid catalog {}: {} error(s)",
                file.display(),
                errors.len()
            );
            for e in &errors {
                eprintln!("  {e}");
            }
            return exit::PERMANENT;
        }
    };
    match can_run {
        None => {
            println!("valid catalog: {} tool(s)", catalog.tools().count());
            exit::SUCCESS
        }
        Some((tool, granted)) => match catalog.can_run(tool, granted) {
            Ok(()) => {
                println!("allowed: {tool}");
                exit::SUCCESS
            }
            Err(refusal) => {
                eprintln!(
                    "grantguard catalog can-run: refused [{}]: {refusal}",
                    refusal.rule()
                );
                exit::PERMANENT
            }
        },
    }
}
