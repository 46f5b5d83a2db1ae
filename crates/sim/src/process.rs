//! The process and Python-runtime families that prometheus_client's default collectors add
//! to every single-process vLLM scrape (python_gc_*, python_info, process_*).
//!
//! Their values are plausible and deterministic functions of virtual time. The point is
//! the shape, and `process_start_time_seconds`, which scrapers use to detect restarts.

use super::expo::{Labels, Writer};

/// Writes the families at virtual time `t` (seconds since a process start at `start_unix`).
pub fn write(w: &mut Writer, start_unix: f64, t: f64) {
    let t = t.max(0.0);
    let generation = |g: u32| -> Labels { vec![("generation", g.to_string())] };
    let gens = [generation(0), generation(1), generation(2)];
    let grow = |base: f64, per_s: f64| (base + per_s * t).floor();
    w.counter_no_created(
        "python_gc_objects_collected",
        "Objects collected during gc",
        gens.iter().zip([grow(12000.0, 40.0), grow(5000.0, 4.0), grow(1200.0, 0.2)]),
    );
    w.counter_no_created(
        "python_gc_objects_uncollectable",
        "Uncollectable objects found during GC",
        gens.iter().zip([0.0; 3]),
    );
    w.counter_no_created(
        "python_gc_collections",
        "Number of times this generation was collected",
        gens.iter().zip([grow(1000.0, 3.0), grow(90.0, 0.3), grow(6.0, 0.02)]),
    );
    let info: Labels = vec![
        ("implementation", "CPython".into()),
        ("major", "3".into()),
        ("minor", "12".into()),
        ("patchlevel", "11".into()),
        ("version", "3.12.11".into()),
    ];
    w.gauge("python_info", Some("Python platform information"), [(&info, 1.0)]);
    let none = Labels::new();
    let gauge = |w: &mut Writer, name: &str, help: &str, v: f64| w.gauge(name, Some(help), [(&none, v)]);
    gauge(w, "process_virtual_memory_bytes", "Virtual memory size in bytes.", 115_891_634_176.0);
    gauge(w, "process_resident_memory_bytes", "Resident memory size in bytes.", 5_106_151_424.0);
    // /proc reports the start in clock ticks (1/100 s).
    let started = (start_unix * 100.0).round() / 100.0;
    gauge(w, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", started);
    w.counter_no_created(
        "process_cpu_seconds",
        "Total user and system CPU time spent in seconds.",
        [(&none, (1.1 * t * 100.0).round() / 100.0)],
    );
    gauge(w, "process_open_fds", "Number of open file descriptors.", 159.0);
    gauge(w, "process_max_fds", "Maximum number of open file descriptors.", 1_048_576.0);
}
