//! `llm_slo_alert`: the pending and firing alerts a report carries, as samples shaped like
//! Prometheus's own `ALERTS` series; and `llm_slo_alert_rule_ready`: whether each rule's
//! windows are covered enough for it to judge (docs/alerts.md#after-a-restart).

use super::emit::{Collect, Emit, ExportSample, Label, Labels};
use super::registry::{Family, Unit};
use crate::report::{AlertJson, RuleReadiness};

pub const ALERT_FAMILY: &str = "llm_slo_alert";
pub const ALERT_HELP: &str = "Pending or firing alerts, like Prometheus's ALERTS; 1 while the alert is in that state.";
pub const READY_FAMILY: &str = "llm_slo_alert_rule_ready";
pub const READY_HELP: &str = "1 when the window an alert rule reads is covered enough by data (alerting.min_window_coverage) for the rule to judge this target and model; 0 while the rule waits, e.g. after a start.";

crate::label_set! {
    /// `model` and `slo` only where the alert has them.
    pub Alert = [alertname, severity, state, target, model, slo];
    /// `model` only where the rule reads a model's series.
    pub Ready = [alertname, target, model, window];
}

/// Both families.
pub const FAMILIES: &[Family] = &[
    Family::gauge::<Alert>(ALERT_FAMILY, Unit::Flag, ALERT_HELP),
    Family::gauge::<Ready>(READY_FAMILY, Unit::Flag, READY_HELP),
];

/// `llm_slo_alert_rule_ready{alertname, target, model, window}`, in the order given.
pub fn readiness_samples(readiness: &[RuleReadiness]) -> Vec<ExportSample> {
    let mut out = Collect::new(|_| None);
    emit_readiness(readiness, &mut out);
    out.finish()
}

/// Emits [`readiness_samples`].
pub fn emit_readiness(readiness: &[RuleReadiness], out: &mut impl Emit) {
    for r in readiness {
        let window = r.window.label();
        let value = if r.ready { 1.0 } else { 0.0 };
        let head = [("alertname", r.alertname), ("target", r.target.as_str())];
        if r.model.is_empty() {
            out.sample(READY_FAMILY, Labels::new(&head, &[("window", &window)]), value);
        } else {
            out.sample(READY_FAMILY, Labels::new(&head, &[("model", &r.model), ("window", &window)]), value);
        }
    }
}

/// `llm_slo_alert{alertname, severity, state, target, model, slo} 1`, in the order given.
/// `model` and `slo` are left off where the alert has none.
pub fn samples_of(alerts: &[AlertJson]) -> Vec<ExportSample> {
    let mut out = Collect::new(|_| None);
    emit(alerts, &mut out);
    out.finish()
}

/// Emits [`samples_of`].
pub fn emit(alerts: &[AlertJson], out: &mut impl Emit) {
    for a in alerts {
        let mut labels: Vec<Label<'_>> = Vec::with_capacity(6);
        for key in ["alertname", "severity"] {
            labels.push((key, a.labels.get(key).map_or("", String::as_str)));
        }
        labels.push(("state", a.state));
        for key in ["target", "model", "slo"] {
            if let Some(v) = a.labels.get(key) {
                labels.push((key, v.as_str()));
            }
        }
        out.sample(ALERT_FAMILY, Labels::new(&labels, &[]), 1.0);
    }
}
