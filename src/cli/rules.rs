//! `goodput rules`.

use super::CliResult;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CliResult {
    Err("`goodput rules` is not built yet".into())
}
