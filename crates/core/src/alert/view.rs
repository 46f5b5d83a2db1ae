//! What the outside sees of the alert state: `llm_slo_alert` samples for /metrics and
//! `goodput replay`, and the JSON of `/api/v1/alerts` (shaped like Prometheus's).

use serde::Serialize;

use super::state::{ActiveAlert, AlertEngine};
pub use crate::duration::rfc3339_ms;
use crate::export::ExportSample;
use crate::export::alerts::samples_of;
pub use crate::report::AlertJson;

/// `llm_slo_alert{alertname, severity, state, target, model, slo} 1`, in fingerprint order.
/// `model` and `slo` are left off where the alert has none.
pub fn samples(engine: &AlertEngine) -> Vec<ExportSample> {
    samples_of(&api_response(engine).data.alerts)
}

/// The body of `GET /api/v1/alerts`.
#[derive(Debug, Clone, Serialize)]
pub struct AlertsResponse {
    pub status: &'static str,
    pub data: AlertsData,
}

#[derive(Debug, Clone, Serialize)]
pub struct AlertsData {
    pub alerts: Vec<AlertJson>,
}

pub fn api_response(engine: &AlertEngine) -> AlertsResponse {
    AlertsResponse { status: "success", data: AlertsData { alerts: engine.active().map(alert_json).collect() } }
}

fn alert_json(a: &ActiveAlert) -> AlertJson {
    AlertJson {
        labels: a.labels.clone(),
        annotations: a.annotations.clone(),
        state: a.state.as_str(),
        active_at: rfc3339_ms(a.active_at_ms),
        value: format!("{}", a.value),
    }
}
