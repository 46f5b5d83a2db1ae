//! Live mode: serve the simulated engine's /metrics in real time (or `speed`× faster).
//!
//! Virtual time is `wall time since start × speed`. The model advances lazily when a
//! scrape arrives, and a once-a-second tick keeps each catch-up small; nothing spins.
//! The wall clock is read only here, at the edge; the model itself never sees it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::cluster::Sim;
use super::config::SimConfig;
use super::metrics::Metrics;

struct Live {
    sim: Sim,
    started: Instant,
    speed: f64,
}

impl Live {
    fn catch_up(&mut self) {
        let t = self.started.elapsed().as_secs_f64() * self.speed;
        self.sim.advance_to(t);
    }
}

type Shared = Arc<Mutex<Live>>;

/// A running simulated engine; drop or [`LiveHandle::shutdown`] to stop it.
pub struct LiveHandle {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    ticker: Option<JoinHandle<()>>,
}

impl LiveHandle {
    /// The scrape URL.
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Stops serving and waits for the server task to finish.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for task in [self.server.take(), self.ticker.take()].into_iter().flatten() {
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
    if !(speed.is_finite() && speed > 0.0 && speed <= 10_000.0) {
        return Err(format!("--speed must be in (0, 10000], got {speed}"));
    }
    let mut sim = Sim::new(&cfg, false)?;
    let now_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    if let Metrics::Vllm(m) = sim.metrics_mut() {
        m.set_created(now_unix);
    }
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let shared: Shared = Arc::new(Mutex::new(Live { sim, started: Instant::now(), speed }));
    let (stop, mut stop_rx) = watch::channel(false);

    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok" }))
        .with_state(shared.clone());
    let mut server_stop = stop.subscribe();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = server_stop.wait_for(|s| *s).await;
            })
            .await;
    });
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => lock(&shared).catch_up(),
                _ = stop_rx.wait_for(|s| *s) => break,
            }
        }
    });
    Ok(LiveHandle { addr: local, stop, server: Some(server), ticker: Some(ticker) })
}

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Live> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

async fn metrics(State(s): State<Shared>) -> impl IntoResponse {
    let body = {
        let mut live = lock(&s);
        live.catch_up();
        live.sim.render()
    };
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body)
}
