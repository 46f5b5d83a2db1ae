//! Error budgets over each SLO's period (docs/metrics.md#error-budget-over-a-period): how
//! much of the budget `1 − objective` the last `period` (28 days by default) has spent and
//! how much is left, as Sloth and Pyrra report it.
//!
//! Windows of an hour cannot hold weeks of scrapes, so the period is kept as counts: per
//! target, model, SLO and source, a [`Ledger`] of at most [`MAX_BUCKETS`] buckets of raw
//! increases (from histograms) or judged requests (from a tap or engine spans), hourly for
//! the default 28 days. A full 28-day period of a three-clause SLO is 672 rows of 14 `f32`s,
//! 37 KiB; the period's edge is known to within one bucket, 1/672 of the period. The caller
//! feeds the book ([`BudgetBook::feed_metrics`] each tick, [`BudgetBook::add_records`] with
//! each batch of request records) and reads it ([`BudgetBook::report`]); nothing here
//! reads a clock.

mod ledger;
pub mod reload;
pub mod saved;
pub mod tally;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::evaluate::range::RangeView;
pub use crate::report::budget::{BudgetReport, Values};
use crate::request::{Compact, DataSource, RequestRecord};
use crate::slo::Slo;
use crate::window::TargetWindows;
pub use ledger::Ledger;
use tally::{PeriodValues, REQUEST_WIDTH};

/// The period when an SLO names none: four whole weeks, so that every period holds each
/// weekday four times and a weekly traffic pattern (quiet weekends) does not move the
/// budget as the period slides. Thirty days would hold four or five of some weekdays.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(28 * 86_400);

/// The shortest and longest period accepted in the config.
pub const MIN_PERIOD: Duration = Duration::from_secs(3_600);
pub const MAX_PERIOD: Duration = Duration::from_secs(366 * 86_400);

/// The shortest bucket: the period's edge is known to within one.
pub const BUCKET: Duration = Duration::from_secs(300);

/// Most buckets per ledger: a period over [`MAX_BUCKETS`] × [`BUCKET`] (56 hours) gets
/// longer buckets, an hour for the default 28 days, so that a ledger holds the same 672
/// rows whatever its period. The edge of the period is known to within one bucket either
/// way: the rows that leave it are the oldest bucket's, and finer buckets only for recent
/// rows would not sharpen it.
pub const MAX_BUCKETS: u64 = 672;

/// How often the histogram ledgers of a target take the increase since they last did: the
/// range read costs the same for a minute as for a tick, and a period of weeks does not
/// need its newest minute.
pub const METRICS_FEED_EVERY: Duration = Duration::from_secs(60);

/// Models per target the book keeps ledgers for, as the request store caps its series.
pub const MAX_MODELS_PER_TARGET: usize = 64;

/// An SLO and the period its budget is counted over.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetSpec {
    pub slo: Slo,
    pub period: Duration,
}

impl BudgetSpec {
    /// [`BUCKET`], or longer for a period over [`MAX_BUCKETS`] of them (rounded up to a
    /// whole minute).
    pub fn bucket_ms(&self) -> i64 {
        let period_ms = self.period.as_millis() as u64;
        let min = BUCKET.as_millis() as u64;
        let stretched = period_ms.div_ceil(MAX_BUCKETS).div_ceil(60_000) * 60_000;
        min.max(stretched) as i64
    }

    /// Buckets in the period: the current one and those before it.
    pub fn buckets(&self) -> usize {
        (self.period.as_millis() as u64).div_ceil(self.bucket_ms() as u64) as usize
    }
}

/// One target, model, SLO (index into the specs) and source.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    target: String,
    model: String,
    slo: usize,
    source: DataSource,
}

impl From<PeriodValues> for Values {
    fn from(v: PeriodValues) -> Values {
        Values { requests: v.requests, attainment: v.attainment, consumed: v.consumed, remaining: v.remaining }
    }
}

/// Where the histogram ledgers of one target have counted up to.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    /// The newest scrape counted (Unix ms): the next increase starts at it.
    scrape_ms: i64,
    /// When the book last read the target's windows.
    fed_ms: i64,
}

/// Every ledger of the daemon.
#[derive(Debug, Clone)]
pub struct BudgetBook {
    specs: Vec<BudgetSpec>,
    targets: Vec<String>,
    ledgers: BTreeMap<Key, Ledger>,
    anchors: BTreeMap<String, Anchor>,
    feed_every_ms: i64,
    /// Rows the ledgers wrote and cleared and totals the reports read (see
    /// [`BudgetBook::work`]).
    work: u64,
}

impl BudgetBook {
    /// A book for `specs` over the configured `targets` (records naming others are ignored).
    pub fn new(specs: Vec<BudgetSpec>, targets: Vec<String>) -> BudgetBook {
        BudgetBook {
            specs,
            targets,
            ledgers: BTreeMap::new(),
            anchors: BTreeMap::new(),
            feed_every_ms: METRICS_FEED_EVERY.as_millis() as i64,
            work: 0,
        }
    }

