//! The global allocator and the two options the daemon sets on it (docs/footprint.md#memory).
//!
//! mimalloc rather than glibc's malloc: at 10,000 targets glibc's free lists (one arena,
//! consolidated on large requests) took a fifth of the machine and kept evaluation from
//! finishing its tick; mimalloc's per-thread pages do not.

use std::ffi::{c_int, c_long};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Option numbers of `mi_option_t` in mimalloc.h (versions 2 and 3 number these alike).
const ARENA_EAGER_COMMIT: c_int = 4;
const PURGE_DELAY: c_int = 15;

unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}

fn set(option: c_int, value: c_long) {
    // SAFETY: mi_option_set only stores an option's value, read when mimalloc next needs it.
    unsafe { mi_option_set(option, value) }
}

/// Fleets up to this many targets get their freed memory back at once ([`fit_to_fleet`]).
pub const SMALL_FLEET: usize = 100;

/// Sets the purge delay for a fleet of `targets` (`None`: not known at start, as with
/// discovery). mimalloc keeps freed pages for a second (its `purge_delay`) before handing
/// them back, so that a page freed and soon needed again costs no page faults. For a small
/// fleet that cache is most of what the daemon holds beyond its windows (3 MiB of 32 at 20
/// targets) and the faults cost nothing measurable, so pages go back as soon as they are
/// free; at 2,000 targets that cost 15–30 % more CPU, so larger or unknown fleets keep the
/// default. `MIMALLOC_PURGE_DELAY` in the environment wins over either.
pub fn fit_to_fleet(targets: Option<usize>) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    if targets.is_some_and(|n| n <= SMALL_FLEET) {
        set(PURGE_DELAY, 0);
    }
}

/// mimalloc commits an arena when it creates it: at 20 targets that left 51–65 MiB resident
/// where glibc held 22 MiB. Committed on demand it is 26–28 MiB, at no measurable cost at
/// 10,000 targets.
/// The first arena is made at the first allocation, before `main`, so on Linux this runs as a
/// constructor, before any allocation; elsewhere from `main`.
pub extern "C" fn commit_arenas_on_demand() {
    set(ARENA_EAGER_COMMIT, 0);
}

#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_ARENAS_ON_DEMAND: extern "C" fn() = commit_arenas_on_demand;

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" {
        fn mi_option_get(option: c_int) -> c_long;
    }

    fn purge_delay() -> c_long {
        // SAFETY: mi_option_get only reads an option's value.
        unsafe { mi_option_get(PURGE_DELAY) }
    }

    /// One test, not three: the option is the process's, and tests run in parallel.
    #[test]
    fn only_a_small_fleet_known_at_start_gets_freed_memory_back_at_once() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return; // the environment decides, as it does for the daemon
        }
        let default = purge_delay();
        assert!(default > 0, "mimalloc delays purging by default, got {default}");
        fit_to_fleet(None);
        assert_eq!(purge_delay(), default, "a fleet found by discovery keeps the default");
        fit_to_fleet(Some(SMALL_FLEET + 1));
        assert_eq!(purge_delay(), default, "a large fleet keeps the default");
        fit_to_fleet(Some(SMALL_FLEET));
        assert_eq!(purge_delay(), 0);
    }
}
