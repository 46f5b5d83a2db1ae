//! `llm_slo_alert`: the pending and firing alerts a report carries, as samples shaped like
//! Prometheus's own `ALERTS` series; and `llm_slo_alert_rule_ready`: whether each rule's
//! windows are covered enough for it to judge (docs/alerts.md#after-a-restart).

use super::ExportSample;
use crate::report::{AlertJson, RuleReadiness};

pub const ALERT_FAMILY: &str = "llm_slo_alert";
pub const ALERT_HELP: &str = "Pending or firing alerts, like Prometheus's ALERTS; 1 while the alert is in that state.";
pub const READY_FAMILY: &str = "llm_slo_alert_rule_ready";
pub const READY_HELP: &str = "1 when the window an alert rule reads is covered enough by data (alerting.min_window_coverage) for the rule to judge this target and model; 0 while the rule waits, e.g. after a start.";

/// `llm_slo_alert_rule_ready{alertname, target, model, window}`, in the order given.
pub fn readiness_samples(readiness: &[RuleReadiness]) -> Vec<ExportSample> {
    readiness
        .iter()
        .map(|r| {
            let mut labels = vec![("alertname", r.alertname.to_string()), ("target", r.target.clone())];
            if !r.model.is_empty() {
                labels.push(("model", r.model.clone()));
            }
            labels.push(("window", r.window.label()));
            ExportSample { name: READY_FAMILY, labels, value: if r.ready { 1.0 } else { 0.0 } }
        })
        .collect()
}

/// `llm_slo_alert{alertname, severity, state, target, model, slo} 1`, in the order given.
/// `model` and `slo` are left off where the alert has none.
pub fn samples_of(alerts: &[AlertJson]) -> Vec<ExportSample> {
    alerts
        .iter()
        .map(|a| {
            let mut labels = Vec::with_capacity(6);
            for key in ["alertname", "severity"] {
                labels.push((key, a.labels.get(key).cloned().unwrap_or_default()));
            }
            labels.push(("state", a.state.to_string()));
            for key in ["target", "model", "slo"] {
                if let Some(v) = a.labels.get(key) {
                    labels.push((key, v.clone()));
                }
            }
            ExportSample { name: ALERT_FAMILY, labels, value: 1.0 }
        })
        .collect()
}
