//! The `grantguard` command line: argument parsing and exit codes only; the
//! work is done by the library.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use grantguard::grant::{FIELD, Grant, GrantError, GrantEvidence};
use grantguard::result::{ToolResult, exit};
use grantguard::{acceptance, state};
use serde::Serialize;
use serde_json::json;
use serde_json::value::RawValue;

/// Printing never panics: a closed stdout or stderr (`EPIPE`, a full disk)
/// loses the text, not the run. The exit code always follows the result
/// that was computed (and, for `run`, recorded), so a harness that stopped
/// reading still learns the outcome. (`println!` panics on a write error;
/// grantguard panicked with exit 101 after recording `succeeded`.)
fn print_to(mut w: impl Write, text: &str) {
    let _ = w.write_all(text.as_bytes()).and_then(|()| w.flush());
}

/// `println!` that never panics (see [`print_to`]).
macro_rules! outln {
    ($($arg:tt)*) => {
        print_to(std::io::stdout(), &format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics (see [`print_to`]).
macro_rules! errln {
    ($($arg:tt)*) => {
        print_to(std::io::stderr(), &format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics (see [`print_to`]).
macro_rules! errp {
    ($($arg:tt)*) => {
        print_to(std::io::stderr(), &format!($($arg)*))
    };
}

/// The end of each command's `--help`: one example, and the page of the
/// docs (in grantguard's source tree) to read next.
mod help {
    pub const TOP: &str = "\
Example (the demo, from grantguard's source tree):
  grantguard run --task fixtures/demo/task.json \\
    --repo \"$(fixtures/demo/make-repo.sh)\" --state \"$(mktemp -d)/state\" \\
    --capability repo.read -- \"$PWD/fixtures/demo/agent.sh\"

Docs: README.md, then docs/README.md (the index);
every command: docs/reference/cli.md";
    pub const GRANT: &str = "\
Example:
  grantguard grant check fixtures/grants/valid/seed-example.json --json

Docs: docs/reference/grant.md";
    pub const ARM: &str = "\
Example:
  grantguard arm --repo . --grant task.json --state ../agent-state --json

Docs: docs/reference/baseline-and-verify.md;
refusals: docs/reference/rules.md";
    pub const VERIFY: &str = "\
Example:
  grantguard verify --state ../agent-state --json

Docs: docs/reference/baseline-and-verify.md;
rule ids: docs/reference/rules.md";
    pub const DISARM: &str = "\
Example:
  grantguard disarm --state ../agent-state

Docs: docs/reference/baseline-and-verify.md";
    pub const HOOK: &str = "\
Example (what a stub runs; not for people):
  grantguard hook pre-commit --state ../agent-state

Docs: docs/guide/hooks.md";
    pub const STATUS: &str = "\
Example:
  grantguard status --state ../agent-state --json

Docs: docs/reference/baseline-and-verify.md";
    pub const ADMIT: &str = "\
Example:
  grantguard admit fixtures/contracts/plan.toml \\
    --catalog fixtures/contracts/catalog.toml \\
    --registry fixtures/contracts/registry.toml

Docs: docs/reference/task-contracts.md";
    pub const CATALOG: &str = "\
Example:
  grantguard catalog can-run diagnoser --catalog fixtures/contracts/catalog.toml \\
    --capability repo.read

Docs: docs/reference/task-contracts.md";
    pub const CATALOG_CHECK: &str = "\
Example:
  grantguard catalog check fixtures/contracts/catalog.toml

Docs: docs/reference/task-contracts.md";
    pub const RUN: &str = "\
Example (a harness, once per task; the result is the only thing on stdout):
  grantguard run --task task.json --repo /sandbox/checkout \\
    --state /sandbox/state --capability repo.read --timeout 3600 \\
    --isolate --json -- agent --task-file task.md

Docs: docs/guide/harness.md; the steps: docs/guide/run-and-isolation.md";
    pub const PUBLICATION: &str = "\
Example:
  grantguard publication check fixtures/publications/review-branch.json --json

Docs: docs/reference/publication.md";
    pub const PUBLISH: &str = "\
Example (after the harness's own arm, agent and verify):
  grantguard publish --state ../agent-state --publication publication.json \\
    --run-id run-42 --json

Docs: docs/reference/publication.md";
}

#[derive(Parser)]
#[command(
    name = "grantguard",
    version,
    about = "Enforce a repository grant on a git checkout",
    after_help = help::TOP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Work with grant files.
    #[command(subcommand, after_help = help::GRANT)]
    Grant(GrantCommand),
    /// Record the baseline of a repository under a grant.
    #[command(after_help = help::ARM)]
    Arm {
        /// The repository (any directory inside its worktree).
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// The grant (or TaskSpec) file.
        #[arg(long)]
        grant: PathBuf,
        /// The state directory, outside the repository.
        #[arg(long)]
        state: PathBuf,
        /// Print the ToolResult as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Decide whether the repository satisfies the grant (final acceptance).
    #[command(after_help = help::VERIFY)]
    Verify {
        /// The state directory given to `arm`.
        #[arg(long)]
        state: PathBuf,
        /// The repository; must be the armed one.
        #[arg(long)]
        repo: Option<PathBuf>,
        /// Print the ToolResult as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Seconds verification may take before it ends as a
        /// `verify_timed_out` rejection (1 to 86400).
        #[arg(
            long,
            value_name = "SECONDS",
            default_value_t = grantguard::deadline::DEFAULT_VERIFY_TIMEOUT_SECS,
            value_parser = clap::value_parser!(u64).range(1..=grantguard::deadline::MAX_VERIFY_TIMEOUT_SECS)
        )]
        timeout: u64,
        /// Internal (`run --isolate`): the repository is a sealed
        /// workspace, whose object store never reaches the host.
        #[arg(long, hide = true)]
        sealed_workspace: bool,
    },
    /// Undo what `arm` changed in the repository.
    #[command(after_help = help::DISARM)]
    Disarm {
        /// The state directory given to `arm`.
        #[arg(long)]
        state: PathBuf,
        /// Print the ToolResult as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Run a hook check (what the installed stubs call).
    #[command(after_help = help::HOOK)]
    Hook {
        /// pre-commit, pre-push or reference-transaction.
        name: String,
        /// The state directory given to `arm`.
        #[arg(long, env = "GRANTGUARD_STATE")]
        state: Option<PathBuf>,
        /// The repository's hub: the hook enforces the grant of the worktree
        /// it runs in (the stubs `arm` installs pass this).
        #[arg(long)]
        hub: Option<PathBuf>,
        /// The hook that was effective before arming; runs after the check.
        #[arg(long)]
        chain: Option<PathBuf>,
        /// The hook's arguments, as git passed them.
        #[arg(last = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Show what the agent has used of its grant so far.
    #[command(after_help = help::STATUS)]
    Status {
        /// The state directory given to `arm`.
        #[arg(long)]
        state: PathBuf,
        /// Print JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Admit a plan: validate every task and print the admitted contracts.
    #[command(after_help = help::ADMIT)]
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
    #[command(subcommand, after_help = help::CATALOG)]
    Catalog(CatalogCommand),
    /// Run an agent's command as one repository transaction: admit, arm,
    /// run, verify, disarm, journal, measure.
    #[command(after_help = help::RUN)]
    Run(Box<RunArgs>),
    /// Work with repository_publication contracts.
    #[command(subcommand, after_help = help::PUBLICATION)]
    Publication(PublicationCommand),
    /// Publish the accepted commits under a repository_publication
    /// contract, after verifying again (for a harness that armed, ran and
    /// verified on its own).
    #[command(after_help = help::PUBLISH)]
    Publish {
        /// The state directory given to `arm`.
        #[arg(long)]
        state: PathBuf,
        /// The repository_publication contract (JSON or TOML).
        #[arg(long, value_name = "FILE")]
        publication: PathBuf,
        /// The repository; must be the armed one.
        #[arg(long)]
        repo: Option<PathBuf>,
        /// The value of {run_id} in the contract's target ref.
        #[arg(long)]
        run_id: Option<String>,
        /// The value of {task_id} in the contract's target ref.
        #[arg(long)]
        task_id: Option<String>,
        /// Seconds each git transport step may take (1 to 3600).
        #[arg(
            long,
            value_name = "SECONDS",
            default_value_t = grantguard::publication::DEFAULT_TIMEOUT_SECS,
            value_parser = clap::value_parser!(u64).range(1..=3600)
        )]
        timeout: u64,
        /// Print the ToolResult as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Internal: `run`'s watchdog (ends the command if run dies).
    #[command(name = "__watchdog", hide = true)]
    Watchdog,
}

#[derive(Subcommand)]
enum PublicationCommand {
    /// Validate a publication contract (JSON or TOML) and print its id.
    #[command(after_help = help::PUBLICATION)]
    Check {
        /// The contract file.
        file: PathBuf,
        /// Print a JSON report on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum GrantCommand {
    /// Validate a grant file (JSON or TOML) and print its id.
    #[command(after_help = help::GRANT)]
    Check {
        /// The grant or TaskSpec file.
        file: PathBuf,
        /// Print a JSON report on stdout.
        #[arg(long)]
        json: bool,
    },
}

/// Stack for threads the libraries spawn. gix walks the worktree
/// recursively, one frame per directory level, on a thread of its own with
/// Rust's default 2 MiB stack: a checkout 2,000 levels deep (git allows
/// trees 2,048 deep) overflowed it and aborted `verify` (a debug build
/// needs about 2 KiB a level). The file system bounds the depth (paths over
/// `PATH_MAX`, 4,096 bytes, cannot be opened, so at most about 2,048
/// levels), so a fixed size covers every worktree: 64 MiB is 30 KiB a
/// level. The memory is reserved,
/// and only the pages a deep walk touches are used.
const LIBRARY_THREAD_STACK: usize = 64 * 1024 * 1024;

/// Makes every thread spawned without an explicit size (gix's worktree
/// walk) get [`LIBRARY_THREAD_STACK`]. The standard library reads
/// `RUST_MIN_STACK` once, when the first such thread starts, and keeps the
/// value: so set it, start one thread, and put the variable back as it was,
/// so that the programs grantguard runs (the agent's command, chained hooks)
/// inherit the caller's environment unchanged.
fn reserve_library_thread_stacks() {
    let previous = std::env::var_os("RUST_MIN_STACK");
    // SAFETY: first thing in main, before any thread exists, and the only
    // thread started meanwhile reads no environment variable.
    unsafe { std::env::set_var("RUST_MIN_STACK", LIBRARY_THREAD_STACK.to_string()) };
    let _ = std::thread::spawn(|| {}).join();
    // SAFETY: the thread above has ended; we are single-threaded again.
    unsafe {
        match previous {
            Some(value) => std::env::set_var("RUST_MIN_STACK", value),
            None => std::env::remove_var("RUST_MIN_STACK"),
        }
    }
}

fn main() -> ExitCode {
    // Installed under a hook's name (a copy or symlink named pre-commit,
    // pre-push or reference-transaction), the binary is that hook.
    let mut argv = std::env::args_os();
    let argv0 = argv.next().unwrap_or_default();
    let stem = std::path::Path::new(&argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    // The hooks start no library thread that recurses (the worktree walk is
    // verify's), so they skip the stack reservation, a thread start that
    // costs a hook call more than its decision on a small repository.
    if grantguard::hooks::GUARDED.contains(&stem.as_str()) {
        let invocation = grantguard::hooks::Invocation {
            name: stem,
            state: std::env::var_os(grantguard::hooks::STATE_ENV).map(PathBuf::from),
            hub: None,
            chain: None,
            args: argv.collect(),
        };
        return exit_code(grantguard::hooks::run(&invocation));
    }
    let args: Vec<std::ffi::OsString> = argv.collect();
    // Started by the kernel from a stub's `#!` line: `stub <stub> ARGS`.
    if let [word, stub, git_args @ ..] = args.as_slice()
        && word == grantguard::hooks::stub::STUB_WORD
    {
        let stub = std::path::Path::new(stub);
        return exit_code(grantguard::hooks::run_stub(stub, git_args.to_vec()));
    }
    if let Some(invocation) = grantguard::hooks::stub::hook_invocation(&args) {
        return exit_code(grantguard::hooks::run(&invocation));
    }
    reserve_library_thread_stacks();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, &args),
    };
    let code = match cli.command {
        Command::Grant(GrantCommand::Check { file, json }) => grant_check(&file, json),
        Command::Publication(PublicationCommand::Check { file, json }) => {
            publication_check(&file, json)
        }
        Command::Arm {
            repo,
            grant,
            state,
            json,
        } => {
            let result = state::arm(&repo, &grant, &state);
            errp!("{}", state::arm_summary(&result));
            print_json(&result, json)
        }
        Command::Verify {
            state,
            repo,
            json,
            timeout,
            sealed_workspace,
        } => verify_command(
            &state,
            repo.as_deref(),
            json,
            timeout,
            if sealed_workspace {
                acceptance::Site::SealedWorkspace
            } else {
                acceptance::Site::InPlace
            },
        ),
        Command::Disarm { state, json } => report(&state::disarm(&state), json),
        Command::Status { state, json } => status_command(&state, json),
        Command::Hook {
            name,
            state,
            hub,
            chain,
            args,
        } => grantguard::hooks::run(&grantguard::hooks::Invocation {
            name,
            state,
            hub,
            chain,
            args,
        }),
        Command::Admit {
            plan,
            catalog,
            registry,
            json,
        } => admit(&plan, catalog.as_deref(), registry.as_deref(), json),
        Command::Catalog(command) => catalog(command),
        Command::Run(args) => run_command(*args),
        Command::Publish {
            state,
            publication,
            repo,
            run_id,
            task_id,
            timeout,
            json,
        } => {
            let result =
                grantguard::publication::command::run(&grantguard::publication::command::Request {
                    state,
                    publication,
                    repo,
                    run_id,
                    task_id,
                    timeout: std::time::Duration::from_secs(timeout),
                });
            report(&result, json)
        }
        Command::Watchdog => grantguard::run::watchdog::serve(),
    };
    exit_code(code)
}

/// `grantguard verify`, bounded by its deadline ([`grantguard::deadline`]):
/// whatever blocks, a result is printed and the process exits.
fn verify_command(
    state: &std::path::Path,
    repo: Option<&std::path::Path>,
    json: bool,
    timeout_secs: u64,
    site: acceptance::Site,
) -> i32 {
    test_fault_in_verify("verify-hang-unwatched");
    let timeout = std::time::Duration::from_secs(timeout_secs);
    if let Err(e) = grantguard::deadline::start(timeout, move |result| report(result, json)) {
        // Without a deadline a hang would never end in a result: refuse.
        let result = ToolResult::rejected(
            "verify",
            grantguard::result::FailureClass::InternalDefect,
            grantguard::result::Violation::new(
                acceptance::rule::REPOSITORY_UNREADABLE,
                format!("cannot start verify's deadline watchdog: {e}; nothing was verified"),
            ),
        )
        .with_evidence("metadata_intact", false);
        return report(&result, json);
    }
    test_fault_in_verify("verify");
    let result = acceptance::verify_as(state, repo, site);
    if !grantguard::deadline::claim() {
        grantguard::deadline::wait_for_exit();
    }
    report(&result, json)
}

/// Environment variable of the test-only fault injection in `verify`.
#[cfg(debug_assertions)]
const TEST_FAULT_ENV: &str = "GRANTGUARD_TEST_FAULT";

/// Test-only fault injection, so that the tests can show what `run` does
/// when its verify child dies, without depending on a real crash:
/// `GRANTGUARD_TEST_FAULT=verify-abort` makes `verify` call
/// `std::process::abort()` (SIGABRT, as a stack overflow or a
/// `panic = "abort"` would), `verify-garbage` makes it print a line that is
/// not JSON and exit 0, `verify-hang` makes it block for ever once its
/// deadline watchdog runs (as a read of a FIFO would), and
/// `verify-hang-unwatched` makes it block for ever before the watchdog
/// starts (what `run`'s own deadline on the child is for). `stage` is where
/// it is called: `verify-hang-unwatched` fires at `"verify-hang-unwatched"`,
/// the others at `"verify"`.
///
/// It exists only in debug builds: in a release build this function is
/// empty and the variable is never read (`cfg(debug_assertions)` is off
/// there), so nobody can make a released verify misbehave through it.
fn test_fault_in_verify(stage: &str) {
    #[cfg(debug_assertions)]
    match (std::env::var(TEST_FAULT_ENV).as_deref(), stage) {
        (Ok("verify-abort"), "verify") => std::process::abort(),
        (Ok("verify-garbage"), "verify") => {
            outln!("this is not a ToolResult");
            std::process::exit(0);
        }
        (Ok("verify-hang"), "verify") | (Ok("verify-hang-unwatched"), "verify-hang-unwatched") => {
            loop {
                std::thread::park();
            }
        }
        _ => {}
    }
    #[cfg(not(debug_assertions))]
    let _ = stage;
}

fn exit_code(code: i32) -> ExitCode {
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

/// `publication check --json` for a valid contract (field order kept, the
/// canonical text byte for byte, as for grants).
#[derive(Serialize)]
struct ValidPublicationReport {
    valid: bool,
    publication_id: String,
    canonical: Box<RawValue>,
    evidence: grantguard::publication::ContractEvidence,
}

fn publication_check(file: &std::path::Path, as_json: bool) -> i32 {
    match grantguard::publication::Publication::load_file(file) {
        Ok(p) => {
            if as_json {
                let report = ValidPublicationReport {
                    valid: true,
                    publication_id: p.id(),
                    canonical: p.canonical_json(),
                    evidence: p.evidence(),
                };
                outln!("{}", to_json(&report));
            } else {
                outln!("valid publication contract {}", p.id());
                outln!(
                    "  for grant {}; {} {} at {}",
                    p.grant_id(),
                    p.mode().name(),
                    p.target_ref().as_str(),
                    p.remote()
                );
            }
            exit::SUCCESS
        }
        Err(errors) => invalid_document(&errors, as_json),
    }
}

/// What `grant check` and `publication check` print for a document that
/// does not validate: each error on stderr (with its field path when it has
/// one), and under `--json` the report on stdout.
fn invalid_document(errors: &[GrantError], as_json: bool) -> i32 {
    for e in errors {
        if e.path.is_empty() {
            errln!("{}", e.message);
        } else {
            errln!("{e}");
        }
    }
    if as_json {
        let report = InvalidReport {
            valid: false,
            errors,
        };
        outln!("{}", to_json(&report));
    }
    exit::PERMANENT
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
                outln!("{}", to_json(&report));
            } else {
                outln!("valid grant {}", grant.id());
                outln!(
                    "  {} allowed path pattern(s); {}..={} new commit(s); publish: false",
                    grant.allowed_paths().len(),
                    grant.min_commits(),
                    grant.max_commits()
                );
            }
            exit::SUCCESS
        }
        Err(errors) => invalid_document(&errors, as_json),
    }
}

/// A command line clap refuses: clap's text on stderr and exit 2, as
/// always; under `--json` also a `validation` ToolResult (rule
/// `usage_error`) on stdout, so a harness that parses stdout gets an answer
/// (issue 30). `--help` and `--version` print as clap prints them.
fn usage_error(e: clap::Error, args: &[std::ffi::OsString]) -> ExitCode {
    use clap::error::ErrorKind;
    let is_usage = !matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    // `--json` before a `--` that starts the agent's command.
    let json = args
        .iter()
        .take_while(|a| a.as_os_str() != "--")
        .any(|a| a.as_os_str() == "--json");
    let _ = e.print();
    if !is_usage {
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
    }
    if json {
        // The subcommand's name when the first word is one, else the
        // program's: never an empty or made-up tool name.
        let command = <Cli as clap::CommandFactory>::command();
        let tool = args
            .first()
            .and_then(|a| a.to_str())
            .filter(|a| command.get_subcommands().any(|c| c.get_name() == *a))
            .unwrap_or("grantguard");
        let message = e.render().to_string();
        // clap's first paragraph: the error and what it names.
        let first: Vec<&str> = message
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim)
            .collect();
        let first = first.join(" ");
        let result = ToolResult::rejected(
            tool,
            grantguard::result::FailureClass::Validation,
            grantguard::result::Violation::new(
                "usage_error",
                first.trim_start_matches("error: ").to_owned(),
            ),
        );
        let result = grantguard::next_step::attach(result, None);
        outln!(
            "{}",
            serde_json::to_string(&result).expect("results are plain data")
        );
    }
    ExitCode::from(exit::USAGE as u8)
}

/// Prints a result (human report on stderr; JSON on stdout with `--json`)
/// and returns its exit code.
fn report(result: &ToolResult, as_json: bool) -> i32 {
    let result = grantguard::next_step::attach(result.clone(), None);
    errp!("{}", result.human_report());
    print_json(&result, as_json)
}

/// Prints a result as JSON on stdout with `--json`; returns its exit code.
fn print_json(result: &ToolResult, as_json: bool) -> i32 {
    if as_json {
        outln!(
            "{}",
            serde_json::to_string(result).expect("results are plain data")
        );
    }
    result.exit_code()
}

#[derive(Subcommand)]
enum CatalogCommand {
    /// Validate a tool catalog.
    #[command(after_help = help::CATALOG_CHECK)]
    Check {
        /// The catalog file (TOML, [[tool]] tables).
        file: PathBuf,
    },
    /// Check whether a tool may run with the granted capabilities.
    #[command(after_help = help::CATALOG)]
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
                Ok(text) => outln!("{text}"),
                Err(e) => {
                    errln!("grantguard admit: internal defect: cannot serialise contracts: {e}");
                    return exit::INTERNAL;
                }
            }
            if !as_json {
                errp!("{}", report.render());
            }
            report.to_tool_result()
        }
        Err(input) => {
            if !as_json {
                errp!("{}", input.render());
            }
            input.to_tool_result()
        }
    };
    if as_json {
        errln!("{}", json!(result));
    }
    result.exit_code()
}

