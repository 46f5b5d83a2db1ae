//! Alerting, the pure part: the alert table (names, defaults, texts), the rules evaluated
//! every tick, their state machine (pending, firing, resolved, with `for` and resend), and
//! the views on `/api/v1/alerts`.
//!
//! The daemon passes the time and the inputs in. Delivery to Alertmanager lives in the
//! daemon crate (`goodput::deliver`), and the PromQL version of these rules for `goodput
//! rules` in `goodput::rules`.

pub mod config;
pub mod from_report;
pub mod input;
pub mod kind;
pub mod rule;
pub mod saved;
pub mod state;
pub mod table;
pub mod validate;
pub mod view;

pub use config::AlertingConfig;
pub use input::{AlertInput, Bounded, CapacityInput, Clause, DataSource, KvUsage, Slo, SloReport, WindowInput};
pub use rule::{AlertName, RuleSet, Severity};
pub use state::{AlertEngine, AlertState, Fingerprint, Notification};
pub use table::{AlertSpec, LATENCY_ALERT_QUANTILE};
