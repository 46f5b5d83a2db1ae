//! The taps' health families on /metrics (docs/metrics.md): requests passed through
//! unmeasured, by reason, and measurement faults. The request-derived SLO families come
//! from the records the taps push, not from here.
//!
//! Counters are live atomics read when /metrics is rendered; every tap has every series
//! from the start, at 0, so that `rate()` and `increase()` see the first one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use goodput_core::request::Unmeasured;

pub const UNMEASURED: &str = "llm_slo_tap_requests_unmeasured_total";
pub const FAULTS: &str = "llm_slo_tap_measurement_faults_total";

/// Every family this module emits, in output order, with HELP and TYPE.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        UNMEASURED,
        "Requests the tap forwarded without a record, by reason: route (not a generation route), content_encoding (compressed 2xx body), content_type (2xx body neither SSE nor JSON), upgrade (WebSocket), measurement_fault.",
        "counter",
    ),
    (
        FAULTS,
        "Things the tap's measurement could not read (an event that is not JSON, an event over the size limit, a panic); the requests were still served.",
        "counter",
    ),
];

/// HELP and TYPE of a family of this module.
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2))
}

/// One tap's live counters.
#[derive(Debug, Default)]
pub struct TapStats {
    unmeasured: [AtomicU64; Unmeasured::ALL.len()],
    faults: AtomicU64,
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
        out
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
        assert_eq!(got, want);
        assert!(TapMetrics::default().samples().is_empty());
    }
}
