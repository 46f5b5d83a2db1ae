//! Live mode: serve the simulated engine's /metrics and its OpenAI API in real time (or
//! `speed`× faster).
//!
//! Virtual time is `wall time since start × speed`. Without clients the model advances
//! lazily when a scrape arrives, and a once-a-second tick keeps each catch-up small. While
//! a client request is in flight a driver task sleeps until the wall-clock instant of the
//! model's next event (a step's end, an arrival reaching an engine) and advances to it,
//! so each step's tokens reach the client when the model says they were produced. The
//! wall clock is read only here, at the edge; the model itself never sees it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use super::api;
use super::client::Fault;
use super::cluster::{Output, Sim};
use super::config::SimConfig;
use super::event::FinishReason;
use super::metrics::Metrics;
use super::otlp;
use super::truth::{LiveTruth, Origin};

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

/// What the engine did for one client request, in the order it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// One engine step produced `n` tokens.
    Tokens(u32),
    /// The request finished; `last` tokens came out in the final step, `output` in all.
    End { last: u32, output: u32, reason: FinishReason },
}

/// A client request the engine is working on, and where its steps go.
pub(crate) struct Waiter {
    pub tx: mpsc::UnboundedSender<Step>,
    pub request_id: String,
    pub fault: Option<Fault>,
    pub traceparent: Option<(String, String)>,
}

pub(crate) struct Live {
    pub sim: Sim,
    started: Instant,
    started_unix: f64,
    speed: f64,
    pub waiters: HashMap<u64, Waiter>,
    pub truth: Option<LiveTruth>,
    otlp: Option<otlp::Exporter>,
}

impl Live {
    /// Advances the model to the wall clock and passes on what happened.
    pub fn catch_up(&mut self) {
        let t = self.started.elapsed().as_secs_f64() * self.speed;
        self.sim.advance_to(t);
        self.deliver();
    }

    /// Wall-clock unix seconds of virtual instant `t`.
    pub fn unix(&self, t: f64) -> f64 {
        self.started_unix + t / self.speed
    }

    /// How long the driver may sleep: until the next event while clients wait (at most a
    /// second), else a second.
    fn next_wake(&self) -> Duration {
        let idle = Duration::from_secs(1);
        if self.waiters.is_empty() {
            return idle;
        }
        let due = self.sim.next_event_time() / self.speed;
        let wait = due - self.started.elapsed().as_secs_f64();
        if wait.is_finite() { Duration::from_secs_f64(wait.clamp(0.0, 1.0)) } else { idle }
    }

    fn deliver(&mut self) {
        let outputs = self.sim.take_outputs();
        if outputs.is_empty() {
            return;
        }
        // A request's last step travels with its finish, as vLLM puts the last tokens and
        // `finish_reason` in one chunk.
        let finish_at: HashMap<u64, f64> = outputs
            .iter()
            .filter_map(|o| match o {
                Output::Finished { f, client: true } => Some((f.id, f.finish)),
                _ => None,
            })
            .collect();
        let mut last: HashMap<u64, u32> = HashMap::new();
        let seed = self.sim.config().seed;
        for o in outputs {
            match o {
                Output::Tokens { id, at, n } => {
                    if finish_at.get(&id) == Some(&at) {
                        last.insert(id, n);
                    } else if let Some(w) = self.waiters.get(&id) {
                        let _ = w.tx.send(Step::Tokens(n));
                    }
                }
                Output::Finished { f, client } => {
                    let waiter = if client { self.waiters.remove(&f.id) } else { None };
                    let unix = |t: f64| self.started_unix + t / self.speed;
                    let origin = waiter.as_ref().map(|w| Origin { request_id: &w.request_id, fault: w.fault });
                    if let Some(truth) = &mut self.truth {
                        truth.finished(&f, &unix, origin);
                    }
                    // vLLM traces requests that reach a finish in the engine's output, not
                    // those the frontend aborts.
                    if let Some(ex) = &self.otlp
                        && f.reason != FinishReason::Abort
                    {
                        let times = otlp::RequestTimes {
                            request_id: waiter
                                .as_ref()
                                .map_or_else(|| format!("sim-{}", f.id), |w| w.request_id.clone()),
                            model: self.sim.config().model.clone(),
                            arrival_unix: unix(f.arrival),
                            finish_unix: unix(f.finish),
                            ttft: f.ttft,
                            e2e: f.e2e,
                            queue: f.queue,
                            prefill: f.prefill,
                            decode: f.decode,
                            prompt_tokens: f.prompt,
                            completion_tokens: f.output,
                            max_tokens: f.max_tokens,
                        };
                        let parent = waiter.as_ref().and_then(|w| w.traceparent.as_ref());
                        ex.send(otlp::span(&times, (seed, f.id), parent));
                    }
                    if let Some(w) = waiter {
                        let n = last.remove(&f.id).unwrap_or(0);
                        let _ = w.tx.send(Step::End { last: n, output: f.output, reason: f.reason });
                    }
                }
            }
        }
    }
}

/// The state every handler shares.
pub(crate) struct App {
    pub live: Mutex<Live>,
    /// Wakes the driver when a client request arrives or leaves.
    pub wake: Notify,
    pub cfg: SimConfig,
    /// Unix seconds the server came up (`created` of the model card).
    pub created: u64,
}

impl App {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
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
pub async fn serve(cfg: SimConfig, addr: SocketAddr, speed: f64) -> Result<LiveHandle, String> {
    serve_with(cfg, addr, Options::speed(speed)).await
}

/// [`serve`], with the ground-truth file and span export of `opts`.
pub async fn serve_with(cfg: SimConfig, addr: SocketAddr, opts: Options) -> Result<LiveHandle, String> {
    let speed = opts.speed;
    if !(speed.is_finite() && speed > 0.0 && speed <= 10_000.0) {
        return Err(format!("--speed must be in (0, 10000], got {speed}"));
    }
    let mut sim = Sim::new(&cfg, false)?;
    sim.record_outputs();
    let now_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    if let Metrics::Vllm(m) = sim.metrics_mut() {
        m.set_created(now_unix);
    }
    let truth = opts.truth.as_deref().map(|p| LiveTruth::create(p, &cfg.name)).transpose()?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
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
    let live =
        Live { sim, started: Instant::now(), started_unix: now_unix, speed, waiters: HashMap::new(), truth, otlp };
    let app = Arc::new(App { live: Mutex::new(live), wake: Notify::new(), cfg: cfg.clone(), created: now_unix as u64 });

    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok" }))
        .route("/v1/models", get(api::models))
        .route("/v1/chat/completions", post(api::chat))
        .route("/v1/completions", post(api::completions))
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
