//! The daemon's YAML config (docs/config.md): types, loading and validation.
//!
//! Loading is three steps, each collecting every problem with its `file:line:column` so
//! that `goodput check` shows them all at once:
//! 1. [`tree`]: serde-saphyr parses the YAML (syntax, aliases, duplicate keys, size limits)
//!    into a tree whose every node knows its position;
//! 2. [`yaml`]: the tree is deserialized into the [`raw`] structs and the sections that
//!    other modules own (`alerting`, `gpu`, `cost`) through one deserializer ([`de`]):
//!    unknown keys, wrong types and values that their type refuses (durations, ranges)
//!    are found the same way in every section, the known keys coming from the types;
//! 3. [`validate`] checks meaning across keys (timeouts within intervals, SLOs naming
//!    targets, threshold order) and builds the typed [`Config`].

mod alerting;
mod budget;
mod bytes;
pub mod changes;
mod de;
mod discovery;
mod error;
mod labels;
mod loader;
pub mod normal;
mod otlp;
mod peek;
mod raw;
mod state;
mod tap;
mod tree;
mod types;
mod validate;
mod yaml;

pub use bytes::{SizeError, parse_bytes};
pub use discovery::{
    DEFAULT_MAX_DISCOVERED_TARGETS, DEFAULT_REFRESH, Discovery, DiscoveryLimits, DnsRecord, DnsSd, FileSd, KubernetesSd,
};
pub use error::{ConfigError, ConfigErrors, MAX_ERRORS, Pos};
pub use labels::RESERVED as RESERVED_LABEL_NAMES;
pub use loader::{MAX_FILE_BYTES, from_str, from_str_with_env, load, load_with_env};
pub use peek::written_listen;
pub use state::{DEFAULT_STATE_SNAPSHOT_INTERVAL, MIN_STATE_SNAPSHOT_INTERVAL, StateConfig};
pub use tree::{MAX_ALIAS_EVENTS, MAX_DEPTH, MAX_NODES};
pub use types::{
    Cardinality, Config, DEFAULT_BODY_LIMIT, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_MODELS, DEFAULT_MAX_SERIES,
    DEFAULT_OTLP_BODY_LIMIT, DEFAULT_OTLP_MAX_CONNECTIONS, DEFAULT_QUANTILES, DEFAULT_SCRAPE_INTERVAL,
    DEFAULT_SCRAPE_TIMEOUT, DEFAULT_TAP_MAX_CONNECTIONS, DEFAULT_TARGET_GRACE, DEFAULT_WINDOWS, ListenerGuards, Loaded,
    MIN_DEFAULT_EVALUATION_INTERVAL, OtlpConfig, ScrapeConfig, ServerConfig, TapConfig, Target, TargetTraces,
};
