//! The config reload families on /metrics (docs/metrics.md#config-reload), as Prometheus
//! names its own: whether the last reload succeeded and when one last did.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use super::exposition::{self, Line};

pub const SUCCESSFUL: &str = "llm_slo_config_last_reload_successful";
pub const SUCCESS_TIMESTAMP: &str = "llm_slo_config_last_reload_success_timestamp_seconds";

/// (name, help, type) of each family.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (SUCCESSFUL, "1 when the last config reload succeeded (or none was tried since start), 0 when it failed.", "gauge"),
    (
        SUCCESS_TIMESTAMP,
        "Unix time of the last successful config reload, or of the start when there has been none.",
        "gauge",
    ),
];

/// The reload outcome, shared by the reloader and the /metrics handler.
#[derive(Debug)]
pub struct ReloadStats {
    successful: AtomicBool,
    success_ms: AtomicI64,
}

impl Default for ReloadStats {
    fn default() -> Self {
        ReloadStats { successful: AtomicBool::new(true), success_ms: AtomicI64::new(0) }
    }
}

impl ReloadStats {
    /// A reload (or the start) that succeeded at `t_ms`.
    pub fn succeeded(&self, t_ms: i64) {
        self.success_ms.store(t_ms, Ordering::Relaxed);
        self.successful.store(true, Ordering::Release);
    }

    pub fn failed(&self) {
        self.successful.store(false, Ordering::Release);
    }

    pub fn successful(&self) -> bool {
        self.successful.load(Ordering::Acquire)
    }

    /// Appends the families to a /metrics body.
    pub fn render(&self, out: &mut String, external: &[(String, String)]) {
        let lines = [
            Line { name: SUCCESSFUL, labels: Vec::new(), value: if self.successful() { 1.0 } else { 0.0 } },
            Line {
                name: SUCCESS_TIMESTAMP,
                labels: Vec::new(),
                value: self.success_ms.load(Ordering::Relaxed) as f64 / 1000.0,
            },
        ];
        exposition::write(out, &lines, external, |name| FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2)));
    }
}
