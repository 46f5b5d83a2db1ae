//! One target between scrapes: its window store, its scrape health and the engine it was
//! last seen to be. The live daemon and `goodput replay` both keep one [`TargetState`] per
//! target and feed it scrape outcomes, so the health they report cannot drift apart.
//!
//! Pure: the caller passes the scrape's time and outcome in, and gets back the
//! [`Transition`] to log (the core logs nothing itself).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::canonical::{Engine, ScrapeWarning, Snapshot};
use crate::report::Health;
use crate::window::{Layout, TargetWindows};

/// Why a scrape gave no snapshot: `reason` is the `llm_slo_scrape_errors_total{reason}`
/// label, `message` is for humans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrapeFailure {
    pub reason: String,
    pub message: String,
}

impl fmt::Display for ScrapeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)
    }
}

/// One accepted scrape, as the window store takes it.
#[derive(Debug, Clone)]
pub enum Scraped {
    /// Adapted afresh.
    Snapshot(Arc<Snapshot>),
    /// A scrape whose series were the previous one's: its values in the layout already
    /// stored, without a snapshot built and taken apart again (docs/benchmarks.md#ingest-parse--adapt--push).
    Values(Values),
}

/// A scrape already split into a stored layout and its value column. Never has warnings:
/// only a scrape without any is reused.
#[derive(Debug, Clone)]
pub struct Values {
    pub engine: Engine,
    pub layout: Arc<Layout>,
    pub values: Box<[f64]>,
}

impl Scraped {
    pub fn engine(&self) -> Engine {
        match self {
            Scraped::Snapshot(s) => s.engine,
            Scraped::Values(v) => v.engine,
        }
    }

    pub fn warnings(&self) -> &[ScrapeWarning] {
        match self {
            Scraped::Snapshot(s) => &s.warnings,
            Scraped::Values(_) => &[],
        }
    }

    pub fn process_start(&self) -> Option<f64> {
        match self {
            Scraped::Snapshot(s) => s.process_start,
            Scraped::Values(v) => v.layout.process_start,
        }
    }
}

/// What one scrape outcome changed, for the caller's log: a target that stays down for a
/// reason it already failed with in this outage is worth a debug line at most, a change of
/// state or a new reason a warning. Keyed on the reason, not the message: a target whose
/// timeouts alternate between two wordings, or whose failures alternate between two
/// reasons, is logged once per reason and outage, not on every scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The first successful scrape, or the first after failures.
    CameUp,
    /// Up before, and still up.
    StillUp,
    /// Up before (or never scraped), and now failing.
    WentDown,
    /// Down before, and failing now for a reason it has not failed with since it went down.
    ErrorChanged,
    /// Down before, for a reason already seen in this outage (the message may differ).
    StillDown,
}

/// A target's windows, health and engine.
#[derive(Debug)]
pub struct TargetState {
    pub windows: TargetWindows,
    pub health: Health,
    /// Whether any scrape has been recorded: a target that has never been scraped is down,
    /// but its first failure is still a change worth logging.
    seen: bool,
    /// The reasons the target has failed with since it last came up (at most one entry
    /// per `llm_slo_scrape_errors_total` reason).
    down_reasons: Vec<String>,
}

impl TargetState {
    /// An empty state that keeps scrapes for `max_window`, the longest window evaluated.
    pub fn new(max_window: Duration) -> Self {
        TargetState {
            windows: TargetWindows::new(max_window),
            health: Health::default(),
            seen: false,
            down_reasons: Vec::new(),
        }
    }

    /// The engine of the last successful scrape; `None` until there is one.
    pub fn engine(&self) -> Option<Engine> {
        self.windows.engine()
    }

    /// Records one scrape taken at `t_ms`. `took` is the scrape's duration where it is known
    /// (replay does not know it).
    pub fn observe(
        &mut self,
        t_ms: i64,
        took: Option<Duration>,
        outcome: Result<Arc<Snapshot>, ScrapeFailure>,
    ) -> Transition {
        self.observe_scraped(t_ms, took, outcome.map(Scraped::Snapshot))
    }

