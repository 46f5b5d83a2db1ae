//! GPU telemetry: the pure model and derivations of `goodput_core::gpu`, plus the NVML
//! sampler, which calls the driver and so lives here at the I/O edge.

pub use goodput_core::gpu::*;

pub mod nvml;
