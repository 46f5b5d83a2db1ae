//! GPU telemetry and the utilization axis: what each GPU is doing (NVML, dcgm-exporter),
//! and what that means for the model served on it (MFU, HBM bandwidth, TPOT floor, cost).
//!
//! Sources ([`nvml`], [`dcgm`]) produce [`reading::GpuReading`]s; [`derive`] is pure math on
//! rates; [`export`] turns both into `llm_slo_*` samples.

pub mod config;
pub mod dcgm;
pub mod derive;
pub mod export;
pub mod models;
pub mod nvml;
pub mod peaks;
pub mod reading;
pub mod visible;
