//! Alerting, the pure part: the alert table (names, defaults, texts), the rules evaluated
//! every tick, their state machine (pending, firing, resolved, with `for` and resend), and
//! the views on `/api/v1/alerts`.
//!
//! The daemon passes the time and the inputs in. Delivery to Alertmanager lives in the
//! daemon crate (`goodput::deliver`), and the PromQL version of these rules for `goodput
//! rules` in `goodput::promql_rules`.

mod condition;
pub mod config;
pub mod down;
pub mod from_report;
pub mod input;
pub mod kind;
pub mod reload;
pub mod rule;
pub mod saved;
pub mod state;
pub mod table;
pub mod validate;
pub mod view;
#[cfg(test)]
mod work_tests;

pub use config::AlertingConfig;
pub use input::{
    AlertInput, Bounded, CapacityInput, Clause, DataSource, KvUsage, Slo, SloReport, Sources, WindowInput,
};
pub use rule::{AlertName, RuleSet, Severity};
pub use state::{AlertEngine, AlertState, Fingerprint, Notification};
pub use table::{AlertSpec, LATENCY_ALERT_QUANTILE};
