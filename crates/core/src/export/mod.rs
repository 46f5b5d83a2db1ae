//! From a [`Report`](crate::report::Report) to the samples that /metrics and `goodput replay`
//! both show (docs/metrics.md), and the typed declarations of every family they carry.
//!
//! This file only names the parts and re-exports them: [`registry`] declares what a family
//! is, [`families`] and the per-subsystem files declare theirs beside the code that emits
//! them, [`walk`] walks a report, [`catalog`] registers the report's families in order.
//! Each part imports the ones it needs directly, never this file.

pub mod alerts;
pub mod budget;
pub mod capacity;
pub mod catalog;
mod emit;
mod families;
pub mod gpu;
pub mod limits;
pub mod registry;
pub mod requests;
mod slo;
mod walk;

pub use catalog::{family_meta, report_registry};
pub use emit::{Collect, Emit, ExportSample, Label, Labels, UNRANKED};
pub use families::*;
pub use registry::{
    Collector, Family, Kind, LabelName, LabelSet, LabelValue, NoLabels, Registry, Unit, markdown_table,
};
pub use walk::{emit_report_wide, emit_targets, report_rank, samples, target_rank};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod work_tests;
