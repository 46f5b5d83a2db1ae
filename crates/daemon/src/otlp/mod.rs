//! The engine-trace receiver: OTLP/HTTP `POST /v1/traces` on `otlp.listen`
//! (docs/request-path.md, "Engine traces (OTLP)").
//!
//! vLLM, TRT-LLM and SGLang export one span per finished request. Each export is read
//! under the body limit and pace ([`decode`]), walked span by span into a bounded
//! [`batch::Batch`] off the async workers ([`wire`], [`json`]), each span given to the
//! target whose service it came from ([`route`]), mapped by the pure core (`request::span`)
//! and pushed into the request [`Inbox`]; what becomes no record is counted by reason
//! ([`metrics`]). The listener runs on the daemon's HTTP server helper, with timeouts and
//! a connection cap of its own inside the descriptor budget.

pub mod batch;
pub mod decode;
mod json;
pub mod metrics;
pub mod route;
mod wire;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::config::{OtlpConfig, Target};
use crate::inbox::Inbox;
use crate::listen::server::{ServerLimits, serve};
use crate::request::{NotRecorded, record_from_span};
use batch::Batch;
use metrics::{Dropped, Export, OtlpStats};
use route::Routes;

/// Exports decoded at once, on the blocking pool: half the cores, at least one and at most
/// four, so that decoding never takes every core from scrapes and /metrics. Each holds at
/// most `otlp.body_limit` of kept spans besides its body.
fn decode_permits() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get() / 2).clamp(1, 4)
}

/// How long an export whose body has arrived waits for a decoder before it is answered
/// 429 with `Retry-After`.
const DECODE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Distinct unknown service names and invalid attributes logged, after which they are
/// only counted (a misconfigured fleet must not flood the log).
const MAX_LOGGED: usize = 32;

/// A bound, not yet serving, receiver.
pub struct Receiver {
    listener: Arc<TcpListener>,
    state: Arc<Ingest>,
    config: OtlpConfig,
}

/// What the running receiver shares with the daemon.
#[derive(Clone)]
pub struct Handle {
    pub addr: SocketAddr,
    state: Arc<Ingest>,
}

impl Handle {
    pub fn stats(&self) -> Arc<OtlpStats> {
        self.state.stats.clone()
    }

    /// Every record the receiver has queued, in order, once a test asked for them
    /// ([`crate::seen::keep_records`]).
    #[cfg(feature = "test-hooks")]
    pub fn records(&self) -> Vec<crate::request::RequestRecord> {
        self.state.seen.records()
    }
}

impl Receiver {
    /// Binds `otlp.listen`; a taken address is a setup error that names the key.
    pub async fn bind(config: &OtlpConfig, targets: &[Target], inbox: Inbox) -> std::io::Result<Receiver> {
        let listener = Arc::new(Receiver::socket(config).await?);
        let stats = Arc::new(OtlpStats::new(targets.iter().map(|t| t.name.clone()).collect()));
        Ok(Receiver::on(listener, config, targets, inbox, stats))
    }