fn status_command(state: &std::path::Path, as_json: bool) -> i32 {
    match grantguard::status::status(state) {
        Ok(report) if as_json => {
            outln!("{report}");
            exit::SUCCESS
        }
        Ok(r) if r.get("grant_id").is_none() => {
            errln!(
                "grantguard status: {}",
                r["error"].as_str().unwrap_or("the checkout cannot be read")
            );
            print_interrupted_imports(&r);
            exit::PERMANENT
        }
        Ok(r) => {
            outln!("grant {}", r["grant_id"].as_str().unwrap_or("?"));
            outln!("allowed paths: {}", r["allowed_paths"]);
            outln!(
                "commits: {} used of {}..={} ({} left)",
                r["commits"]["used"],
                r["commits"]["min"],
                r["commits"]["max"],
                r["commits"]["left"]
            );
            outln!("changed paths: {}", r["changed_paths"]["count"]);
            for p in r["changed_paths"]["listed"]
                .as_array()
                .into_iter()
                .flatten()
            {
                outln!("  {}", p.as_str().unwrap_or("?"));
            }
            outln!("worktree clean: {}", r["worktree_clean"]);
            outln!(
                "HEAD on {}: {}",
                r["branch"].as_str().unwrap_or("?"),
                r["head_on_branch"]
            );
            println!("transport: {}", r["transport"].as_str().unwrap_or("?"));
            println!("hooks: {}", r["hooks"].as_str().unwrap_or("?"));
            for p in r["problems"].as_array().into_iter().flatten() {
                println!(
                    "problem [{}] {}",
                    p["rule"].as_str().unwrap_or("?"),
                    p["message"].as_str().unwrap_or("?")
                );
            }
            print_interrupted_imports(&r);
            exit::SUCCESS
        }
        Err(e) => {
            errln!("grantguard status: {e:#}");
            exit::PERMANENT
        }
    }
}

