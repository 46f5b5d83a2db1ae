//! The global allocator: mimalloc, or glibc's malloc for a small fleet known at start
//! (docs/footprint.md#memory).
//!
//! The two suit opposite ends. At 10,000 targets glibc's free lists (one arena,
//! consolidated on large requests) took a fifth of the machine and kept evaluation from
//! finishing its tick; mimalloc's per-thread pages do not. At 20 targets those per-thread
//! pages, partly filled for each size class on each thread that allocates, cost about 6 MiB
//! of the 29 the daemon held, which glibc with one arena does not. So the daemon starts on
//! mimalloc (every other subcommand stays on it) and [`fit_to_fleet`] moves a small fleet's
//! allocations to glibc once the config is read. What was allocated before goes back to
//! mimalloc when freed: each free asks mimalloc whether it owns the pointer.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_int, c_long, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use mimalloc::MiMalloc;

#[global_allocator]
static ALLOCATOR: FleetAllocator = FleetAllocator;

/// Whether new allocations come from glibc. Set at most once, from `false` to `true`, so a
/// thread that sees `false` holds only mimalloc's pointers: a pointer reaches a thread
/// through synchronization that also carries the store that preceded its allocation.
static GLIBC: AtomicBool = AtomicBool::new(false);

/// Fleets up to this many targets use glibc's malloc ([`fit_to_fleet`]).
pub const SMALL_FLEET: usize = 100;

/// Which allocator a fleet gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Mimalloc,
    Glibc,
}

/// Why `GOODPUT_ALLOCATOR` cannot be honoured: the daemon refuses to start rather than run
/// on an allocator other than the one asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocatorError {
    #[error(
        "GOODPUT_ALLOCATOR is \"glibc\", but this build does not link glibc (only Linux builds against glibc do, like the container image): unset it or set it to \"mimalloc\""
    )]
    GlibcNotLinked,
    #[error("GOODPUT_ALLOCATOR is {0:?}; expected \"mimalloc\" or \"glibc\"")]
    Unknown(String),
}

impl Choice {
    /// `GOODPUT_ALLOCATOR` (`mimalloc` or `glibc`) if set, else by the fleet known at start
    /// (`None`: not known, as with discovery).
    pub fn for_fleet(targets: Option<usize>, env: Option<&str>) -> Result<Choice, AllocatorError> {
        let glibc_build = cfg!(all(target_os = "linux", target_env = "gnu"));
        match env.map(str::trim) {
            Some("mimalloc") => Ok(Choice::Mimalloc),
            Some("glibc") if glibc_build => Ok(Choice::Glibc),
            Some("glibc") => Err(AllocatorError::GlibcNotLinked),
            Some(other) => Err(AllocatorError::Unknown(other.to_string())),
            None if glibc_build && targets.is_some_and(|n| n <= SMALL_FLEET) => Ok(Choice::Glibc),
            None => Ok(Choice::Mimalloc),
        }
    }
}

/// Picks the allocator for a fleet of `targets` (see [`Choice::for_fleet`]). Called once,
/// before the runtime's threads start: a reload that grows the fleet keeps the choice.
pub fn fit_to_fleet(targets: Option<usize>) -> Result<Choice, AllocatorError> {
    let env = std::env::var("GOODPUT_ALLOCATOR").ok();
    let choice = Choice::for_fleet(targets, env.as_deref())?;
    if choice == Choice::Glibc {
        use_glibc();
    }
    Ok(choice)
}

/// glibc gives each thread that allocates an arena of its own (up to 8 per core) and keeps
/// what is freed in it: at 20 targets the blocking-pool threads grew the RSS from 33 to over
/// 110 MiB without more data. One arena keeps it flat. Blocks of 128 KiB and more are mapped
/// on their own and unmapped when freed: glibc's threshold otherwise rises to the largest
/// block freed, after which each tick's large buffers come from the heap and fragment it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn use_glibc() {
    // SAFETY: mallopt only sets the allocator's parameters.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
    GLIBC.store(true, Ordering::Relaxed);
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn use_glibc() {}

unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
    fn mi_is_in_heap_region(p: *const c_void) -> bool;
}

/// mimalloc for everything until [`use_glibc`]; then glibc for new allocations, and each
/// pointer freed or resized by the allocator that made it.
struct FleetAllocator;

impl FleetAllocator {
    /// Whether `p` is glibc's. Before the switch every pointer is mimalloc's; after it,
    /// mimalloc's page map tells (a lookup, no search).
    fn is_glibc(p: *mut u8) -> bool {
        // SAFETY: mi_is_in_heap_region reads mimalloc's page map and accepts any address.
        GLIBC.load(Ordering::Relaxed) && !unsafe { mi_is_in_heap_region(p.cast()) }
    }
}

