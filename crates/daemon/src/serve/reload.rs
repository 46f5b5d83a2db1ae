//! The config reload families on /metrics (docs/metrics.md#config-reload), as Prometheus
//! names its own: whether the last reload succeeded and when one last did, and whether the
//! process is waiting for a valid config instead (crate::daemon::standby); and the running
//! config itself, its hash on /metrics and its normal form (credentials masked) at
//! `/api/v1/config`, which `goodput check --against` compares a file with.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::config::normal::Normal;

use goodput_core::export::{Collector, Emit, Family, Labels, NoLabels, Unit};

pub const SUCCESSFUL: &str = "llm_slo_config_last_reload_successful";
pub const SUCCESS_TIMESTAMP: &str = "llm_slo_config_last_reload_success_timestamp_seconds";
pub const WAITING: &str = "llm_slo_config_waiting";
pub const INFO: &str = "llm_slo_config_info";

goodput_core::label_set! {
    pub Hash = [hash];
}

/// Every family, in output order.
pub const FAMILIES: &[Family] = &[
    Family::gauge::<NoLabels>(
        SUCCESSFUL,
        Unit::Flag,
        "1 when the last config reload succeeded (or none was tried since start), 0 when it failed.",
    ),
    Family::gauge::<NoLabels>(
        SUCCESS_TIMESTAMP,
        Unit::Timestamp,
        "Unix time of the last successful config reload, or of the start when there has been none.",
    ),
    Family::gauge::<NoLabels>(
        WAITING,
        Unit::Flag,
        "1 while goodput waits for a valid config (run --on-invalid-config wait) and evaluates nothing, 0 when the daemon runs.",
    ),
    Family::gauge::<Hash>(
        INFO,
        Unit::Flag,
        "Always 1; hash identifies the running config's normal form (GET /api/v1/config), which changes with every key a reload applies.",
    ),
];

/// The config in force, as /api/v1/config shows it.
#[derive(Debug, Clone)]
struct Running {
    hash: String,
    config: serde_json::Value,
}

/// The reload outcome, shared by the reloader and the /metrics handler.
#[derive(Debug)]
pub struct ReloadStats {
    successful: AtomicBool,
    success_ms: AtomicI64,
    waiting: AtomicBool,
    running: Mutex<Option<Running>>,
    /// The command line's changes to every config it runs (`--no-alert-delivery`), which a
    /// comparison with a file must make too.
    overrides: Mutex<Vec<String>>,
}

impl Default for ReloadStats {
    fn default() -> Self {
        ReloadStats {
            successful: AtomicBool::new(true),
            success_ms: AtomicI64::new(0),
            waiting: AtomicBool::new(false),
            running: Mutex::new(None),
            overrides: Mutex::new(Vec::new()),
        }
    }
}

impl ReloadStats {
    /// A reload (or the start) that succeeded at `t_ms`.
    pub fn succeeded(&self, t_ms: i64) {
        self.success_ms.store(t_ms, Ordering::Relaxed);
        self.successful.store(true, Ordering::Release);
    }

    pub fn failed(&self) {
        self.successful.store(false, Ordering::Release);
    }

    /// Waiting for a valid config: no config has loaded since the process started.
    pub fn waiting(&self) {
        self.waiting.store(true, Ordering::Release);
        self.failed();
    }

    /// The config now in force, in normal form (at start and after each reload that applied).
    pub fn running(&self, normal: &Normal) {
        let r = Running { hash: normal.hash(), config: normal.to_json() };
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }

    /// The hash of the config in force; `None` while none runs.
    pub fn hash(&self) -> Option<String> {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|r| r.hash.clone())
    }

    /// The command line options that change every config the daemon runs, by flag.
    pub fn set_overrides(&self, flags: Vec<String>) {
        *self.overrides.lock().unwrap_or_else(|e| e.into_inner()) = flags;
    }

    /// The body of `GET /api/v1/config`: the hash, the overrides and the normal form.
    pub fn config_json(&self) -> Option<serde_json::Value> {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
        let overrides = self.overrides.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Some(serde_json::json!({
            "status": "success",
            "data": {"hash": running.hash, "overrides": overrides, "config": running.config},
        }))
    }

    pub fn successful(&self) -> bool {
        self.successful.load(Ordering::Acquire)
    }
}

/// The reload outcome and the running config's hash, read at each GET of /metrics.
impl Collector for ReloadStats {
    fn families(&self) -> &'static [Family] {
        FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        let none = Labels::new(&[], &[]);
        out.sample(SUCCESSFUL, none, if self.successful() { 1.0 } else { 0.0 });
        out.sample(SUCCESS_TIMESTAMP, none, self.success_ms.load(Ordering::Relaxed) as f64 / 1000.0);
        out.sample(WAITING, none, if self.waiting.load(Ordering::Acquire) { 1.0 } else { 0.0 });
        if let Some(h) = &self.hash() {
            out.sample(INFO, Labels::new(&[("hash", h.as_str())], &[]), 1.0);
        }
    }
}

/// `GET /api/v1/config`: the running config in normal form, credentials masked
/// (docs/config.md#http-endpoints); 503 while no config runs.
pub async fn config(State(stats): State<std::sync::Arc<ReloadStats>>) -> Response {
    match stats.config_json() {
        Some(body) => ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "no config is running yet\n").into_response(),
    }
}
