//! Alerting: rules evaluated by the daemon every tick, their state machine, the views on
//! /metrics and `/api/v1/alerts`, delivery to Alertmanager and webhooks, and the PromQL
//! version of the same rules for `goodput rules`.
//!
//! Everything except [`deliver`] is pure: the daemon passes the time and the inputs in.

pub mod config;
pub mod deliver;
pub mod delivery_metrics;
pub mod from_report;
pub mod input;
pub mod promql;
pub mod queue;
pub mod rule;
pub mod state;
pub mod validate;
pub mod view;

pub use config::AlertingConfig;
pub use input::{AlertInput, Bounded, Clause, KvUsage, SloReport, SloSpec, WindowInput};
pub use rule::{AlertName, RuleSet, Severity};
pub use state::{AlertEngine, AlertState, Fingerprint, Notification};
