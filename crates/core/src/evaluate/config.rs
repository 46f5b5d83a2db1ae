//! What to evaluate at each tick: the windows, quantiles, KV bands and SLOs, and the
//! windows only the alert rules read.

use crate::duration::Window;
use crate::report::{ConfiguredLimits, KvThresholds};
use crate::slo::Slo;

/// What to evaluate at each tick.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EvalConfig {
    pub windows: Vec<Window>,
    pub quantiles: Vec<f64>,
    pub kv: KvThresholds,
    /// Every configured SLO; [`EvalConfig::for_target`] keeps those of one target.
    pub slos: Vec<Slo>,
    /// Draft step cost / target step cost, for the spec-decode speedup estimate.
    pub spec_draft_cost_ratio: Option<f64>,
    /// The windows of `windows` that only the alert rules read: each is evaluated and
    /// exported only for them ([`super::thin`]).
    pub alert_only: Vec<AlertWindow>,
}

impl EvalConfig {
    /// This config with only the SLOs that select `target`.
    pub fn for_target(&self, target: &str) -> EvalConfig {
        let mut cfg = self.clone();
        cfg.slos.retain(|s| s.scope.applies_to_target(target));
        cfg
    }

    /// `window`'s entry in [`EvalConfig::alert_only`], if the rules alone read it.
    pub fn alert_window(&self, window: Window) -> Option<&AlertWindow> {
        self.alert_only.iter().find(|a| a.window == window)
    }

    /// The limits a report exports beside its values: every SLO, and the KV bands.
    pub fn limits(&self) -> ConfiguredLimits {
        ConfiguredLimits { slos: self.slos.clone(), kv: self.kv }
    }
}

/// A window in [`EvalConfig::windows`] that only the alert rules read.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertWindow {
    pub window: Window,
    /// The latency quantiles the rules read of this window (of TTFT and TPOT): empty unless
    /// a latency rule reads it.
    pub quantiles: Vec<f64>,
}
