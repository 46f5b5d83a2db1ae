//! From a [`Report`](crate::report::Report) to the flat list of samples that /metrics
//! and `goodput replay` both show.
//!
//! INTERFACE STUB: the implementation lands from the `window` work.

use crate::report::Report;

/// One exported sample: family name, labels in order, value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ExportSample {
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

/// HELP text and TYPE of an exported family.
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    let _ = name;
    None
}

/// Every sample for a report, grouped by family, in a stable order.
pub fn samples(report: &Report) -> Vec<ExportSample> {
    let _ = report;
    Vec::new()
}
