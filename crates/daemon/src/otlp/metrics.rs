//! The receiver's health families on /metrics (docs/metrics.md): spans turned into request
//! records per target, spans dropped by reason, export requests by result.
//!
//! Live counters read when /metrics is rendered, like alert delivery's. Every configured
//! target, reason and result has its series from the start, at 0, so that `rate()` sees the
//! first drop.

use std::sync::atomic::{AtomicU64, Ordering};

pub const RECEIVED: &str = "llm_slo_otlp_spans_received_total";
pub const DROPPED: &str = "llm_slo_otlp_spans_dropped_total";
pub const EXPORTS: &str = "llm_slo_otlp_export_requests_total";

/// Every family this module emits, in output order, with HELP and TYPE.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (RECEIVED, "LLM request spans from the target's engine that became request records (otlp.listen).", "counter"),
    (
        DROPPED,
        "Spans that became no request record, by reason: not_llm_request (no gen_ai.latency.* attribute), unknown_service (no target takes its service.name), invalid (a latency or token attribute that is not a usable number), inbox_full (the request inbox was full).",
        "counter",
    ),
    (
        EXPORTS,
        "OTLP/HTTP export requests received, by result: ok (200, possibly with rejected spans), undecodable (400), too_large (413, otlp.body_limit), unsupported_media_type (415).",
        "counter",
    ),
];

/// HELP and TYPE of a family of this module.
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2))
}

/// Why a span became no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    NotLlmRequest,
    UnknownService,
    Invalid,
    InboxFull,
}

impl Dropped {
    pub const ALL: [Dropped; 4] =
        [Dropped::NotLlmRequest, Dropped::UnknownService, Dropped::Invalid, Dropped::InboxFull];

    pub fn as_str(self) -> &'static str {
        match self {
            Dropped::NotLlmRequest => "not_llm_request",
            Dropped::UnknownService => "unknown_service",
            Dropped::Invalid => "invalid",
            Dropped::InboxFull => "inbox_full",
        }
    }
}

/// How an export request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    Ok,
    Undecodable,
    TooLarge,
    UnsupportedMediaType,
}

impl Export {
    pub const ALL: [Export; 4] = [Export::Ok, Export::Undecodable, Export::TooLarge, Export::UnsupportedMediaType];

    pub fn as_str(self) -> &'static str {
        match self {
            Export::Ok => "ok",
            Export::Undecodable => "undecodable",
            Export::TooLarge => "too_large",
            Export::UnsupportedMediaType => "unsupported_media_type",
        }
    }
}

/// The receiver's live counters; targets in config order.
#[derive(Debug)]
pub struct OtlpStats {
    targets: Vec<String>,
    received: Vec<AtomicU64>,
    dropped: [AtomicU64; 4],
    exports: [AtomicU64; 4],
}

impl OtlpStats {
    pub fn new(targets: Vec<String>) -> OtlpStats {
        let received = targets.iter().map(|_| AtomicU64::new(0)).collect();
        OtlpStats { targets, received, dropped: Default::default(), exports: Default::default() }
    }

    /// One more record from the `i`-th target's spans.
    pub fn received(&self, target: usize) {
        if let Some(c) = self.received.get(target) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn dropped(&self, why: Dropped, n: u64) {
        self.dropped[why as usize].fetch_add(n, Ordering::Relaxed);
    }

    pub fn export(&self, result: Export) {
        self.exports[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn received_total(&self, target: usize) -> u64 {
        self.received.get(target).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    pub fn dropped_total(&self, why: Dropped) -> u64 {
        self.dropped[why as usize].load(Ordering::Relaxed)
    }

    pub fn exports_total(&self, result: Export) -> u64 {
        self.exports[result as usize].load(Ordering::Relaxed)
    }

    /// The samples, each family's together.
    pub fn samples(&self) -> Vec<OtlpSample> {
        let mut out = Vec::new();
        for (i, t) in self.targets.iter().enumerate() {
            out.push(OtlpSample { name: RECEIVED, label: ("target", t.clone()), value: self.received_total(i) as f64 });
        }
        for d in Dropped::ALL {
            out.push(OtlpSample {
                name: DROPPED,
                label: ("reason", d.as_str().into()),
                value: self.dropped_total(d) as f64,
            });
        }
        for e in Export::ALL {
            out.push(OtlpSample {
                name: EXPORTS,
                label: ("result", e.as_str().into()),
                value: self.exports_total(e) as f64,
            });
        }
        out
    }
}

/// One sample: family, its one label, value.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSample {
    pub name: &'static str,
    pub label: (&'static str, String),
    pub value: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_exists_from_zero_and_counts() {
        let s = OtlpStats::new(vec!["a".into(), "b".into()]);
        s.received(1);
        s.received(1);
        s.received(7); // not a target: ignored, never a panic
        s.dropped(Dropped::UnknownService, 3);
        s.export(Export::TooLarge);
        let got: Vec<(&str, String, f64)> = s.samples().into_iter().map(|x| (x.name, x.label.1, x.value)).collect();
        let want = |n, l: &str, v| (n, l.to_string(), v);
        assert_eq!(
            got,
            vec![
                want(RECEIVED, "a", 0.0),
                want(RECEIVED, "b", 2.0),
                want(DROPPED, "not_llm_request", 0.0),
                want(DROPPED, "unknown_service", 3.0),
                want(DROPPED, "invalid", 0.0),
                want(DROPPED, "inbox_full", 0.0),
                want(EXPORTS, "ok", 0.0),
                want(EXPORTS, "undecodable", 0.0),
                want(EXPORTS, "too_large", 1.0),
                want(EXPORTS, "unsupported_media_type", 0.0),
            ]
        );
        assert!(FAMILIES.iter().all(|f| family_meta(f.0).is_some()));
    }
}