fn print_interrupted_imports(report: &serde_json::Value) {
    for i in report["interrupted_imports"]
        .as_array()
        .into_iter()
        .flatten()
    {
        println!(
            "interrupted import of run {}: {}",
            i["run"].as_str().unwrap_or("?"),
            i["state"].as_str().unwrap_or("?")
        );
    }
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
            errln!(
                "grantguard catalog: invalid catalog {}: {} error(s)",
                file.display(),
                errors.len()
            );
            for e in &errors {
                errln!("  {e}");
            }
            return exit::PERMANENT;
        }
    };
    match can_run {
        None => {
            outln!("valid catalog: {} tool(s)", catalog.tools().count());
            exit::SUCCESS
        }
        Some((tool, granted)) => match catalog.can_run(tool, granted) {
            Ok(()) => {
                outln!("allowed: {tool}");
                exit::SUCCESS
            }
            Err(refusal) => {
                errln!(
                    "grantguard catalog can-run: refused [{}]: {refusal}",
                    refusal.rule()
                );
                exit::PERMANENT
            }
        },
    }
}

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("source").required(true))]
struct RunArgs {
    /// The TaskSpec file (JSON or TOML).
    #[arg(long, group = "source")]
    task: Option<PathBuf>,
    /// A claimed queue row (JSON); its run_id and worker are the run's.
    #[arg(long, group = "source", conflicts_with_all = ["run_id", "worker"])]
    claim: Option<PathBuf>,
    /// The repository the command works in.
    #[arg(long)]
    repo: PathBuf,
    /// The state directory, outside the repository.
    #[arg(long)]
    state: PathBuf,
    /// A granted capability (repeat for several).
    #[arg(long = "capability", value_name = "CAP")]
    capabilities: Vec<String>,
    /// The tool catalog (TOML).
    #[arg(long)]
    catalog: Option<PathBuf>,
    /// The role registry (TOML).
    #[arg(long)]
    registry: Option<PathBuf>,
    /// The metrics file (default <state>/metrics.jsonl for a granted task).
    #[arg(long, conflicts_with = "no_metrics")]
    metrics: Option<PathBuf>,
    /// Write no metrics (refused for a task with a grant).
    #[arg(long)]
    no_metrics: bool,
    /// The run id (default: a fresh one).
    #[arg(long)]
    run_id: Option<String>,
    /// The worker id (default: local).
    #[arg(long)]
    worker: Option<String>,
    /// The journal directory (default <state>/journal).
    #[arg(long)]
    journal: Option<PathBuf>,
    /// Seconds the command may run before its process group is ended
    /// (1 to 2592000, 30 days).
    #[arg(
        long,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=grantguard::run::process::MAX_TIMEOUT_SECS)
    )]
    timeout: Option<u64>,
    /// Seconds verification may take (1 to 86400); past them (and a short
    /// grace) the verify child is killed and the run is an internal defect.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = grantguard::deadline::DEFAULT_VERIFY_TIMEOUT_SECS,
        value_parser = clap::value_parser!(u64).range(1..=grantguard::deadline::MAX_VERIFY_TIMEOUT_SECS)
    )]
    verify_timeout: u64,
    /// What to do with the checkout when the run is not accepted.
    #[arg(long, value_enum, default_value = "keep")]
    on_reject: OnRejectArg,
    /// Print the ToolResult as JSON on stdout (the only thing run prints
    /// there: the command's stdout goes to stderr).
    #[arg(long)]
    json: bool,
    /// Also write the ToolResult as JSON to FILE, atomically (outside the
    /// repository).
    #[arg(long, value_name = "FILE")]
    result: Option<PathBuf>,
    /// Linux: run the command in its own mount and network namespaces: the
    /// state directory, journal, metrics and result files and the protected
    /// git metadata read-only, and no network unless the task requires a
    /// network.* capability. Refused (nothing runs) where namespaces are
    /// unavailable.
    #[arg(long)]
    isolate: bool,
    /// With --isolate: where the command works. `sealed` (the default): a
    /// private copy-on-write view of the checkout at the same path; the
    /// host repository is never writable from inside, and only the commits
    /// verify accepted are imported into it. `in-place`: the checkout
    /// itself, its protected metadata read-only.
    #[arg(long, value_enum, requires = "isolate", value_name = "MODE")]
    workspace: Option<WorkspaceArg>,
    /// A repository_publication contract: once the run is accepted,
    /// grantguard (never the agent) pushes the accepted tip to the
    /// contract's remote ref. Refused without a grant or for another grant.
    #[arg(long, value_name = "FILE")]
    publication: Option<PathBuf>,
    /// The agent's command and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<std::ffi::OsString>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum WorkspaceArg {
    Sealed,
    InPlace,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum OnRejectArg {
    Keep,
    Restore,
}

