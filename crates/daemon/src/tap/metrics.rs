//! The taps' health families on /metrics (docs/metrics.md): requests passed through
//! unmeasured, by reason, measurement faults, and each tap's client connections in the
//! style of the HTTP server's. The request-derived SLO families come from the records the
//! taps push, not from here.
//!
//! Counters are live atomics read when /metrics is rendered; every tap has every series
//! from the start, at 0, so that `rate()` and `increase()` see the first one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use goodput_core::export::{Collector, Emit, Family, Unit};
use goodput_core::request::Unmeasured;

use crate::listen::server::{Closed, ConnStats};

pub const UNMEASURED: &str = "llm_slo_tap_requests_unmeasured_total";
pub const FAULTS: &str = "llm_slo_tap_measurement_faults_total";
pub const RETRIES: &str = "llm_slo_tap_upstream_retries_total";
pub const CONNECTIONS: &str = "llm_slo_tap_connections";
pub const CONNECTIONS_LIMIT: &str = "llm_slo_tap_connections_limit";
pub const CONNECTIONS_CLOSED: &str = "llm_slo_tap_connections_closed_total";

goodput_core::label_set! {
    pub Target = [target];
    pub TargetUnmeasured = [target, reason: Unmeasured];
    pub TargetClosed = [target, reason: Closed];
}

/// Every family this module emits, in output order.
pub const FAMILIES: &[Family] = &[
    Family::counter::<TargetUnmeasured>(
        UNMEASURED,
        Unit::Count,
        "Requests the tap forwarded without a record, by reason: route (not a generation route), content_encoding (compressed 2xx body), content_type (2xx body neither SSE nor JSON), upgrade (WebSocket), measurement_fault.",
    ),
    Family::counter::<Target>(
        FAULTS,
        Unit::Count,
        "Things the tap's measurement could not read (an event that is not JSON, an event over the size limit, a panic); the requests were still served.",
    ),
    Family::counter::<Target>(
        RETRIES,
        Unit::Count,
        "Requests the tap sent to the upstream a second time, on a fresh connection, because the reused connection they went out on failed before any answer.",
    ),
    Family::gauge::<Target>(CONNECTIONS, Unit::Count, "Client connections open to the tap now."),
    Family::gauge::<Target>(
        CONNECTIONS_LIMIT,
        Unit::Count,
        "The tap's connection cap in force: targets[].tap.max_connections, lowered to fit the descriptor limit.",
    ),
    Family::counter::<TargetClosed>(
        CONNECTIONS_CLOSED,
        Unit::Count,
        "Client connections the tap closed, by reason: header_timeout, idle_timeout, body_timeout (a request body stalled or trickled), evicted (to make room at the cap) or refused (at the cap, all busy).",
    ),
];

/// One tap's live counters.
#[derive(Debug, Default)]
pub struct TapStats {
    unmeasured: [AtomicU64; Unmeasured::ALL.len()],
    faults: AtomicU64,
    retries: AtomicU64,
    /// The tap's client connections.
    pub conns: Arc<ConnStats>,
}

impl TapStats {
    pub fn unmeasured(&self, reason: Unmeasured) {
        let i = Unmeasured::ALL.iter().position(|r| *r == reason).unwrap_or(0);
        self.unmeasured[i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn faults(&self, n: u64) {
        if n > 0 {
            self.faults.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub fn unmeasured_count(&self, reason: Unmeasured) -> u64 {
        let i = Unmeasured::ALL.iter().position(|r| *r == reason).unwrap_or(0);
        self.unmeasured[i].load(Ordering::Relaxed)
    }

    pub fn fault_count(&self) -> u64 {
        self.faults.load(Ordering::Relaxed)
    }

    pub fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub fn retry_count(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
}

/// The counters of every running tap, by target name, for /metrics.
#[derive(Debug, Clone, Default)]
pub struct TapMetrics(pub Vec<(String, Arc<TapStats>)>);

/// One sample: family, labels, value; the same type the report's families use.
pub use crate::export::ExportSample as TapSample;

impl TapMetrics {
    /// The samples of every tap, each family's together.
    pub fn samples(&self) -> Vec<TapSample> {
        let mut out = Vec::new();
        for (target, s) in &self.0 {
            for r in Unmeasured::ALL {
                out.push(TapSample {
                    name: UNMEASURED,
                    labels: vec![("target", target.clone()), ("reason", r.as_str().to_string())],
                    value: s.unmeasured_count(r) as f64,
                });
            }
        }
        for (target, s) in &self.0 {
            out.push(TapSample {
                name: FAULTS,
                labels: vec![("target", target.clone())],
                value: s.fault_count() as f64,
            });
        }
        for (target, s) in &self.0 {
            out.push(TapSample {
                name: RETRIES,
                labels: vec![("target", target.clone())],
                value: s.retry_count() as f64,
            });
        }
        for (name, value) in
            [(CONNECTIONS, ConnStats::open as fn(&ConnStats) -> u64), (CONNECTIONS_LIMIT, ConnStats::limit)]
        {
            for (target, s) in &self.0 {
                out.push(TapSample { name, labels: vec![("target", target.clone())], value: value(&s.conns) as f64 });
            }
        }
        for (target, s) in &self.0 {
            for why in Closed::ALL {
                out.push(TapSample {
                    name: CONNECTIONS_CLOSED,
                    labels: vec![("target", target.clone()), ("reason", why.as_str().to_string())],
                    value: s.conns.closed(why) as f64,
                });
            }
        }
        out
    }
}

/// Every running tap's counters, read at each GET of /metrics.
impl Collector for TapMetrics {
    fn families(&self) -> &'static [Family] {
        FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        for s in self.samples() {
            s.emit(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tap_has_every_series_from_zero() {
        let s = Arc::new(TapStats::default());
        s.unmeasured(Unmeasured::ContentEncoding);
        s.faults(2);
        let got = TapMetrics(vec![("llama".into(), s)]).samples();
        let sample = |name, reason: Option<&str>, value| {
            let mut labels = vec![("target", "llama".to_string())];
            labels.extend(reason.map(|r| ("reason", r.to_string())));
            TapSample { name, labels, value }
        };
        let mut want: Vec<TapSample> = Unmeasured::ALL
            .iter()
            .map(|r| sample(UNMEASURED, Some(r.as_str()), if *r == Unmeasured::ContentEncoding { 1.0 } else { 0.0 }))
            .collect();
        want.push(sample(FAULTS, None, 2.0));
        want.push(sample(RETRIES, None, 0.0));
        want.push(sample(CONNECTIONS, None, 0.0));
        want.push(sample(CONNECTIONS_LIMIT, None, 0.0));
        want.extend(Closed::ALL.iter().map(|c| sample(CONNECTIONS_CLOSED, Some(c.as_str()), 0.0)));
        assert_eq!(got, want);
        assert!(TapMetrics::default().samples().is_empty());
    }
}
