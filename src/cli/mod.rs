//! The `goodput` command line: one module per subcommand, each with its clap `Args`
//! and a `run` that returns the process exit code.

mod against;
mod logging;
mod subcommand;

pub mod check;
pub mod columns;
pub mod completions;
pub mod demo;
pub mod inspect;
pub mod record;
pub mod replay;
pub mod rules;
pub mod run;
pub mod simulate;
pub mod summary;

use clap::{CommandFactory, Parser, Subcommand};

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
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(completions::Args),
}

/// Runs the parsed command line and returns the process exit code.
pub fn main(cli: Cli) -> i32 {
    crate::cli::logging::init(cli.log_format);
    if matches!(
        cli.command,
        Command::Check(_) | Command::Inspect(_) | Command::Replay(_) | Command::Rules(_) | Command::Completions(_)
    ) {
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
        Command::Completions(a) => completions::run(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // The whole chain: an HTTP client's own message ("error sending request") hides
            // the cause the user can act on ("connection refused", a DNS failure).
            eprintln!("error: {}", crate::redact::error_chain(e.as_ref()));
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every subcommand under `cmd` (itself included) with its path, e.g. "goodput rules".
    fn walk(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.clone(), cmd.clone()));
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, format!("{path} {}", sub.get_name()), out);
        }
    }

    fn commands() -> Vec<(String, clap::Command)> {
        let mut out = Vec::new();
        walk(&Cli::command(), "goodput".into(), &mut out);
        out
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_and_argument_has_help() {
        let mut missing = Vec::new();
        for (path, cmd) in commands() {
            if path != "goodput" && cmd.get_about().is_none() {
                missing.push(format!("{path} (the subcommand)"));
            }
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {}", a.get_long().map_or(id.to_string(), |l| format!("--{l}"))));
                }
            }
        }
        assert!(commands().len() >= 10, "the walk found the subcommands");
        assert!(missing.is_empty(), "arguments without help text (give each a /// doc comment): {missing:?}");
    }

    #[test]
    fn every_config_flag_has_the_short_c() {
        let mut with_config = Vec::new();
        for (path, cmd) in commands() {
            if let Some(a) = cmd.get_arguments().find(|a| a.get_long() == Some("config")) {
                assert_eq!(a.get_short(), Some('c'), "{path} --config has no -c");
                with_config.push(path);
            }
        }
        for name in ["check", "run", "replay", "rules", "demo", "simulate"] {
            assert!(with_config.contains(&format!("goodput {name}")), "goodput {name} takes --config: {with_config:?}");
        }
    }

    /// `--format` always chooses what a command prints; simulate's old `--format` (the
    /// simulated engine) is hidden, a deprecated name of `--engine`.
    #[test]
    fn every_visible_format_flag_is_an_output_format() {
        const OUTPUT_FORMATS: [&str; 5] = ["text", "json", "table", "prometheusrule", "prometheus"];
        let mut seen = 0;
        for (path, cmd) in commands() {
            let Some(a) = cmd.get_arguments().find(|a| a.get_long() == Some("format")) else { continue };
            if path == "goodput simulate" {
                assert!(a.is_hide_set(), "simulate --format is a hidden alias of --engine");
                continue;
            }
            for v in a.get_possible_values() {
                assert!(OUTPUT_FORMATS.contains(&v.get_name()), "{path} --format {}", v.get_name());
            }
            seen += 1;
        }
        assert_eq!(seen, 3, "inspect, replay and rules have --format");
    }
}
