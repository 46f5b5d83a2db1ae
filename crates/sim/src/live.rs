//! Live mode: serve the simulated engine's /metrics and its OpenAI API in real time (or
//! `speed`× faster).
//!
//! Virtual time is `wall time since start × speed`. Without clients the model advances
//! lazily when a scrape arrives, and a once-a-second tick keeps each catch-up small. While
//! a client request is in flight a driver task sleeps until the wall-clock instant of the
//! model's next event (a step's end, an arrival reaching an engine) and advances to it,
//! so each step's tokens reach the client when the model says they were produced. The
//! wall clock is read only here and in `realtime.rs`, at the edge; the model itself
//! never sees it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::api;
use super::cluster::Sim;
use super::config::SimConfig;
use super::error::RunError;
use super::metrics::Metrics;
use super::otlp;
use super::realtime::{App, Live};
use super::truth::LiveTruth;

/// How to run the live simulator.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Virtual seconds per wall second.
    pub speed: f64,
    /// Write the per-request ground truth here as requests finish.
    pub truth: Option<PathBuf>,
    /// POST a vLLM-shaped span per finished request here (OTLP/HTTP JSON).
    pub otlp_traces_endpoint: Option<String>,
    /// The spans' `service.name`.
    pub service_name: String,
}

impl Options {
    pub fn speed(speed: f64) -> Options {
        Options { speed, truth: None, otlp_traces_endpoint: None, service_name: "vllm".into() }
    }
}

/// A running simulated engine; drop or [`LiveHandle::shutdown`] to stop it.
pub struct LiveHandle {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    otlp_stats: Option<Arc<otlp::Stats>>,
}

impl LiveHandle {
    /// The scrape URL.
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// The OpenAI API's base URL (`…/v1`).
    pub fn api_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Spans (posted, lost in failed posts, dropped on a full queue), when exporting.
    pub fn otlp_counts(&self) -> Option<(u64, u64, u64)> {
        use std::sync::atomic::Ordering::Relaxed;
        self.otlp_stats.as_ref().map(|s| (s.sent.load(Relaxed), s.failed.load(Relaxed), s.dropped.load(Relaxed)))
    }

    /// Stops serving, flushes pending spans and waits for the tasks to finish.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

impl Drop for LiveHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Binds `addr` and serves the simulated engine on the current tokio runtime.
pub async fn serve(cfg: SimConfig, addr: SocketAddr, speed: f64) -> Result<LiveHandle, RunError> {
    serve_with(cfg, addr, Options::speed(speed)).await
}

/// [`serve`], with the ground-truth file and span export of `opts`.
pub async fn serve_with(cfg: SimConfig, addr: SocketAddr, opts: Options) -> Result<LiveHandle, RunError> {
    let speed = opts.speed;
    if !(speed.is_finite() && speed > 0.0 && speed <= 10_000.0) {
        return Err(RunError::LiveSpeed(speed));
    }
    let mut sim = Sim::new(&cfg, false)?;
    sim.record_outputs();
    let now_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    if let Metrics::Vllm(m) = sim.metrics_mut() {
        m.set_created(now_unix);
    }
    let truth = opts.truth.as_deref().map(|p| LiveTruth::create(p, &cfg.name)).transpose()?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|error| RunError::Listen { addr, error })?;
    let local = listener.local_addr().map_err(RunError::ListenerAddr)?;
    let (stop, mut stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let (otlp, otlp_stats) = match &opts.otlp_traces_endpoint {
        Some(url) => {
            let (ex, task) = otlp::Exporter::start(url, &opts.service_name, stop.subscribe())?;
            tasks.push(task);
            let stats = ex.stats.clone();
            (Some(ex), Some(stats))
        }
        None => (None, None),
    };
    let live = Live::new(sim, Instant::now(), now_unix, speed, truth, otlp);
    let app = Arc::new(App { live: Mutex::new(live), wake: Notify::new(), cfg: cfg.clone(), created: now_unix as u64 });

    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok" }))
        .route("/v1/models", get(api::models))
        .route("/v1/chat/completions", post(api::chat))
        .route("/v1/completions", post(api::completions))
        // uvicorn sets no body limit; multimodal requests run to tens of MB.
        .layer(axum::extract::DefaultBodyLimit::max(api::MAX_BODY))
        .with_state(app.clone());
    let mut server_stop = stop.subscribe();
    // Each chunk goes out when written, as uvicorn's does.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tasks.push(tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = server_stop.wait_for(|s| *s).await;
            })
            .await;
    }));
    tasks.push(tokio::spawn(async move {
        loop {
            let wait = {
                let mut live = app.lock();
                live.catch_up();
                live.next_wake()
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = app.wake.notified() => {}
                _ = stop_rx.wait_for(|s| *s) => {
                    // Open streams end (without `[DONE]`) so that graceful shutdown can finish.
                    app.lock().waiters.clear();
                    break;
                }
            }
        }
    }));
    Ok(LiveHandle { addr: local, stop, tasks, otlp_stats })
}

async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    let body = {
        let mut live = app.lock();
        live.catch_up();
        live.sim.render()
    };
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body)
}
