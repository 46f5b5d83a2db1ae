//! The `goodput` command line: the daemon (`run`), its checks (`check`, `inspect`, `rules`),
//! recording and replay, and the simulator behind `demo` and `simulate`.

use clap::Parser;

mod allocator;
mod cli;

// The subcommands name the library's modules as `crate::…`, as the daemon crate does.
use goodput::{
    adapt, canonical, config, daemon, duration, gpu, parse, probe, promql_rules, redact, replay, report, request,
    scrape, slo,
};
use goodput_sim as sim;

fn main() {
    #[cfg(not(target_os = "linux"))]
    allocator::commit_arenas_on_demand();
    let cli = cli::Cli::parse();
    std::process::exit(cli::main(cli));
}
