//! The daemon's own process metrics, as the Prometheus client libraries name them, read
//! from /proc/self. On other systems they are simply absent.

use std::sync::OnceLock;

use goodput_core::export::{Collector, Emit, Family, Labels, NoLabels, Unit};

const CPU: &str = "process_cpu_seconds_total";
const RESIDENT: &str = "process_resident_memory_bytes";
const VIRTUAL: &str = "process_virtual_memory_bytes";
const START: &str = "process_start_time_seconds";
const OPEN_FDS: &str = "process_open_fds";
const MAX_FDS: &str = "process_max_fds";

/// Every process family, in output order, with the HELP the client libraries give them.
pub const FAMILIES: &[Family] = &[
    Family::counter::<NoLabels>(CPU, Unit::Seconds, "Total user and system CPU time spent in seconds."),
    Family::gauge::<NoLabels>(RESIDENT, Unit::Bytes, "Resident memory size in bytes."),
    Family::gauge::<NoLabels>(VIRTUAL, Unit::Bytes, "Virtual memory size in bytes."),
    Family::gauge::<NoLabels>(START, Unit::Timestamp, "Start time of the process since unix epoch in seconds."),
    Family::gauge::<NoLabels>(OPEN_FDS, Unit::Count, "Number of open file descriptors."),
    Family::gauge::<NoLabels>(MAX_FDS, Unit::Count, "Maximum number of open file descriptors."),
];

/// The process families, read from /proc at each GET of /metrics.
pub struct Process;

impl Collector for Process {
    fn families(&self) -> &'static [Family] {
        FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        for (name, value) in process_metrics() {
            out.sample(name, Labels::new(&[], &[]), value);
        }
    }
}

/// (name, value) of each process metric available now.
pub fn process_metrics() -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return out;
    };
    // The command name is in parentheses and may hold spaces; fields follow the last ')'.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return out;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 of proc(5) (state).
    let field = |n: usize| fields.get(n - 3).and_then(|s| s.parse::<f64>().ok());
    let tick = clock_ticks_per_second();
    if let (Some(utime), Some(stime)) = (field(14), field(15)) {
        out.push((CPU, (utime + stime) / tick));
    }
    if let Some(rss) = field(24) {
        out.push((RESIDENT, rss * page_size()));
    }
    if let Some(vsize) = field(23) {
        out.push((VIRTUAL, vsize));
    }
    if let (Some(start), Some(boot)) = (field(22), boot_time()) {
        out.push((START, boot + start / tick));
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        out.push((OPEN_FDS, dir.count() as f64));
    }
    if let Some(max) = crate::listen::fds::nofile_limit() {
        out.push((MAX_FDS, max as f64));
    }
    out
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

fn page_size() -> f64 {
    // SAFETY: as above.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as f64 } else { 4096.0 }
}

/// System boot time (Unix seconds) from /proc/stat's `btime`; constant, so read once.
fn boot_time() -> Option<f64> {
    static BOOT: OnceLock<Option<f64>> = OnceLock::new();
    *BOOT.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        stat.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse().ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn reads_plausible_values() {
        let m = process_metrics();
        let get = |n: &str| m.iter().find(|x| x.0 == n).map(|x| x.1).unwrap_or_else(|| panic!("{n} missing"));
        assert!(get("process_resident_memory_bytes") > 1e5);
        assert!(get("process_cpu_seconds_total") >= 0.0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let start = get("process_start_time_seconds");
        // This test process started within the last day and not in the future.
        assert!(start <= now + 1.0 && start > now - 86_400.0, "start {start} now {now}");
    }
}
