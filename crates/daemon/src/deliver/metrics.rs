//! The alert-delivery families on /metrics (docs/metrics.md): notifications sent, failed and
//! evicted per destination, and each queue's length.
//!
//! They are read from the delivery workers' live counters when /metrics is rendered, not
//! from the evaluation report, so a failed POST shows at the next scrape of the daemon.
//! Every configured destination has every series from the start, at 0, so that `rate()` and
//! `increase()` see the first failure.

use goodput_core::export::{Collector, Emit, Family, LabelValue, Unit};

use super::{DeliveryMetrics, DestinationStats};

pub const SENT: &str = "llm_slo_alert_notifications_sent_total";
pub const FAILED: &str = "llm_slo_alert_notifications_failed_total";
pub const EVICTED: &str = "llm_slo_alert_notifications_evicted_total";
pub const QUEUE_LENGTH: &str = "llm_slo_alert_queue_length";

goodput_core::label_set! {
    pub Destination = [destination];
    pub DestinationOutcome = [destination, outcome: FailureOutcome];
    pub DestinationState = [destination, state];
}

/// Every family this module emits, in output order.
pub const FAMILIES: &[Family] = &[
    Family::counter::<Destination>(
        SENT,
        Unit::Count,
        "Alert notifications delivered to the destination (firing and resolved).",
    ),
    Family::counter::<DestinationOutcome>(
        FAILED,
        Unit::Count,
        "Alert notifications in POSTs that failed; outcome=retried stay queued (each retry counts again), outcome=dropped were rejected with a 4xx and are lost.",
    ),
    Family::counter::<DestinationState>(
        EVICTED,
        Unit::Count,
        "Alert notifications evicted from the full delivery queue (alerting.queue_capacity), by the alert's state.",
    ),
    Family::gauge::<Destination>(
        QUEUE_LENGTH,
        Unit::Count,
        "Distinct alerts waiting in the destination's delivery queue.",
    ),
];

/// What happened to the notifications of a failed POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureOutcome {
    /// A connection error, timeout, 5xx or 429: the batch stays queued and is sent again.
    Retried,
    /// Any other 4xx: the receiver rejects these alerts, so the batch is dropped.
    Dropped,
}

impl LabelValue for FailureOutcome {
    const ALL: &'static [FailureOutcome] = &[FailureOutcome::Retried, FailureOutcome::Dropped];
    fn as_str(self) -> &'static str {
        FailureOutcome::as_str(self)
    }
}

impl FailureOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureOutcome::Retried => "retried",
            FailureOutcome::Dropped => "dropped",
        }
    }
}

/// One sample: family, labels, value; the same type the report's families use.
pub use crate::export::ExportSample as DeliverySample;

/// Every configured destination's counters, read at each GET of /metrics.
impl Collector for DeliveryMetrics {
    fn families(&self) -> &'static [Family] {
        FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        for s in samples(&self.stats()) {
            s.emit(out);
        }
    }
}

/// The samples for every destination, each family's together, labelled `destination`.
pub fn samples(stats: &[DestinationStats]) -> Vec<DeliverySample> {
    let mut out = Vec::new();
    let dest = |s: &DestinationStats| vec![("destination", s.label.clone())];
    let with = |s: &DestinationStats, k: &'static str, v: &str| {
        let mut l = dest(s);
        l.push((k, v.to_string()));
        l
    };
    for s in stats {
        out.push(DeliverySample { name: SENT, labels: dest(s), value: s.sent_notifications as f64 });
    }
    for s in stats {
        for (outcome, n) in
            [(FailureOutcome::Retried, s.retried_notifications), (FailureOutcome::Dropped, s.dropped_notifications)]
        {
            out.push(DeliverySample { name: FAILED, labels: with(s, "outcome", outcome.as_str()), value: n as f64 });
        }
    }
    for s in stats {
        for (state, n) in [("firing", s.evicted_firing), ("resolved", s.evicted_resolved)] {
            out.push(DeliverySample { name: EVICTED, labels: with(s, "state", state), value: n as f64 });
        }
    }
    for s in stats {
        out.push(DeliverySample { name: QUEUE_LENGTH, labels: dest(s), value: s.queued as f64 });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliver::destination_label;

    #[test]
    fn labels_carry_no_credentials() {
        assert_eq!(
            destination_label("https://user:secret@am.example:9093/api/v2/alerts?token=x#f", false),
            "https://am.example:9093/api/v2/alerts"
        );
        assert_eq!(destination_label("https://hooks.example/T0/B0/s3cr3t?x=1", true), "https://hooks.example");
        assert_eq!(destination_label("not a url", false), "invalid URL");
    }

    #[test]
    fn every_destination_has_every_series() {
        let s = DestinationStats {
            label: "http://am:9093/api/v2/alerts".into(),
            sent_notifications: 3,
            retried_notifications: 2,
            evicted_resolved: 1,
            queued: 4,
            ..Default::default()
        };
        let dest = "http://am:9093/api/v2/alerts";
        let x = |name, extra: Option<(&'static str, &str)>, value| {
            let mut labels = vec![("destination", dest.to_string())];
            labels.extend(extra.map(|(k, v)| (k, v.to_string())));
            DeliverySample { name, labels, value }
        };
        assert_eq!(
            samples(&[s]),
            vec![
                x(SENT, None, 3.0),
                x(FAILED, Some(("outcome", "retried")), 2.0),
                x(FAILED, Some(("outcome", "dropped")), 0.0),
                x(EVICTED, Some(("state", "firing")), 0.0),
                x(EVICTED, Some(("state", "resolved")), 1.0),
                x(QUEUE_LENGTH, None, 4.0),
            ]
        );
    }
}