    /// The ledger for `key`, made on first use; `None` past the models cap of its target.
    fn ledger(&mut self, key: Key, width: usize) -> Option<&mut Ledger> {
        if !self.ledgers.contains_key(&key) {
            let models = self.ledgers.keys().filter(|k| k.target == key.target && k.model != key.model);
            let mut names: Vec<&str> = models.map(|k| k.model.as_str()).collect();
            names.dedup();
            if names.len() >= MAX_MODELS_PER_TARGET {
                return None;
            }
            let spec = &self.specs[key.slo];
            self.ledgers.insert(key.clone(), Ledger::new(width, spec.buckets(), spec.bucket_ms()));
        }
        self.ledgers.get_mut(&key)
    }

    /// Counts each request against every SLO whose scope covers it, in the bucket of its
    /// finish. Requests the SLO cannot judge (an unmeasured clause) are left out, as the
    /// windows leave them out; so are invalid records and unknown targets.
    pub fn add_records<'a>(&mut self, records: impl IntoIterator<Item = &'a RequestRecord>) {
        for r in records {
            if !self.targets.contains(&r.target) {
                continue;
            }
            let Ok(c) = Compact::of(r) else { continue };
            let t_ms = (c.finished * 1000.0).round() as i64;
            for i in 0..self.specs.len() {
                if !self.specs[i].slo.applies_to(&r.target, &r.model) {
                    continue;
                }
                let Some(row) = tally::request_row(&c, &self.specs[i].slo) else { continue };
                let key = Key { target: r.target.clone(), model: r.model.clone(), slo: i, source: r.source.into() };
                self.work += self.ledger(key, REQUEST_WIDTH).map_or(0, |l| l.add(t_ms, &row));
            }
        }
    }

    /// Counts what `target`'s histograms gained since the last call that counted, at most
    /// once per [`METRICS_FEED_EVERY`]: the raw increase from the newest scrape counted
    /// then to the newest scrape now, resets handled as the windows handle them. The first
    /// call only marks where counting starts.
    pub fn feed_metrics(&mut self, target: &str, store: &TargetWindows, now_ms: i64) {
        let anchor = self.anchors.get(target).copied();
        if anchor.is_some_and(|a| now_ms - a.fed_ms < self.feed_every_ms) {
            return;
        }
        // From the anchor scrape itself (the range is left-open), or one feed interval back
        // to find the first anchor.
        let range_ms = anchor.map_or(self.feed_every_ms, |a| now_ms - a.scrape_ms + 1).max(1);
        let view = RangeView::collect(store, now_ms, range_ms);
        let newest = view.models().filter_map(|m| view.span(m)).map(|s| s.last_ms).max();
        let Some(newest) = newest else {
            if let Some(a) = self.anchors.get_mut(target) {
                a.fed_ms = now_ms;
            }
            return;
        };
        self.anchors.insert(target.to_string(), Anchor { scrape_ms: newest, fed_ms: now_ms });
        if anchor.is_none() {
            return;
        }
        for model in view.models() {
            let Some(m) = view.model(model) else { continue };
            for i in 0..self.specs.len() {
                if !self.specs[i].slo.applies_to(target, model) {
                    continue;
                }
                let Some(row) = tally::histogram_row(m, &self.specs[i].slo) else { continue };
                let key =
                    Key { target: target.to_string(), model: model.to_string(), slo: i, source: DataSource::Metrics };
                let width = row.len();
                self.work += self.ledger(key, width).map_or(0, |l| l.add(newest, &row));
            }
        }
    }

    /// Every ledger's budget at `now_ms`, in target, model, SLO and source order.
    pub fn report(&mut self, now_ms: i64) -> Vec<BudgetReport> {
        let specs = &self.specs;
        let work = &mut self.work;
        self.ledgers
            .iter_mut()
            .map(|(k, l)| {
                *work += l.advance(now_ms) + l.totals().len() as u64;
                let spec = &specs[k.slo];
                let objective = spec.slo.objective.get();
                let values = match k.source {
                    DataSource::Metrics => tally::from_histogram_totals(l.totals(), objective),
                    DataSource::Tap | DataSource::Otlp => tally::from_request_totals(l.totals(), objective),
                };
                let period_ms = spec.period.as_millis() as f64;
                let coverage = l.covered_since_ms().map_or(0.0, |f| ((now_ms - f) as f64 / period_ms).clamp(0.0, 1.0));
                BudgetReport {
                    target: k.target.clone(),
                    model: k.model.clone(),
                    slo: spec.slo.name.clone(),
                    source: k.source,
                    objective,
                    period: spec.period,
                    coverage,
                    values: values.map(Values::from),
                }
            })
            .collect()
    }

    /// Bytes the ledgers would hold with their whole periods written.
    pub fn heap_bytes(&self) -> usize {
        self.ledgers.values().map(Ledger::heap_bytes).sum()
    }

    /// Bytes the ledgers hold now: a day of rows at a time as their periods fill.
    pub fn allocated_bytes(&self) -> usize {
        self.ledgers.values().map(Ledger::allocated_bytes).sum()
    }

    /// Rows the ledgers wrote and cleared, and rows the reports read, since the book began
    /// (or was restored): the work of its ticks, counted rather than timed.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// The number of ledgers (target, model, SLO and source).
    pub fn len(&self) -> usize {
        self.ledgers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ledgers.is_empty()
    }
}
