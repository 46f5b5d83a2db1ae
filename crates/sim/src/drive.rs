//! A load generator that speaks HTTP: the simulator's own open-loop workload, sent as real
//! OpenAI-compatible streaming requests to a URL (a tap, a simulator's API, or an engine).
//!
//! The arrival process, prompt and output lengths and client give-ups are exactly those of
//! [`ArrivalGen`], so a simulator serving `--profile none` behind a tap sees the same load
//! it would generate itself, but every request now crosses the request path. Each request
//! asks for exactly its drawn output length (`max_tokens` with `ignore_eos`), and a client
//! that gives up drops its stream at the drawn instant, as a user closing a tab does.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use super::arrivals::{ArrivalGen, RequestSpec};
use super::config::SimConfig;
use super::error::RunError;

/// Requests in flight at most; past it an arrival is dropped and counted, so an overloaded
/// engine cannot make the generator itself grow without limit.
pub const MAX_IN_FLIGHT: usize = 4096;

/// What the generator did, for its summary line and for tests.
#[derive(Debug, Default)]
pub struct DriveStats {
    pub sent: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub gave_up: AtomicU64,
    pub dropped: AtomicU64,
}

/// A running generator; [`Driver::shutdown`] stops it and abandons requests in flight,
/// [`Driver::drain`] lets them finish first.
pub struct Driver {
    stop: watch::Sender<Stop>,
    task: Option<JoinHandle<()>>,
    pub stats: Arc<DriveStats>,
}

/// What the generator is told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Run,
    /// No new arrivals; the requests in flight go on to their end (or their give-up).
    Drain,
    /// Every request in flight is dropped, as clients that all go away at once.
    Abandon,
}

impl Driver {
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(Stop::Abandon);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }

    /// Stops sending and waits up to `grace` for the requests in flight to end, then
    /// abandons the rest. Returns whether every request ended within `grace`. A measurement
    /// that compares what the clients saw with the engine's truth uses this, so that the
    /// end of the run does not turn every queued request into an abort.
    pub async fn drain(mut self, grace: Duration) -> bool {
        let _ = self.stop.send(Stop::Drain);
        let Some(mut task) = self.task.take() else { return true };
        match tokio::time::timeout(grace, &mut task).await {
            Ok(_) => true,
            Err(_) => {
                let _ = self.stop.send(Stop::Abandon);
                let _ = task.await;
                false
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.stop.send(Stop::Abandon);
    }
}

/// Starts sending `cfg`'s workload to `base` (e.g. `http://127.0.0.1:8001`) at `speed`×
/// wall time, on the current tokio runtime.
pub fn start(cfg: &SimConfig, base: &str, speed: f64) -> Result<Driver, RunError> {
    if !(speed.is_finite() && speed > 0.0) {
        return Err(RunError::DriveSpeed(speed));
    }
    // reqwest's TLS backend needs a process-wide crypto provider even for plain http; without
    // one, building the client panics.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().tcp_nodelay(true).build().map_err(RunError::DriveClient)?;
    let url = format!("{}/v1/chat/completions", base.trim_end_matches('/'));
    let (stop, stop_rx) = watch::channel(Stop::Run);
    let stats = Arc::new(DriveStats::default());
    let arrivals = ArrivalGen::new(cfg);
    let ctx = Arc::new(Ctx { client, url, model: cfg.model.clone(), speed, stats: stats.clone() });
    let task = tokio::spawn(run(arrivals, ctx, stop_rx));
    Ok(Driver { stop, task: Some(task), stats })
}

struct Ctx {
    client: reqwest::Client,
    url: String,
    model: String,
    speed: f64,
    stats: Arc<DriveStats>,
}

async fn run(mut arrivals: ArrivalGen, ctx: Arc<Ctx>, mut stop: watch::Receiver<Stop>) {
    let started = Instant::now();
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut requests = tokio::task::JoinSet::new();
    while let Some(spec) = arrivals.pop() {
        let at = started + Duration::from_secs_f64(spec.arrival / ctx.speed);
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => {}
            _ = stop.wait_for(|s| *s != Stop::Run) => break,
        }
        // Reap finished tasks so the set holds only what is in flight.
        while requests.try_join_next().is_some() {}
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            ctx.stats.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let ctx = ctx.clone();
        let give_up = spec.abort_at.map(|t| started + Duration::from_secs_f64(t / ctx.speed));
        requests.spawn(async move {
            let _permit = permit;
            one(&ctx, &spec, give_up).await;
        });
    }
    if *stop.borrow() == Stop::Drain {
        let all_done = async { while requests.join_next().await.is_some() {} };
        tokio::select! {
            _ = all_done => {}
            _ = stop.wait_for(|s| *s == Stop::Abandon) => {}
        }
    }
    requests.abort_all();
}