fn run_command(args: RunArgs) -> i32 {
    use grantguard::run::{self, MetricsChoice, OnReject, Request, TaskSource};
    let source = match (args.task, args.claim) {
        (Some(task), _) => TaskSource::Task(task),
        (None, Some(claim)) => TaskSource::Claim(claim),
        (None, None) => {
            errln!("grantguard run: pass --task FILE or --claim FILE");
            return exit::USAGE;
        }
    };
    let metrics = match (args.metrics, args.no_metrics) {
        (Some(file), _) => MetricsChoice::File(file),
        (None, true) => MetricsChoice::Disabled,
        (None, false) => MetricsChoice::Default,
    };
    let request = Request {
        source,
        repo: args.repo,
        state: args.state,
        capabilities: args.capabilities,
        catalog: args.catalog,
        registry: args.registry,
        metrics,
        run_id: args.run_id,
        worker: args.worker,
        journal: args.journal,
        timeout: args.timeout.map(std::time::Duration::from_secs),
        verify_timeout: std::time::Duration::from_secs(args.verify_timeout),
        on_reject: match args.on_reject {
            OnRejectArg::Keep => OnReject::Keep,
            OnRejectArg::Restore => OnReject::Restore,
        },
        command: args.command,
        result_file: args.result.clone(),
        isolate: args.isolate,
        workspace: match args.workspace {
            Some(WorkspaceArg::InPlace) => run::WorkspaceMode::InPlace,
            Some(WorkspaceArg::Sealed) | None => run::WorkspaceMode::Sealed,
        },
        publication: args.publication,
    };
    let result = run::run(&request);
    let refused_file = result.evidence.contains_key(run::result_file::REFUSED);
    if let Some(file) = args.result.as_deref().filter(|_| !refused_file)
        && let Err(e) = run::result_file::write(file, &result)
    {
        let _ = std::fs::remove_file(file);
        errln!(
            "grantguard run: cannot write the result to {} ({e:#}); the result is recorded in \
             the journal: run again with the same --run-id to get it",
            file.display()
        );
    }
    errp!("{}", run::summary(&result));
    if args.json {
        outln!(
            "{}",
            serde_json::to_string(&result).expect("results are plain data")
        );
    }
    result.exit_code()
}