    /// [`TargetState::observe`] for a scrape that may come as [`Values`].
    pub fn observe_scraped(
        &mut self,
        t_ms: i64,
        took: Option<Duration>,
        outcome: Result<Scraped, ScrapeFailure>,
    ) -> Transition {
        if let Some(d) = took {
            self.health.last_scrape_duration_seconds = Some(d.as_secs_f64());
        }
        let was_up = self.health.up;
        let first = !self.seen;
        self.seen = true;
        match outcome {
            Ok(scraped) => {
                let mut reasons: Vec<_> = scraped.warnings().iter().map(|w| w.reason).collect();
                reasons.sort();
                reasons.dedup();
                for r in reasons {
                    *self.health.warnings_total.entry(r.as_str().to_string()).or_insert(0) += 1;
                }
                self.health.process_start_s = scraped.process_start();
                match scraped {
                    Scraped::Snapshot(snapshot) => self.windows.push(t_ms, snapshot),
                    Scraped::Values(v) => {
                        // What `push` does with a snapshot's engine, for a scrape that has none.
                        let w = &mut self.windows;
                        if w.is_empty() || w.point_at(w.seq_range().end - 1).is_some_and(|(t, _)| t < t_ms) {
                            w.set_engine(Some(v.engine));
                        }
                        self.windows.push_values(t_ms, v.layout, v.values);
                    }
                }
                self.health.up = true;
                self.health.last_successful_scrape_ms = Some(t_ms);
                self.health.last_error = None;
                self.down_reasons.clear();
                if was_up { Transition::StillUp } else { Transition::CameUp }
            }
            Err(failure) => {
                self.health.up = false;
                self.health.last_error = Some(failure.to_string());
                let seen_reason = self.down_reasons.contains(&failure.reason);
                if !seen_reason {
                    self.down_reasons.push(failure.reason.clone());
                }
                *self.health.errors_total.entry(failure.reason).or_insert(0) += 1;
                if was_up || first {
                    Transition::WentDown
                } else if seen_reason {
                    Transition::StillDown
                } else {
                    Transition::ErrorChanged
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Engine;

    fn snapshot() -> Arc<Snapshot> {
        Arc::new(Snapshot {
            engine: Engine::Vllm,
            models: Default::default(),
            process_start: None,
            families: 0,
            samples: 0,
            warnings: Vec::new(),
        })
    }

    fn fail(reason: &str, message: &str) -> Result<Arc<Snapshot>, ScrapeFailure> {
        Err(ScrapeFailure { reason: reason.into(), message: message.into() })
    }

    #[test]
    fn health_follows_outcomes_and_counts_reasons() {
        let mut t = TargetState::new(Duration::from_secs(60));
        assert!(!t.health.up, "down until the first successful scrape");
        assert_eq!(t.observe(1_000, Some(Duration::from_millis(20)), fail("timeout", "slow")), Transition::WentDown);
        assert_eq!(t.observe(2_000, Some(Duration::from_millis(30)), fail("timeout", "slow")), Transition::StillDown);
        assert_eq!(
            t.observe(3_000, Some(Duration::from_millis(5)), fail("connect", "refused")),
            Transition::ErrorChanged
        );
        assert!(!t.health.up);
        assert_eq!(t.health.errors_total.get("timeout"), Some(&2));
        assert_eq!(t.health.errors_total.get("connect"), Some(&1));
        assert_eq!(t.health.last_error.as_deref(), Some("refused (connect)"));
        assert_eq!(t.health.last_scrape_duration_seconds, Some(0.005));
        assert_eq!(t.engine(), None);
        assert_eq!(t.health.last_successful_scrape_ms, None);

        assert_eq!(t.observe(4_000, None, Ok(snapshot())), Transition::CameUp);
        assert_eq!(t.observe(5_000, None, Ok(snapshot())), Transition::StillUp);
        assert!(t.health.up);
        assert_eq!(t.health.last_error, None);
        assert_eq!(t.engine(), Some(Engine::Vllm));
        assert_eq!(t.windows.len(), 2);
        // Totals since start: a recovery does not reset them; an unknown duration keeps the last.
        assert_eq!(t.health.errors_total.values().sum::<u64>(), 3);
        assert_eq!(t.health.last_scrape_duration_seconds, Some(0.005));

        assert_eq!(t.observe(6_000, None, fail("timeout", "slow")), Transition::WentDown);
        // A failure keeps the time of the last success: how stale the windows are.
        assert_eq!(t.health.last_successful_scrape_ms, Some(5_000));
    }

    #[test]
    fn alternating_messages_and_reasons_are_a_change_once_per_reason_and_outage() {
        let mut t = TargetState::new(Duration::from_secs(60));
        let a = "error sending request: operation timed out";
        let b = "scrape timed out after 1s";
        assert_eq!(t.observe(1_000, None, fail("timeout", a)), Transition::WentDown);
        // The same reason in other words, alternating: not a change, however long it lasts.
        for (i, m) in [b, a, b, a, b].into_iter().enumerate() {
            assert_eq!(t.observe(2_000 + i as i64, None, fail("timeout", m)), Transition::StillDown, "{m}");
        }
        assert_eq!(t.health.last_error.as_deref(), Some("scrape timed out after 1s (timeout)"));
        // Alternating reasons: each is a change the first time in this outage only.
        assert_eq!(t.observe(3_000, None, fail("connect", "refused")), Transition::ErrorChanged);
        for i in 0..4 {
            let (r, m) = if i % 2 == 0 { ("timeout", a) } else { ("connect", "refused") };
            assert_eq!(t.observe(3_100 + i, None, fail(r, m)), Transition::StillDown, "{r}");
        }
        assert_eq!(t.health.errors_total.get("timeout"), Some(&8));
        // A new outage starts afresh.
        assert_eq!(t.observe(4_000, None, Ok(snapshot())), Transition::CameUp);
        assert_eq!(t.observe(5_000, None, fail("connect", "refused")), Transition::WentDown);
        assert_eq!(t.observe(6_000, None, fail("timeout", a)), Transition::ErrorChanged);
    }

    #[test]
    fn warnings_count_scrapes_per_reason() {
        use crate::canonical::{ScrapeWarning, WarningReason};
        let mut t = TargetState::new(Duration::from_secs(60));
        let mut s = (*snapshot()).clone();
        s.warnings = vec![
            ScrapeWarning::new(WarningReason::HistogramWithoutInf, "ttft"),
            ScrapeWarning::new(WarningReason::HistogramWithoutInf, "e2e"),
            ScrapeWarning::new(WarningReason::DuplicateSeries, "dup"),
        ];
        let s = Arc::new(s);
        t.observe(1_000, None, Ok(s.clone()));
        t.observe(2_000, None, Ok(s));
        t.observe(3_000, None, Ok(snapshot()));
        let got: Vec<(&str, u64)> = t.health.warnings_total.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(got, [("duplicate_series", 2), ("histogram_without_inf", 2)]);
    }
}
