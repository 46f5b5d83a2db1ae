//! [`VirtualDaemon`]: the daemon's state without I/O, fed scrape outcomes with their
//! timestamps; the [`Frame`] it answers at each evaluation instant, and those instants.

use std::sync::Arc;

use crate::adapt::EngineHint;
use crate::alert::config::AlertingConfig;
use crate::canonical::Snapshot;
use crate::enrich::Enricher;
use crate::evaluate::incremental::Incremental;
use crate::evaluate::{EvalConfig, RateMode};
use crate::export::{ExportSample, samples};
use crate::report::{Health, Report, TargetReport};
use crate::request::{
    DEFAULT_MAX_RECORDS_PER_SERIES, DEFAULT_MAX_SERIES_PER_TARGET, RequestRecord, RequestStore, StoreConfig, attach,
};
use crate::target::ScrapeFailure;
use crate::target::TargetState;

/// A configured target as replay needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayTarget {
    pub name: String,
    pub hint: EngineHint,
    /// Model name for engines whose metrics carry none (TGI).
    pub default_model: String,
}

/// One named target of the replay; its state is the daemon's own type, and its windows
/// are evaluated incrementally as the daemon's are.
struct Named {
    name: String,
    state: TargetState,
    evaluation: Incremental,
}

/// Every target's window store and health, driven by injected scrape outcomes.
pub struct VirtualDaemon {
    targets: Vec<Named>,
    cfg: EvalConfig,
    mode: RateMode,
    enricher: Enricher,
    /// The request path, when request records are replayed beside the scrapes.
    requests: Option<RequestStore>,
    pending: Vec<RequestRecord>,
}

impl VirtualDaemon {
    pub fn new(names: impl IntoIterator<Item = String>, cfg: EvalConfig) -> Self {
        let longest = cfg.windows.iter().map(|w| w.duration()).max().unwrap_or_default();
        let targets = names
            .into_iter()
            .map(|name| Named {
                state: TargetState::new(longest),
                evaluation: Incremental::new(&cfg.for_target(&name)),
                name,
            })
            .collect();
        let enricher = Enricher::new(&cfg, &AlertingConfig::default(), None, None);
        VirtualDaemon { targets, cfg, mode: RateMode::Prometheus, enricher, requests: None, pending: Vec::new() }
    }

    /// Evaluates alert rules as the live daemon would with this `alerting:` section
    /// (the default has every rule on with its default thresholds).
    pub fn with_alerting(mut self, alerting: &AlertingConfig) -> Self {
        self.enricher = Enricher::new(&self.cfg, alerting, None, None);
        self
    }

    /// Keeps a request store, as the daemon does for its tap and OTLP receiver: records
    /// given to [`VirtualDaemon::push_records`] join each report from then on, exact
    /// beside the histogram-derived values.
    pub fn with_requests(mut self) -> Self {
        let mut windows = self.cfg.windows.clone();
        windows.extend(self.cfg.alert_only.iter().map(|a| a.window));
        windows.sort();
        windows.dedup();
        self.requests = Some(RequestStore::new(StoreConfig {
            targets: self.targets.iter().map(|t| t.name.clone()).collect(),
            alert_only: self.cfg.alert_only.iter().map(|a| (a.window, a.quantiles.clone())).collect(),
            windows,
            quantiles: self.cfg.quantiles.clone(),
            slos: self.cfg.slos.clone(),
            max_records_per_series: DEFAULT_MAX_RECORDS_PER_SERIES,
            max_series_per_target: DEFAULT_MAX_SERIES_PER_TARGET,
        }));
        self
    }

    /// Records that ended by the next report's instant (ignored without
    /// [`VirtualDaemon::with_requests`]).
    pub fn push_records(&mut self, records: impl IntoIterator<Item = RequestRecord>) {
        if self.requests.is_some() {
            self.pending.extend(records);
        }
    }

    /// Switches the rate flavour (the oracle test's negative control only).
    #[doc(hidden)]
    pub fn with_rate_mode(mut self, mode: RateMode) -> Self {
        self.mode = mode;
        self
    }