    /// Binds `otlp.listen`; the error names the key.
    pub async fn socket(config: &OtlpConfig) -> std::io::Result<TcpListener> {
        TcpListener::bind(config.listen).await.map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot listen for OTLP spans on {} (otlp.listen): {e}", config.listen),
            )
        })
    }

    /// A receiver on a socket already bound, counting in `stats` (whose targets must be
    /// `targets`, in order): a config reload starts one with new settings or targets on the
    /// socket the previous one served, or on a new one when `otlp.listen` changed.
    pub fn on(
        listener: Arc<TcpListener>,
        config: &OtlpConfig,
        targets: &[Target],
        inbox: Inbox,
        stats: Arc<OtlpStats>,
    ) -> Receiver {
        let state = Arc::new(Ingest {
            routes: Routes::new(targets),
            inbox,
            stats,
            body_limit: config.body_limit,
            decoding: Arc::new(Semaphore::new(decode_permits())),
            logged: Mutex::default(),
            #[cfg(feature = "test-hooks")]
            seen: crate::seen::Seen::default(),
        });
        Receiver { listener, state, config: *config }
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` turns true, with at most `max_connections` client connections
    /// (`otlp.max_connections` fitted to the descriptor limit: crate::listen::fds).
    pub fn spawn(
        self,
        max_connections: usize,
        stop: watch::Receiver<bool>,
        tasks: &mut JoinSet<()>,
    ) -> std::io::Result<Handle> {
        let addr = self.listener.local_addr()?;
        let g = self.config.guards;
        let limits = ServerLimits {
            max_connections,
            header_read_timeout: g.header_read_timeout,
            idle_timeout: g.idle_timeout,
            body_read_timeout: g.body_read_timeout,
            date_header: true,
        };
        let router = Router::new().route("/v1/traces", post(export)).with_state(self.state.clone());
        tasks.spawn(serve(self.listener, router, limits, self.state.stats.conns.clone(), stop));
        tracing::info!(%addr, max_connections, "receiving OTLP/HTTP spans on /v1/traces");
        Ok(Handle { addr, state: self.state })
    }
}

/// The receiver's shared state.
struct Ingest {
    routes: Routes,
    inbox: Inbox,
    stats: Arc<OtlpStats>,
    body_limit: usize,
    decoding: Arc<Semaphore>,
    /// Unknown service names and invalid attributes already logged.
    logged: Mutex<HashSet<String>>,
    #[cfg(feature = "test-hooks")]
    seen: crate::seen::Seen,
}

/// How one export's spans fared.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    unknown_service: u64,
    invalid: u64,
    inbox_full: u64,
    future: u64,
    over_budget: u64,
}

impl Outcome {
    fn rejected(&self) -> u64 {
        self.unknown_service + self.invalid + self.inbox_full + self.future + self.over_budget
    }

    /// The `partial_success.error_message`: what was rejected and what to do about it.
    fn message(&self) -> String {
        let mut parts = Vec::new();
        if self.unknown_service > 0 {
            parts.push(format!(
                "{} from a service.name no target takes (set targets[].traces.service_name or OTEL_SERVICE_NAME)",
                self.unknown_service
            ));
        }
        if self.invalid > 0 {
            parts.push(format!(
                "{} with a gen_ai.latency or gen_ai.usage attribute that is not a usable number",
                self.invalid
            ));
        }
        if self.inbox_full > 0 {
            parts.push(format!("{} dropped because the request inbox was full", self.inbox_full));
        }
        if self.future > 0 {
            parts.push(format!(
                "{} ending more than {} s in the future of the receiver's clock (check the engine host's clock, e.g. its NTP sync)",
                self.future,
                crate::request::MAX_CLOCK_SKEW_MS / 1000
            ));
        }
        if self.over_budget > 0 {
            parts.push(format!(
                "{} past what one export may hold once decoded (otlp.body_limit); export smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)",
                self.over_budget
            ));
        }
        if parts.is_empty() { String::new() } else { format!("rejected LLM request spans: {}", parts.join("; ")) }
    }
}

async fn export(State(s): State<Arc<Ingest>>, headers: HeaderMap, body: Body) -> Response {
    match receive(&s, &headers, body).await {
        Ok((enc, outcome)) => {
            s.stats.export(Export::Ok);
            decode::success(enc, outcome.rejected(), outcome.message())
        }
        Err(reject) => {
            s.stats.export(reject.result);
            tracing::debug!(status = %reject.status, "OTLP export refused: {}", reject.message);
            reject.into_response()
        }
    }
}

async fn receive(
    s: &Arc<Ingest>,
    headers: &HeaderMap,
    body: Body,
) -> Result<(decode::Encoding, Outcome), decode::Reject> {
    let enc = decode::encoding(headers)?;
    let bytes = decode::body(body, headers, s.body_limit, enc).await?;
    // The semaphore is never closed, so acquiring fails only by timing out.
    let permit = match tokio::time::timeout(DECODE_WAIT, s.clone().decoding_permit()).await {
        Ok(Some(p)) => p,
        _ => return Err(decode::Reject::throttled(enc, DECODE_WAIT)),
    };
    // Decoding is CPU work proportional to the body: off the async workers, so that
    // /metrics and the scrapes never wait for it.
    let s = s.clone();
    let work = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let batch = decode::decode(enc, &bytes, s.body_limit)?;
        drop(bytes);
        Ok(s.ingest(&batch))
    });
    match work.await {
        Ok(r) => r.map(|outcome| (enc, outcome)),
        Err(e) => {
            Err(decode::Reject::new(Export::Undecodable, Some(enc), format!("the export could not be decoded: {e}")))
        }
    }
}

impl Ingest {
    async fn decoding_permit(self: Arc<Self>) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.decoding.clone().acquire_owned().await.ok()
    }

    /// Turns every span of one export into a record or a counted drop.
    fn ingest(&self, batch: &Batch) -> Outcome {
        let mut out = Outcome { over_budget: batch.over_budget, ..Outcome::default() };
        let mut not_llm = batch.not_llm;
        // A span from further ahead than the store accepts would be dropped there
        // unseen by the exporter; it is refused here, where partial_success can say so.
        let horizon_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_millis() as f64)
                + crate::request::MAX_CLOCK_SKEW_MS as f64;
        for (service, input) in batch.spans() {
            if !input.is_llm_request() {
                not_llm += 1;
                continue;
            }
            let Some(i) = self.routes.target_for(service) else {
                out.unknown_service += 1;
                let shown = service.map(label_sized);
                self.log_once(format!("service {}", shown.unwrap_or("")), || {
                    tracing::warn!(
                        service_name = shown.unwrap_or("(none)"),
                        "OTLP spans from a service.name no target takes are dropped; set targets[].traces.service_name to it (counted in llm_slo_otlp_spans_dropped_total{{reason=\"unknown_service\"}})"
                    )
                });
                continue;
            };
            let mut record = match record_from_span(input) {
                Ok(r) => r,
                Err(NotRecorded::Invalid(attr)) => {
                    out.invalid += 1;
                    self.log_once(format!("attr {attr}"), || {
                        tracing::warn!(attribute = attr, span = %input.name, "OTLP span dropped: the attribute is not a finite, non-negative number (or the span has no time)")
                    });
                    continue;
                }
                Err(NotRecorded::NotLlmRequest) => {
                    not_llm += 1;
                    continue;
                }
            };
            if record.finished_unix * 1000.0 > horizon_ms {
                out.future += 1;
                self.log_once("future".into(), || {
                    tracing::warn!(span = %input.name, finished_unix = record.finished_unix, "OTLP span dropped: it ends in the future of this host's clock; check the clocks of the engine's host and this one (counted in llm_slo_otlp_spans_dropped_total{{reason=\"future\"}})")
                });
                continue;
            }
            let target = self.routes.target(i);
            record.target = target.name.clone();
            if record.model.is_empty() {
                record.model = target.model.clone();
            }
            #[cfg(feature = "test-hooks")]
            let copy = crate::seen::keeping().then(|| record.clone());
            if self.inbox.push(record) {
                self.stats.received(i);
                #[cfg(feature = "test-hooks")]
                if let Some(copy) = copy {
                    self.seen.keep(copy);
                }
            } else {
                out.inbox_full += 1;
            }
        }
        for (why, n) in [
            (Dropped::NotLlmRequest, not_llm),
            (Dropped::UnknownService, out.unknown_service),
            (Dropped::Invalid, out.invalid),
            (Dropped::InboxFull, out.inbox_full),
            (Dropped::Future, out.future),
            (Dropped::OverBudget, out.over_budget),
        ] {
            if n > 0 {
                self.stats.dropped(why, n);
            }
        }
        out
    }

    fn log_once(&self, key: String, log: impl FnOnce()) {
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.len() < MAX_LOGGED && logged.insert(key) {
            log();
        }
    }
}

/// A sender's `service.name` as logged and remembered: at most a label value's length, since
/// the sender chooses it (docs/limits.md).
fn label_sized(s: &str) -> &str {
    let mut end = s.len().min(crate::parse::MAX_LABEL_VALUE_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests;
