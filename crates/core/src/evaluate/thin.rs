//! Windows evaluated only for the alert rules (docs/footprint.md#alert-only-windows).
//!
//! The burn-rate rules read 30m and 6h windows that nobody configured: the daemon adds
//! them to the windows it evaluates (`Config::eval_windows`). Such a window needs only what
//! a rule reads of a window (coverage, the SLOs' attainment and burn, the finished-request
//! and output-token rates, preemptions, the queue at the window's start, and the p99s a
//! latency rule compares), so it keeps the series those need ([`Thin`]) and its report
//! carries only them; the rest of its report is empty and nothing else is exported for it.
//!
//! The store keeps full scrapes only as long as the longest configured window, and beyond
//! it only the series some alert-only window keeps ([`Thinning`]).

use super::config::EvalConfig;
use super::slo::histogram_of;
use crate::canonical::{CounterKind, GaugeKind, HistogramKind};
use crate::duration::Window;
use crate::window::{Buckets, Kept, Quantity};

/// The latency histograms whose quantiles a latency rule compares with an SLO threshold.
pub const ALERT_LATENCY_HISTOGRAMS: &[HistogramKind] = &[HistogramKind::Ttft, HistogramKind::Tpot];

/// The series an alert-only window keeps: of the histograms its SLO clauses read, the
/// buckets their brackets read (every bucket of those its latency rules read), the
/// counters and the gauges the SLO evaluation reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Thin {
    kept: Kept,
}

impl Thin {
    /// What `window` keeps under `cfg` (one target's config), `None` when it keeps
    /// everything (a configured window).
    pub fn of(cfg: &EvalConfig, window: Window) -> Option<Thin> {
        let a = cfg.alert_window(window)?;
        let mut histograms: Vec<(HistogramKind, Buckets)> = Vec::new();
        let mut add = |kind: HistogramKind, buckets: Buckets| match histograms.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, b)) => *b = b.union(&buckets),
            None => histograms.push((kind, buckets)),
        };
        for (clause, threshold) in cfg.slos.iter().flat_map(|s| s.clauses()) {
            // The threshold as `evaluate::slo::counts` passes it to the bracket.
            add(histogram_of(clause), Buckets::Brackets(vec![threshold.as_secs_f64()]));
        }
        if !a.quantiles.is_empty() {
            for &kind in ALERT_LATENCY_HISTOGRAMS {
                add(kind, Buckets::Every);
            }
        }
        histograms.sort_unstable_by_key(|(k, _)| *k);
        Some(Thin {
            kept: Kept {
                histograms,
                counters: vec![CounterKind::RequestsFinished, CounterKind::GenerationTokens, CounterKind::Preemptions],
                // Running and waiting: the queue rule reads waiting, and the SLO evaluation
                // restates TTFT with the requests in flight at the window's start.
                gauges: vec![GaugeKind::Running, GaugeKind::Waiting],
                // The SLO brackets and the quantiles read buckets only (the `+Inf` bucket is
                // the total), and no rule reads a mean: a `_sum`, a float that packs into
                // several bytes a scrape where a bucket takes one, would be kept for nobody.
                spec_accepted: false,
            },
        })
    }

    /// The series the window keeps.
    pub fn kept(&self) -> &Kept {
        &self.kept
    }

    /// Whether the window keeps series of `q` (for a bucket: some buckets of its
    /// histogram, [`Kept::mask`] says which).
    pub fn keeps(&self, q: Quantity) -> bool {
        self.kept.keeps(q)
    }

    pub fn keeps_gauge(&self, k: GaugeKind) -> bool {
        self.kept.gauges.contains(&k)
    }
}

/// How a target's store thins (`TargetWindows::thin_before`): full scrapes for the longest
/// configured window, beyond it only the series some alert-only window keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct Thinning {
    /// The longest window that is not alert-only (0 when every window is).
    pub full_ms: i64,
    /// The union of [`Thin::keeps`] over the alert-only windows.
    pub kept: Kept,
}

impl Thinning {
    /// What `cfg` (one target's config) lets its store drop; `None` when no alert-only
    /// window reaches past every configured one.
    pub fn of(cfg: &EvalConfig) -> Option<Thinning> {
        let configured = cfg.windows.iter().filter(|w| cfg.alert_window(**w).is_none());
        let full_ms = configured.map(|w| w.millis()).max().unwrap_or(0);
        // The alert-only windows no longer than that never reach a thin point.
        let thins: Vec<Thin> =
            cfg.windows.iter().filter(|w| w.millis() > full_ms).filter_map(|&w| Thin::of(cfg, w)).collect();
        if thins.is_empty() {
            return None;
        }
        let any = |q: Quantity| thins.iter().any(|t| t.keeps(q));
        let histograms = HistogramKind::ALL
            .iter()
            .filter_map(|&k| {
                let mut kept = thins.iter().filter_map(|t| t.kept.buckets(k));
                let first = kept.next()?.clone();
                Some((k, kept.fold(first, |all, b| all.union(b))))
            })
            .collect();
        Some(Thinning {
            full_ms,
            kept: Kept {
                histograms,
                counters: CounterKind::ALL.iter().copied().filter(|&k| any(Quantity::Counter(k, None))).collect(),
                gauges: GaugeKind::ALL.iter().copied().filter(|&k| any(Quantity::Gauge(k))).collect(),
                spec_accepted: any(Quantity::SpecAccepted(0)),
            },
        })
    }
}
