//! One alert whose condition holds at a tick, with the labels and annotations it fires with.

use std::collections::BTreeMap;
use std::time::Duration;

use super::input::DataSource;
use super::kind::AlertName;
use crate::duration::Window;

/// One alert whose condition holds at this tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub name: AlertName,
    pub for_: Duration,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The measured value that crossed the threshold.
    pub value: f64,
}

impl Condition {
    /// Names what the alert read: the `source` and `window` of its value, and the `value`
    /// itself as the /metrics series of that source and window shows it
    /// (docs/alerts.md#what-an-alert-says-it-read).
    pub(super) fn read(mut self, source: DataSource, window: Window) -> Condition {
        self.annotations.insert("source".to_string(), source.as_str().to_string());
        self.annotations.insert("window".to_string(), window.label());
        self.annotations.insert("value".to_string(), format!("{}", self.value));
        self
    }
}
