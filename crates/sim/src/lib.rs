//! The engine simulator behind `goodput simulate` and `goodput demo`.
//!
//! A seeded, deterministic discrete-event model of a vLLM-style continuous-batching
//! engine. The pure core ([`arrivals`], [`engine`], [`cluster`]) runs in virtual time and
//! reports [`event::Event`]s; the metrics registries ([`vllm`], [`sglang`], [`tgi`]) turn
//! them into the exact expositions those engines serve, and [`truth`] into per-request
//! ground truth. [`offline`] and [`live`] are the I/O shells. See docs/simulator.md.

pub mod api;
pub mod api_json;
pub mod arrivals;
pub mod capacity;
pub mod client;
pub mod cluster;
pub mod config;
pub mod drive;
pub mod engine;
pub mod error;
pub mod event;
pub mod expo;
pub mod hist;
pub mod kv;
pub mod live;
pub mod metrics;
pub mod offline;
pub mod otlp;
pub mod process;
pub mod pyfmt;
mod realtime;
pub mod sglang;
pub mod tgi;
pub mod truth;
pub mod vllm;

pub use cluster::Sim;
pub use config::{ConfigError, Format, Profile, SimConfig};
pub use error::RunError;
