//! From a report to the capacity book: one interval per target and model from its
//! shortest window (docs/capacity.md#history). Apart from the book itself, because the
//! report carries the book's results: the book must not read the report's types.

use super::history::{History, Identity, Interval, Judged};
use super::saturation::{self, TREND_INTERVALS};
use super::{
    CapacityBook, CapacityReport, MAX_MODELS_PER_TARGET, MAX_PENDING, Pending, REFRESH, SPACING, assess, refresh,
};
use crate::canonical::{FinishReason, HistogramKind};
use crate::report::{Report, SloStatus, WindowReport};
use crate::request::{ARRIVAL_SLOT_MS, ArrivalCell, Basis, DataSource};
use crate::slo::{Bounded, Clause, Slo};

impl CapacityBook {
    /// Takes what `report` says of every target that is up (an interval per [`SPACING`]),
    /// and returns every target and model's capacity.
    pub fn feed(&mut self, report: &Report) -> Vec<CapacityReport> {
        let spacing = SPACING.as_millis() as i64;
        for t in report.targets.iter().filter(|t| t.health.up) {
            let identity = Identity {
                process_start: t.health.process_start_s,
                kv_capacity_tokens: t.models.iter().flat_map(|m| &m.windows).find_map(|w| w.kv_capacity_tokens),
            };
            // The target's series are adjacent in the map: counting them by a scan of every
            // series would be quadratic in the fleet.
            let known = self
                .series
                .range((t.target.clone(), String::new())..)
                .take_while(|((target, _), _)| *target == t.target)
                .count();
            for m in t.models.iter() {
                let Some(w) = m.primary_window() else { continue };
                let key = (t.target.clone(), m.model.clone());
                if !self.series.contains_key(&key) && known >= MAX_MODELS_PER_TARGET {
                    continue;
                }
                let series = self.series.entry(key).or_default();
                let last_ms = series.history.last().map(|i| i.t_ms);
                if last_ms.is_some_and(|l| report.t_ms - l < spacing) {
                    continue;
                }
                let slos: Vec<&Slo> = self.slos.iter().filter(|s| s.applies_to(&t.target, &m.model)).collect();
                if series.slos.len() != slos.len() || series.slos.iter().zip(&slos).any(|(a, b)| *a != b.name) {
                    series.history = History::new(slos.iter().map(|s| s.objective.get()).collect(), self.cfg.fit);
                    series.pending.clear();
                    series.slos = slos.iter().map(|s| s.name.clone()).collect();
                    series.generation += 1;
                }
                let window_ms = w.window.millis() as f64;
                let new_share = last_ms.map_or(1.0, |l| ((report.t_ms - l) as f64 / window_ms).min(1.0));
                let Some(mut iv) = interval(report.t_ms, w, &slos, new_share) else { continue };
                // With the window's requests one by one, each is counted once (those finished
                // since the previous interval), at the interval whose window is centred on
                // its arrival, not the one it finished in: on a rising load a request that
                // queued at the knee finishes in a later, busier window. That interval may
                // not exist yet: the request waits for it (docs/capacity.md#history).
                let cells: Vec<Option<&[ArrivalCell]>> = slos.iter().map(|s| by_arrival(w, s)).collect();
                for (j, c) in iv.slos.iter_mut().zip(&cells) {
                    if c.is_some() {
                        *j = Judged { exact: true, ..Judged::default() };
                    }
                }
                let resets = series.history.resets;
                series.history.push(identity, iv);
                if series.history.resets != resets {
                    series.generation += 1;
                }
                for (k, c) in cells.iter().enumerate() {
                    let new = c.iter().flat_map(|c| c.iter()).filter(|c| last_ms.is_none_or(|l| c.finished_ms >= l));
                    series.pending.extend(new.map(|cell| Pending {
                        t_ms: cell.arrived_ms + ARRIVAL_SLOT_MS / 2 + w.window.millis() / 2,
                        slo: k,
                        judged: Judged {
                            total: cell.population as f32,
                            good_lower: cell.good_lower as f32,
                            good_upper: cell.good_upper as f32,
                            exact: true,
                        },
                    }));
                }
                let history = &mut series.history;
                series.pending.retain(|p| !history.attribute(p.t_ms, p.slo, p.judged));
                let excess = series.pending.len().saturating_sub(MAX_PENDING);
                series.pending.drain(..excess);
                let reasons = saturation::reasons(&series.history.recent(TREND_INTERVALS), self.cfg.kv_critical);
                series.saturation.update(reasons);
                series.latest = Some(assess(&t.target, &m.model, series, &slos));
                // While arrivals rise, every interval: the headroom alert reads the estimate
                // then. Decided by the history alone, which a snapshot keeps, so that a
                // restored book refreshes when the one that never stopped does.
                let period = REFRESH.as_millis() as i64;
                let due = series.estimated != Some(series.generation)
                    || series.latest.as_ref().is_some_and(|r| r.rising)
                    || last_ms.is_none_or(|l| l.div_euclid(period) != report.t_ms.div_euclid(period));
                if due && !series.stale {
                    series.stale = true;
                    self.queue.push_back((t.target.clone(), m.model.clone()));
                }
            }
        }
        self.refresh_some(report.t_ms);
        let up: std::collections::HashSet<&str> = report.targets.iter().map(|t| t.target.as_str()).collect();
        self.series
            .iter()
            .filter(|((target, _), _)| up.contains(&target.as_str()))
            .filter_map(|(_, s)| s.latest.clone())
            .collect()
    }
}

