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
///
/// Blocks of 128 KiB and more are mapped on their own and unmapped when freed. glibc's
/// default threshold starts there but rises to the largest block freed (up to 32 MiB), after
/// which each tick's large buffers (/metrics families, the report's vectors, a snapshot's
/// frames) come from the heap and leave it fragmented: with full windows at 2,000 targets
/// the RSS was 0.70 MiB per target with the rising threshold and 0.53 MiB with it fixed
/// (docs/footprint.md#memory).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}
