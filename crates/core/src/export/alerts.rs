//! `llm_slo_alert`: the pending and firing alerts a report carries, as samples shaped like
//! Prometheus's own `ALERTS` series.

use super::ExportSample;
use crate::report::AlertJson;

pub const ALERT_FAMILY: &str = "llm_slo_alert";
pub const ALERT_HELP: &str = "Pending or firing alerts, like Prometheus's ALERTS; 1 while the alert is in that state.";

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
