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
    #[cfg(not(target_os = "linux"))]
    commit_arenas_on_demand();
    let cli = cli::Cli::parse();
    std::process::exit(cli::main(cli));
}

/// mimalloc commits an arena when it creates it: at 20 targets that left 51–65 MiB resident
/// where glibc held 22 MiB. Committed on demand it is 26–28 MiB, at no measurable cost at
/// 10,000 targets (docs/footprint.md#memory).
/// The first arena is made at the first allocation, before `main`, so on Linux this runs as a
/// constructor, before any allocation; elsewhere from `main`.
extern "C" fn commit_arenas_on_demand() {
    // `mi_option_arena_eager_commit` in mimalloc.h (versions 2 and 3 number it alike).
    const ARENA_EAGER_COMMIT: std::ffi::c_int = 4;
    unsafe extern "C" {
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    // SAFETY: mi_option_set only stores an option's value, read when mimalloc next needs it.
    unsafe { mi_option_set(ARENA_EAGER_COMMIT, 0) }
}

#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_ARENAS_ON_DEMAND: extern "C" fn() = commit_arenas_on_demand;
