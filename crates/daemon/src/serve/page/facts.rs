//! What the page needs from the config ([`PageFacts`]): SLO thresholds, KV bands, the
//! configured windows, the refresh pace and each SLO's budget period.

use std::time::Duration;

use crate::budget::DEFAULT_PERIOD;
use crate::config::Config;
use crate::duration::Window;
use crate::evaluate::KvThresholds;
use crate::slo::Slo;

/// What the page needs from the config, which the report does not carry.
#[derive(Debug, Clone)]
pub struct PageFacts {
    /// Every configured SLO, for the thresholds drawn against the latency charts.
    pub slos: Vec<Slo>,
    pub kv: KvThresholds,
    /// The configured windows: the SLO table shows these, not the longer ones the alert
    /// rules add to the report. Empty shows every window of the report.
    pub windows: Vec<Window>,
    /// How often a new report is published: the page reloads at this pace.
    pub refresh: Duration,
    /// Each SLO's error-budget period (`slos[].period`), named while the budget book has
    /// nothing for it yet; the others get [`DEFAULT_PERIOD`].
    pub periods: Vec<(String, Duration)>,
}

impl Default for PageFacts {
    fn default() -> Self {
        PageFacts {
            slos: Vec::new(),
            kv: KvThresholds::default(),
            windows: Vec::new(),
            refresh: Duration::from_secs(5),
            periods: Vec::new(),
        }
    }
}

impl PageFacts {
    pub fn from_config(config: &Config) -> PageFacts {
        PageFacts {
            slos: config.slos.clone(),
            kv: config.kv_cache,
            windows: config.windows.clone(),
            refresh: config.evaluation_interval,
            periods: config.budget_specs().into_iter().map(|b| (b.slo.name, b.period)).collect(),
        }
    }

    /// The period of SLO `slo`'s error budget.
    pub fn period(&self, slo: &str) -> Duration {
        self.periods.iter().find(|(name, _)| name == slo).map_or(DEFAULT_PERIOD, |(_, p)| *p)
    }

    /// Seconds between reloads: the evaluation interval, not under 2 s so that a fast
    /// evaluation does not turn an open tab into a load generator.
    pub fn refresh_seconds(&self) -> u64 {
        self.refresh.as_secs_f64().ceil().max(2.0) as u64
    }
}
