//! The `goodput` command line: the daemon (`run`), its checks (`check`, `inspect`, `rules`),
//! recording and replay, and the simulator behind `demo` and `simulate`.

use clap::Parser;

mod cli;

// The subcommands name the library's modules as `crate::…`, as the daemon crate does.
use goodput::{
    adapt, canonical, config, daemon, duration, gpu, parse, probe, redact, replay, report, request, rules, scrape, slo,
};
use goodput_sim as sim;

/// mimalloc rather than glibc's malloc (docs/footprint.md#memory). At 10,000 targets glibc's
/// free lists (one arena, consolidated on large requests) took a fifth of the machine and
/// kept evaluation from finishing its tick; mimalloc's per-thread pages do not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    return_freed_memory_at_once();
    let cli = cli::Cli::parse();
    std::process::exit(cli::main(cli));
}

/// mimalloc keeps freed pages a while before giving them back, and commits its arenas
/// ahead of use: at 20 targets that held 60–75 MiB of RSS where glibc held 22 MiB. Purging
/// at once and committing on demand keep it at 25 MiB, and cost nothing measurable at
/// 10,000 targets (docs/footprint.md#memory).
fn return_freed_memory_at_once() {
    // `mi_option_e` in mimalloc.h: versions 2 and 3 number these alike.
    const ARENA_EAGER_COMMIT: std::ffi::c_int = 4;
    const PURGE_DELAY: std::ffi::c_int = 15;
    unsafe extern "C" {
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    // SAFETY: mi_option_set only stores an option's value, read when mimalloc next needs it;
    // called before any other thread exists.
    unsafe {
        mi_option_set(ARENA_EAGER_COMMIT, 0);
        mi_option_set(PURGE_DELAY, 0);
    }
}
