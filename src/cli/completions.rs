//! `goodput completions SHELL`: a completion script for the shell, generated from the same
//! clap definitions the command line parses with, so it never lags behind a new flag.

use clap_complete::Shell;

use super::subcommand::CliResult;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the script that completes `cmd`, the whole command line: passed in, since it
/// holds this subcommand too.
pub fn run(args: Args, mut cmd: clap::Command) -> CliResult {
    clap_complete::generate(args.shell, &mut cmd, "goodput", &mut std::io::stdout());
    Ok(0)
}
