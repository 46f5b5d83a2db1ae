//! Meaning checks for `state_dir` and `state_snapshot_interval`: where the daemon keeps the
//! snapshot that lets its windows, alert states, request records and error budgets survive
//! a restart (docs/config.md#state_dir).

use std::path::PathBuf;
use std::time::Duration;

use super::error::Diagnostics;
use super::raw::S;
use crate::duration::parse_positive_duration;

/// How often the snapshot is written when `state_snapshot_interval` is not set: what a
/// `kill -9` loses at most, against a write of the whole window store each time.
pub const DEFAULT_STATE_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(60);

/// The shortest interval accepted: each snapshot writes every target's windows.
pub const MIN_STATE_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(1);

/// Where and how often the state is saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    pub dir: PathBuf,
    pub snapshot_interval: Duration,
}

pub(super) fn state_section(
    d: &mut Diagnostics,
    dir: Option<&S<String>>,
    interval: Option<&S<String>>,
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
    let Some(dir) = dir else {
        if let Some(s) = interval {
            d.warn(
                s.pos,
                "state_snapshot_interval has no effect without state_dir, the directory the snapshot is written to",
            );
        }
        return None;
    };
    let path = dir.value.trim();
    if path.is_empty() {
        d.error(dir.pos, "state_dir is empty; give a directory the daemon may write (e.g. /var/lib/goodput), or remove the key to keep state in memory only");
        return None;
    }
    Some(StateConfig { dir: PathBuf::from(path), snapshot_interval })
}