// SAFETY: every pointer goes back to the allocator that returned it (see `is_glibc`), and
// both allocators meet GlobalAlloc's contract.
unsafe impl GlobalAlloc for FleetAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { if GLIBC.load(Ordering::Relaxed) { System.alloc(layout) } else { MiMalloc.alloc(layout) } }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if GLIBC.load(Ordering::Relaxed) { System.alloc_zeroed(layout) } else { MiMalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` goes back to the allocator that returned it.
        unsafe { if Self::is_glibc(ptr) { System.dealloc(ptr, layout) } else { MiMalloc.dealloc(ptr, layout) } }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A block grows in the allocator that made it, even after the switch: few blocks
        // made before it are resized after.
        // SAFETY: as in `dealloc`.
        unsafe {
            if Self::is_glibc(ptr) {
                System.realloc(ptr, layout, new_size)
            } else {
                MiMalloc.realloc(ptr, layout, new_size)
            }
        }
    }
}

// Option numbers of `mi_option_t` in mimalloc.h (versions 2 and 3 number these alike).
const ARENA_EAGER_COMMIT: c_int = 4;

/// mimalloc commits an arena when it creates it: at 20 targets that left 51–65 MiB resident
/// where glibc held 22 MiB. Committed on demand it is 26–28 MiB, at no measurable cost at
/// 10,000 targets.
/// The first arena is made at the first allocation, before `main`, so on Linux this runs as a
/// constructor, before any allocation; elsewhere from `main`.
pub extern "C" fn commit_arenas_on_demand() {
    // SAFETY: mi_option_set only stores an option's value, read when mimalloc next needs it.
    unsafe { mi_option_set(ARENA_EAGER_COMMIT, 0) }
}

#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_ARENAS_ON_DEMAND: extern "C" fn() = commit_arenas_on_demand;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_fleet_known_at_start_gets_glibc_unless_the_environment_says_otherwise() {
        let gnu = cfg!(all(target_os = "linux", target_env = "gnu"));
        let small = if gnu { Choice::Glibc } else { Choice::Mimalloc };
        assert_eq!(Choice::for_fleet(Some(SMALL_FLEET), None), Ok(small));
        assert_eq!(Choice::for_fleet(Some(1), None), Ok(small));
        assert_eq!(Choice::for_fleet(Some(SMALL_FLEET + 1), None), Ok(Choice::Mimalloc));
        assert_eq!(Choice::for_fleet(None, None), Ok(Choice::Mimalloc), "a fleet found by discovery");
        assert_eq!(Choice::for_fleet(Some(1), Some("mimalloc")), Ok(Choice::Mimalloc));
        // Asked for glibc: given it where the build links it, refused where it does not.
        let asked = Choice::for_fleet(None, Some(" glibc\n"));
        if gnu {
            assert_eq!(asked, Ok(Choice::Glibc));
        } else {
            assert_eq!(asked, Err(AllocatorError::GlibcNotLinked));
        }
        let err = Choice::for_fleet(Some(1), Some("jemalloc")).unwrap_err().to_string();
        assert!(err.contains("GOODPUT_ALLOCATOR") && err.contains("jemalloc"), "{err}");
    }

    /// Pointers made by mimalloc before the switch are freed and resized by mimalloc after
    /// it, and new ones come from glibc. The switch is the process's, and tests share the
    /// process, so every other test in this binary allocates across it as well.
    #[test]
    fn blocks_made_before_the_switch_go_back_to_mimalloc() {
        let before: Vec<Box<[u8]>> = (0..64).map(|i| vec![i as u8; 16 << (i % 12)].into_boxed_slice()).collect();
        let mut grown: Vec<u64> = Vec::with_capacity(4);
        grown.extend(0..4);
        assert!(before.iter().all(|b| unsafe { mi_is_in_heap_region(b.as_ptr().cast()) }));
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            return;
        }
        use_glibc();
        let after = vec![7u8; 1000];
        assert!(!unsafe { mi_is_in_heap_region(after.as_ptr().cast()) }, "new blocks are glibc's");
        grown.extend(4..100_000); // realloc of a mimalloc block, after the switch
        assert!(grown.iter().copied().eq(0..100_000));
        for (i, b) in before.iter().enumerate() {
            assert!(b.iter().all(|&x| x == i as u8));
        }
        drop(before);
        drop(grown);
        let again: Vec<Box<[u8]>> = (0..64).map(|i| vec![i as u8; 16 << (i % 12)].into_boxed_slice()).collect();
        assert!(again.iter().enumerate().all(|(i, b)| b.iter().all(|&x| x == i as u8)));
    }
}
