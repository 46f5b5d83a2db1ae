//! GPU telemetry: what each GPU is doing, from dcgm-exporter scrapes (and, later, NVML).

pub mod dcgm;
