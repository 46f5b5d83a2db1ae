//! GPU telemetry and the utilization axis: what each GPU is doing (NVML, dcgm-exporter),
//! and what that means for the model served on it (MFU, HBM bandwidth, TPOT floor, cost).
//!
//! Everything here is pure. Sources produce [`reading::GpuReading`]s: [`dcgm`] parses a
//! dcgm-exporter scrape, and the NVML sampler (in the daemon crate, `goodput::gpu::nvml`)
//! reads the driver. [`derive`] is pure math on rates; `export::gpu` turns both into
//! `llm_slo_*` samples.

pub mod config;
pub mod dcgm;
pub mod derive;
pub mod models;
pub mod peaks;
pub mod precision;
pub mod reading;
pub mod visible;
