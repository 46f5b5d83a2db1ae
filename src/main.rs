//! The `goodput` command line: the daemon (`run`), its checks (`check`, `inspect`, `rules`),
//! recording and replay, and the simulator behind `demo` and `simulate`.

use clap::Parser;

mod cli;

// The subcommands name the library's modules as `crate::…`, as the daemon crate does.
use goodput::{
    adapt, canonical, config, daemon, duration, gpu, parse, probe, redact, replay, report, request, rules, scrape, slo,
};
use goodput_sim as sim;

fn main() {
    limit_malloc_arenas();
    let cli = cli::Cli::parse();
    std::process::exit(cli::main(cli));
}

/// glibc's malloc gives each thread that allocates its own arena (up to 8 per core) and
/// keeps what is freed in it: the blocking-pool threads that parse scrapes and evaluate
/// targets each grew one, and the daemon's RSS at 20 targets climbed from 33 to over
/// 110 MiB without holding more data. One arena keeps it flat (docs/footprint.md#memory).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
