//! Meaning checks for `state_dir`, `state_snapshot_interval` and `state_max_size`: where the daemon keeps the
//! snapshot that lets its windows, alert states, request records and error budgets survive
//! a restart (docs/config.md#state_dir).

use std::path::PathBuf;
use std::time::Duration;

use super::bytes::parse_bytes;
use super::error::Diagnostics;
use super::raw::S;
use crate::duration::parse_positive_duration;

/// How often the snapshot is written when `state_snapshot_interval` is not set: what a
/// `kill -9` loses at most, against a write of the whole window store each time.
pub const DEFAULT_STATE_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(60);

/// The shortest interval accepted: each snapshot writes every target's windows.
pub const MIN_STATE_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(1);

/// The largest snapshot written when `state_max_size` is not set: 512 MiB, so that it and
/// its temporary copy fit the 1 GiB `emptyDir` of the shipped manifests.
pub const DEFAULT_STATE_MAX_SIZE: u64 = 512 << 20;

/// The smallest `state_max_size` accepted: below it a single busy target's windows would
/// not fit.
pub const MIN_STATE_MAX_SIZE: u64 = 1 << 20;

/// Where and how often the state is saved, and how large the file may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    pub dir: PathBuf,
    pub snapshot_interval: Duration,
    /// Sections that would take the file past this are left out (docs/config.md#state_dir).
    pub max_size: u64,
}

pub(super) fn state_section(
    d: &mut Diagnostics,
    dir: Option<&S<String>>,
    interval: Option<&S<String>>,
    size: Option<&S<String>>,
) -> Option<StateConfig> {
    let snapshot_interval = match interval {
        None => DEFAULT_STATE_SNAPSHOT_INTERVAL,
        Some(s) => match parse_positive_duration(&s.value) {
            Ok(v) if v >= MIN_STATE_SNAPSHOT_INTERVAL => v,
            Ok(_) => {
                d.error(s.pos, format!("state_snapshot_interval: {:?} is shorter than 1s; each snapshot writes every target's windows, so use 1s or more (the default is 60s)", s.value));
                DEFAULT_STATE_SNAPSHOT_INTERVAL
            }
            Err(e) => {
                d.error(s.pos, format!("state_snapshot_interval: {e}"));
                DEFAULT_STATE_SNAPSHOT_INTERVAL
            }
        },
    };
    let max_size = match size {
        None => DEFAULT_STATE_MAX_SIZE,
        Some(s) => match parse_bytes(&s.value) {
            Ok(v) if v as u64 >= MIN_STATE_MAX_SIZE => v as u64,
            Ok(_) => {
                d.error(s.pos, format!("state_max_size: {:?} is under 1MiB, too small for one target's windows; give a size like 2GiB (the default is 512MiB)", s.value));
                DEFAULT_STATE_MAX_SIZE
            }
            Err(e) => {
                d.error(s.pos, format!("state_max_size: {e}"));
                DEFAULT_STATE_MAX_SIZE
            }
        },
    };
    let Some(dir) = dir else {
        for (key, s) in [("state_snapshot_interval", interval), ("state_max_size", size)] {
            if let Some(s) = s {
                d.warn(
                    s.pos,
                    format!("{key} has no effect without state_dir, the directory the snapshot is written to"),
                );
            }
        }
        return None;
    };
    let path = dir.value.trim();
    if path.is_empty() {
        d.error(dir.pos, "state_dir is empty; give a directory the daemon may write (e.g. /var/lib/goodput), or remove the key to keep state in memory only");
        return None;
    }
    Some(StateConfig { dir: PathBuf::from(path), snapshot_interval, max_size })
}
