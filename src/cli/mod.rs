//! The `goodput` command line: one module per subcommand, each with its clap `Args`
//! and a `run` that returns the process exit code.

mod logging;

pub mod check;
pub mod demo;
pub mod inspect;
pub mod record;
pub mod replay;
pub mod rules;
pub mod run;
pub mod simulate;
pub mod summary;

use clap::{Parser, Subcommand};

pub use crate::cli::logging::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "goodput",
    version = goodput::LONG_VERSION,
    about = "PromQL-exact latency quantiles, SLO attainment and goodput for LLM inference engines"
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: scrape targets, evaluate windows and SLOs, serve /metrics.
    Run(run::Args),
    /// Validate a config file (exit 1 with file:line:column on error).
    Check(check::Args),
    /// Simulated engines plus the daemon on an embedded config; no GPU needed.
    Demo(demo::Args),
    /// Parse one exposition (file or URL), detect the engine, print the canonical view.
    Inspect(inspect::Args),
    /// The engine simulator (live /metrics, or offline recording plus ground truth).
    Simulate(simulate::Args),
    /// Record raw scrapes of a target into DIR/<name>/<unix-millis>.prom.
    Record(record::Args),
    /// Evaluate a recording in virtual time and print one JSON line per instant.
    Replay(replay::Args),
    /// Emit Prometheus recording and alerting rules for the configured SLOs.
    Rules(rules::Args),
}

/// Runs the parsed command line and returns the process exit code.
pub fn main(cli: Cli) -> i32 {
    crate::cli::logging::init(cli.log_format);
    if matches!(cli.command, Command::Check(_) | Command::Inspect(_) | Command::Replay(_) | Command::Rules(_)) {
        die_quietly_on_broken_pipe();
    }
    let result = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Check(a) => check::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Record(a) => record::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Rules(a) => rules::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

/// Commands that print a result end quietly when the reader goes away (`goodput rules … |
/// head -1`), as Unix tools do. Rust starts with SIGPIPE ignored, so a write to a closed pipe
/// is an error and `println!` panics on it. The daemon and the live simulator keep it
/// ignored: what they write goes to sockets, where a closed peer is an error to handle.
fn die_quietly_on_broken_pipe() {
    // SAFETY: restoring a signal's default disposition, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Errors a subcommand reports to the user before exiting 1.
pub type CliResult = Result<i32, Box<dyn std::error::Error + Send + Sync>>;

/// Loads a config for a subcommand that needs a valid one: prints every error (and a
/// pointer to `goodput check`) or the warnings to stderr. `None` means exit 1.
pub(crate) fn load_config(path: &std::path::Path) -> Option<crate::config::Config> {
    match crate::config::load(path) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            Some(loaded.config)
        }
        Err(errs) => {
            for e in &errs.0 {
                eprintln!("error: {e}");
            }
            eprintln!("{}: {} error(s); `goodput check --config FILE` shows them too", path.display(), errs.0.len());
            None
        }
    }
}
