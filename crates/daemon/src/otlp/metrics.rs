//! The receiver's health families on /metrics (docs/metrics.md): spans turned into request
//! records per target, spans dropped by reason, export requests by result, and its client
//! connections in the style of the HTTP server's.
//!
//! Live counters read when /metrics is rendered, like alert delivery's. Every configured
//! target, reason and result has its series from the start, at 0, so that `rate()` sees the
//! first drop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use goodput_core::export::{Collector, Emit, Family, LabelValue, NoLabels, Unit};

use crate::listen::server::{Closed, ConnStats};

pub const RECEIVED: &str = "llm_slo_otlp_spans_received_total";
pub const DROPPED: &str = "llm_slo_otlp_spans_dropped_total";
pub const EXPORTS: &str = "llm_slo_otlp_export_requests_total";
pub const CONNECTIONS: &str = "llm_slo_otlp_connections";
pub const CONNECTIONS_LIMIT: &str = "llm_slo_otlp_connections_limit";
pub const CONNECTIONS_CLOSED: &str = "llm_slo_otlp_connections_closed_total";

goodput_core::label_set! {
    pub Target = [target];
    pub DroppedReason = [reason: Dropped];
    pub ExportResult = [result: Export];
    pub ClosedReason = [reason: Closed];
}

/// Every family this module emits, in output order.
pub const FAMILIES: &[Family] = &[
    Family::counter::<Target>(
        RECEIVED,
        Unit::Count,
        "LLM request spans from the target's engine that became request records (otlp.listen).",
    ),
    Family::counter::<DroppedReason>(
        DROPPED,
        Unit::Count,
        "Spans that became no request record, by reason: not_llm_request (no gen_ai.latency.* attribute), unknown_service (no target takes its service.name), invalid (a latency or token attribute that is not a usable number), inbox_full (the request inbox was full), future (ends further ahead of the daemon's clock than the skew allowed), over_budget (past the export's decoded-size budget, otlp.body_limit).",
    ),
    Family::counter::<ExportResult>(
        EXPORTS,
        Unit::Count,
        "OTLP/HTTP export requests received, by result: ok (200, possibly with rejected spans), undecodable (400), body_timeout (408, the body stalled or trickled), too_large (413, otlp.body_limit), unsupported_media_type (415), throttled (429, too many exports waiting to be decoded).",
    ),
    Family::gauge::<NoLabels>(CONNECTIONS, Unit::Count, "Client connections open to the OTLP receiver now."),
    Family::gauge::<NoLabels>(
        CONNECTIONS_LIMIT,
        Unit::Count,
        "The OTLP receiver's connection cap in force: otlp.max_connections, lowered to fit the descriptor limit.",
    ),
    Family::counter::<ClosedReason>(
        CONNECTIONS_CLOSED,
        Unit::Count,
        "Client connections the OTLP receiver closed, by reason: header_timeout, idle_timeout, body_timeout (a request body stalled or trickled), evicted (to make room at the cap) or refused (at the cap, all busy).",
    ),
];

/// Why a span became no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    NotLlmRequest,
    UnknownService,
    Invalid,
    InboxFull,
    Future,
    OverBudget,
}

impl Dropped {
    pub const ALL: [Dropped; 6] = [
        Dropped::NotLlmRequest,
        Dropped::UnknownService,
        Dropped::Invalid,
        Dropped::InboxFull,
        Dropped::Future,
        Dropped::OverBudget,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Dropped::NotLlmRequest => "not_llm_request",
            Dropped::UnknownService => "unknown_service",
            Dropped::Invalid => "invalid",
            Dropped::InboxFull => "inbox_full",
            Dropped::Future => "future",
            Dropped::OverBudget => "over_budget",
        }
    }
}

impl LabelValue for Dropped {
    const ALL: &'static [Dropped] = &Dropped::ALL;
    fn as_str(self) -> &'static str {
        Dropped::as_str(self)
    }
}

/// How an export request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    Ok,
    Undecodable,
    BodyTimeout,
    TooLarge,
    UnsupportedMediaType,
    Throttled,
}