impl CapacityBook {
    /// Refreshes the estimates of the series queued longest: as many per tick as spreads
    /// one interval's worth of refreshes (every series, once per [`SPACING`]) evenly over
    /// the ticks in between, so that no tick carries every series' bootstrap, and every
    /// series whose arrivals rise gets its refresh at each interval. A series is queued at
    /// most once, so the queue never holds more than the book's series.
    fn refresh_some(&mut self, t_ms: i64) {
        let spacing = SPACING.as_millis() as i64;
        let gap = self.last_t_ms.map(|l| t_ms - l).filter(|g| *g > 0 && *g < spacing);
        self.last_t_ms = Some(t_ms);
        let budget = gap.map_or(self.queue.len(), |g| {
            ((self.series.len() as u64 * g as u64).div_ceil(spacing as u64) as usize).max(1)
        });
        for _ in 0..budget {
            let Some(key) = self.queue.pop_front() else { break };
            if let Some(s) = self.series.get_mut(&key).filter(|s| s.stale) {
                refresh(s, &self.cfg);
                self.estimates_made += 1;
            }
        }
    }
}

/// Share of finished requests aborted above which a window's mean output length no longer
/// describes the workload: a few percent of users give up in any mix, a tenth is overload.
const ABORTED_SHARE: f64 = 0.10;

/// The interval a window shows at `t_ms`; `None` without a request rate. Counts are scaled
/// by `new_share`, the part of the window not yet counted by the previous interval.
fn interval(t_ms: i64, w: &WindowReport, slos: &[&Slo], new_share: f64) -> Option<Interval> {
    let finished = w.requests_per_second.or_else(|| crate::request::preferred(w).map(|r| r.requests_per_second))?;
    let in_flight = |g: fn(&crate::report::GaugeStats) -> f64| Some(g(w.running.as_ref()?) + g(w.waiting.as_ref()?));
    let grew = match (in_flight(|g| g.first), in_flight(|g| g.last)) {
        (Some(a), Some(b)) => (b - a) / w.window.duration().as_secs_f64(),
        _ => 0.0,
    };
    let p99 = w
        .latency
        .iter()
        .find(|q| q.metric == HistogramKind::Ttft && q.quantile == crate::alert::LATENCY_ALERT_QUANTILE)
        .map_or(f64::NAN, |q| q.value);
    let judged = slos.iter().map(|s| judged(w, s, new_share)).collect();
    // Aborted requests' output was cut short by their outcome (under overload, a client
    // timeout in the queue), not chosen by the workload: where they are many, the mean
    // output length says how loaded the engine was rather than what was asked, so it is
    // left unknown and the workload test compares prompts only (docs/capacity.md#history).
    let aborted: f64 = w.finish_reasons.iter().filter(|r| r.reason == FinishReason::Abort).map(|r| r.per_second).sum();
    let output_asked = aborted <= ABORTED_SHARE * finished;
    let f = |x: Option<f64>| x.map_or(f32::NAN, |v| v as f32);
    Some(Interval {
        t_ms,
        arrival_rate: (finished + grew).max(0.0) as f32,
        finished_rate: finished as f32,
        held_rate: f32::NAN,
        waiting: f(w.waiting.map(|g| g.last)),
        running: f(w.running.map(|g| g.last)),
        kv_usage: f(w.kv_cache.as_ref().map(|k| k.max)),
        preemptions_per_second: f(w.preemptions_per_second),
        ttft_p99: p99 as f32,
        mean_prompt_tokens: f(w.mean_prompt_tokens),
        mean_output_tokens: if output_asked { f(w.mean_output_tokens) } else { f32::NAN },
        slos: judged,
    })
}

/// The window's requests by arrival, when a request source judged every one of them
/// (evaluated from its records, not from time slots).
fn by_arrival<'a>(w: &'a WindowReport, slo: &Slo) -> Option<&'a [ArrivalCell]> {
    let r = crate::request::preferred(w)?;
    let s = r.slos.iter().find(|s| s.slo == slo.name)?;
    (r.source != DataSource::Metrics && r.basis == Basis::Records && !s.by_arrival.is_empty())
        .then_some(s.by_arrival.as_slice())
}

/// One SLO over the window: exact from requests when a request source evaluated it, else
/// the histogram bracket's two ends.
fn judged(w: &WindowReport, slo: &Slo, share: f64) -> Judged {
    let from = |v: &crate::report::SloValues, exact: bool| {
        let joint = v.attainment.get(&Clause::Joint).copied().unwrap_or(Bounded::exact(f64::NAN));
        let n = v.requests * share;
        if !(n > 0.0 && joint.lower.is_finite() && joint.upper.is_finite()) {
            return Judged::default();
        }
        Judged {
            total: n as f32,
            good_lower: (joint.lower * n) as f32,
            good_upper: (joint.upper * n) as f32,
            exact: exact && joint.is_exact(),
        }
    };
    if let Some((source, v)) = crate::request::preferred_slo(w, &slo.name)
        && source != DataSource::Metrics
    {
        return from(v, true);
    }
    match w.slos.iter().find(|s| s.slo == slo.name).map(|s| &s.status) {
        Some(SloStatus::Evaluated(v)) => from(v, false),
        _ => Judged::default(),
    }
}