/// Sends one request and reads its stream to the end, or until the client gives up.
async fn one(ctx: &Ctx, spec: &RequestSpec, give_up: Option<Instant>) {
    ctx.stats.sent.fetch_add(1, Ordering::Relaxed);
    let body = serde_json::json!({
        "model": ctx.model,
        "messages": [{"role": "user", "content": prompt_text(spec.prompt)}],
        "max_tokens": spec.output.max(1),
        "ignore_eos": true,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let exchange = async {
        let resp = ctx
            .client
            .post(&ctx.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|_| ())?;
        if !resp.status().is_success() {
            return Err(());
        }
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            chunk.map_err(|_| ())?;
        }
        Ok(())
    };
    let outcome = match give_up {
        Some(at) => tokio::select! {
            r = exchange => Some(r),
            _ = tokio::time::sleep_until(at.into()) => None,
        },
        None => Some(exchange.await),
    };
    let counter = match outcome {
        Some(Ok(())) => &ctx.stats.completed,
        Some(Err(())) => &ctx.stats.failed,
        None => &ctx.stats.gave_up,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Chat content the simulator's API counts, with its 4 tokens per message, as `tokens`
/// prompt tokens: one 4-character word per token (docs/simulator.md#the-openai-api).
/// A prompt shorter than 5 tokens gets one word.
pub fn prompt_text(tokens: u32) -> String {
    "tok ".repeat(tokens.saturating_sub(4).max(1) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_text_counts_as_the_drawn_prompt_length() {
        for n in [5, 6, 400, 3000] {
            // The simulator's count: 4 per chat message plus one per 4 characters.
            assert_eq!(crate::api::text_tokens(&prompt_text(n)) + 4, n, "{n}");
        }
        assert_eq!(prompt_text(1), "tok ");
    }

    fn load(output: f64) -> SimConfig {
        let mut c = SimConfig::profile(crate::config::Profile::Steady);
        c.arrivals.rate = 20.0;
        c.workload.abort_fraction = 0.0;
        c.workload.output_median = output;
        c.workload.output_sigma = 0.0;
        c
    }

    async fn engine(load: &SimConfig) -> crate::live::LiveHandle {
        let mut engine = load.clone();
        engine.apply_profile(crate::config::Profile::None);
        crate::live::serve(engine, "127.0.0.1:0".parse().unwrap(), 1.0).await.unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn drain_lets_requests_in_flight_end_and_shutdown_drops_them() {
        // 20 tokens at ~11 ms a step: every request is in flight for a few hundred ms.
        let short = load(20.0);
        let sim = engine(&short).await;
        let d = start(&short, &format!("http://{}", sim.addr), 1.0).unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        let stats = d.stats.clone();
        assert!(d.drain(Duration::from_secs(20)).await, "every request ends well within the grace");
        let sent = stats.sent.load(Ordering::Relaxed);
        assert!(sent >= 3, "{stats:?}");
        assert_eq!(stats.completed.load(Ordering::Relaxed), sent, "{stats:?}");
        sim.shutdown().await;

        // 1,000 tokens take over 10 s: shutdown does not wait for them, nor does a short grace.
        let long = load(1000.0);
        let sim = engine(&long).await;
        for grace in [None, Some(Duration::from_millis(200))] {
            let d = start(&long, &format!("http://{}", sim.addr), 1.0).unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let stats = d.stats.clone();
            let t = Instant::now();
            match grace {
                None => d.shutdown().await,
                Some(g) => assert!(!d.drain(g).await, "requests were still running"),
            }
            assert!(t.elapsed() < Duration::from_secs(2), "{grace:?}: {:?}", t.elapsed());
            assert!(stats.sent.load(Ordering::Relaxed) >= 1);
            assert_eq!(stats.completed.load(Ordering::Relaxed), 0, "{grace:?}: {stats:?}");
        }
        sim.shutdown().await;
    }
}