impl Export {
    pub const ALL: [Export; 6] = [
        Export::Ok,
        Export::Undecodable,
        Export::BodyTimeout,
        Export::TooLarge,
        Export::UnsupportedMediaType,
        Export::Throttled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Export::Ok => "ok",
            Export::Undecodable => "undecodable",
            Export::BodyTimeout => "body_timeout",
            Export::TooLarge => "too_large",
            Export::UnsupportedMediaType => "unsupported_media_type",
            Export::Throttled => "throttled",
        }
    }
}

impl LabelValue for Export {
    const ALL: &'static [Export] = &Export::ALL;
    fn as_str(self) -> &'static str {
        Export::as_str(self)
    }
}

/// The receiver's live counters; targets in config order.
#[derive(Debug)]
pub struct OtlpStats {
    targets: Vec<String>,
    received: Vec<AtomicU64>,
    dropped: [AtomicU64; Dropped::ALL.len()],
    exports: [AtomicU64; Export::ALL.len()],
    /// The receiver's client connections.
    pub conns: Arc<ConnStats>,
}

impl OtlpStats {
    pub fn new(targets: Vec<String>) -> OtlpStats {
        let received = targets.iter().map(|_| AtomicU64::new(0)).collect();
        OtlpStats { targets, received, dropped: Default::default(), exports: Default::default(), conns: Arc::default() }
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
        let sample = |name, labels, value: u64| OtlpSample { name, labels, value: value as f64 };
        let mut out = Vec::new();
        for (i, t) in self.targets.iter().enumerate() {
            out.push(sample(RECEIVED, vec![("target", t.clone())], self.received_total(i)));
        }
        for d in Dropped::ALL {
            out.push(sample(DROPPED, vec![("reason", d.as_str().into())], self.dropped_total(d)));
        }
        for e in Export::ALL {
            out.push(sample(EXPORTS, vec![("result", e.as_str().into())], self.exports_total(e)));
        }
        out.push(sample(CONNECTIONS, Vec::new(), self.conns.open()));
        out.push(sample(CONNECTIONS_LIMIT, Vec::new(), self.conns.limit()));
        for c in Closed::ALL {
            out.push(sample(CONNECTIONS_CLOSED, vec![("reason", c.as_str().into())], self.conns.closed(c)));
        }
        out
    }
}

/// The receiver's counters, read at each GET of /metrics.
impl Collector for OtlpStats {
    fn families(&self) -> &'static [Family] {
        FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        for s in self.samples() {
            s.emit(out);
        }
    }
}

/// One sample: family, labels, value; the same type the report's families use.
pub use crate::export::ExportSample as OtlpSample;

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
        let got: Vec<(&str, String, f64)> = s
            .samples()
            .into_iter()
            .map(|x| (x.name, x.labels.first().map(|l| l.1.clone()).unwrap_or_default(), x.value))
            .collect();
        let want = |n, l: &str, v| (n, l.to_string(), v);
        let mut expected = vec![
            want(RECEIVED, "a", 0.0),
            want(RECEIVED, "b", 2.0),
            want(DROPPED, "not_llm_request", 0.0),
            want(DROPPED, "unknown_service", 3.0),
            want(DROPPED, "invalid", 0.0),
            want(DROPPED, "inbox_full", 0.0),
            want(DROPPED, "future", 0.0),
            want(DROPPED, "over_budget", 0.0),
            want(EXPORTS, "ok", 0.0),
            want(EXPORTS, "undecodable", 0.0),
            want(EXPORTS, "body_timeout", 0.0),
            want(EXPORTS, "too_large", 1.0),
            want(EXPORTS, "unsupported_media_type", 0.0),
            want(EXPORTS, "throttled", 0.0),
            want(CONNECTIONS, "", 0.0),
            want(CONNECTIONS_LIMIT, "", 0.0),
        ];
        expected.extend(Closed::ALL.iter().map(|c| want(CONNECTIONS_CLOSED, c.as_str(), 0.0)));
        assert_eq!(got, expected);
        assert!(s.samples().iter().all(|x| FAMILIES.iter().any(|f| f.name == x.name)));
    }
}
