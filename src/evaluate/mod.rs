//! Evaluation of one target's windows at one instant: PromQL-exact quantiles and rates,
//! KV-cache statistics.
//!
//! INTERFACE STUB: the signatures below are the contract; the implementation lands from
//! the `window` work.

use crate::duration::Window;
use crate::report::ModelReport;
use crate::window::TargetWindows;

/// KV-cache band thresholds (DESIGN.md §4 `kv_cache`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvThresholds {
    pub underloaded: f64,
    pub target_low: f64,
    pub target_high: f64,
    pub critical: f64,
}

impl Default for KvThresholds {
    fn default() -> Self {
        KvThresholds { underloaded: 0.70, target_low: 0.75, target_high: 0.85, critical: 0.90 }
    }
}

/// What to evaluate at each tick.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalConfig {
    pub windows: Vec<Window>,
    pub quantiles: Vec<f64>,
    pub kv: KvThresholds,
}

/// Evaluates every model of one target at `now_ms` over each configured window.
pub fn evaluate_target(store: &TargetWindows, now_ms: i64, cfg: &EvalConfig) -> Vec<ModelReport> {
    let _ = (store, now_ms, cfg);
    Vec::new()
}