    /// Index of a target by name.
    pub fn target_index(&self, name: &str) -> Option<usize> {
        self.targets.iter().position(|t| t.name == name)
    }

    /// Records one scrape of target `idx` taken at `t_ms`. Unknown indices are ignored.
    pub fn observe(&mut self, idx: usize, t_ms: i64, outcome: Result<Arc<Snapshot>, ScrapeFailure>) {
        if let Some(t) = self.targets.get_mut(idx) {
            t.state.observe(t_ms, None, outcome);
        }
    }

    /// Sets the duration of the last scrape (live scraping knows it; replay does not).
    pub fn set_scrape_duration(&mut self, idx: usize, seconds: f64) {
        if let Some(t) = self.targets.get_mut(idx) {
            t.state.health.last_scrape_duration_seconds = Some(seconds);
        }
    }

    /// The evaluation of every target at `now_ms`, alert rules included (they keep
    /// state, so instants must come in order).
    pub fn report(&mut self, now_ms: i64) -> Report {
        let (cfg, mode) = (&self.cfg, self.mode);
        let targets = self
            .targets
            .iter_mut()
            .map(|t| {
                t.evaluation.advance(&mut t.state.windows, now_ms);
                TargetReport {
                    target: t.name.clone(),
                    engine: t.state.engine(),
                    // Virtual time waits for every evaluation: none is ever late.
                    health: Health { last_evaluation_ms: Some(now_ms), ..t.state.health.clone() },
                    models: t.evaluation.reports(now_ms, &cfg.for_target(&t.name), mode).into(),
                }
            })
            .collect();
        let mut report = Report {
            t_ms: now_ms,
            targets,
            alerts: Vec::new(),
            gpus: Vec::new(),
            limits: self.cfg.limits(),
            ..Report::default()
        };
        if let Some(store) = &mut self.requests {
            // As the daemon: a record keeps its model when the target's scrapes name it.
            for t in &report.targets {
                store.set_models(&t.target, "", t.models.iter().map(|m| m.model.clone()));
            }
            store.ingest(std::mem::take(&mut self.pending), now_ms);
            attach(&mut report, store.evaluate(now_ms), store.counters());
        }
        // Replay has no GPUs and sends no alerts; it shows their state.
        let _ = self.enricher.apply(&mut report, Vec::new());
        report
    }
}

/// One evaluation instant of a replay.
#[derive(Debug, Clone)]
pub struct Frame {
    pub t_ms: i64,
    pub report: Report,
    pub samples: Vec<ExportSample>,
}

impl Frame {
    pub fn new(report: Report) -> Frame {
        let samples = samples(&report);
        Frame { t_ms: report.t_ms, report, samples }
    }

    /// `{"t": <unix s>, "samples": [{"name", "labels": {...}, "value"}]}` (docs/replay.md#output).
    pub fn json_line(&self) -> String {
        let samples: Vec<serde_json::Value> = self
            .samples
            .iter()
            .map(|s| {
                let labels: serde_json::Map<String, serde_json::Value> =
                    s.labels.iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone()))).collect();
                serde_json::json!({"name": s.name, "labels": labels, "value": s.value})
            })
            .collect();
        // Whole seconds print as integers; a sub-second step keeps its fraction.
        let t = if self.t_ms % 1000 == 0 {
            serde_json::json!(self.t_ms / 1000)
        } else {
            serde_json::json!(self.t_ms as f64 / 1000.0)
        };
        serde_json::json!({"t": t, "samples": samples}).to_string()
    }
}

/// Evaluation instants: multiples of `step_ms` on the Unix epoch in [first, last].
pub fn instants(first_ms: i64, last_ms: i64, step_ms: i64) -> impl Iterator<Item = i64> {
    let step = step_ms.max(1);
    let start = first_ms.div_euclid(step) * step + if first_ms.rem_euclid(step) == 0 { 0 } else { step };
    (0..).map(move |k| start + k * step).take_while(move |&t| t <= last_ms)
}
