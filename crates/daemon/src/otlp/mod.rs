//! The engine-trace receiver: OTLP/HTTP `POST /v1/traces` on `otlp.listen`
//! (docs/request-path.md, "Engine traces (OTLP)").
//!
//! vLLM, TRT-LLM and SGLang export one span per finished request. Each export is decoded
//! ([`decode`]), each span is given to the target whose service it came from ([`route`]),
//! mapped by the pure core (`request::span`) and pushed into the request [`Inbox`]; what
//! becomes no record is counted by reason ([`metrics`]). The listener runs on the daemon's
//! own HTTP server helper, with its timeouts and a connection cap of its own.

pub mod decode;
pub mod metrics;
pub mod route;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::config::{OtlpConfig, Target};
use crate::request::{NotRecorded, record_from_span};
use crate::requests::Inbox;
use crate::serve::server::{ConnStats, ServerLimits, serve};
use metrics::{Dropped, Export, OtlpStats};
use route::Routes;

/// Engines export from a handful of connections each; far more is a misdirected client.
pub const MAX_CONNECTIONS: usize = 64;

/// Export requests decoded at once. Decoding is CPU work on a sidecar's small share; the
/// cap also bounds the memory of decoded batches to this many times `otlp.body_limit`.
const DECODE_PERMITS: usize = 4;

/// Distinct unknown service names and invalid attributes logged, after which they are
/// only counted (a misconfigured fleet must not flood the log).
const MAX_LOGGED: usize = 32;

/// A bound, not yet serving, receiver.
pub struct Receiver {
    listener: TcpListener,
    state: Arc<Ingest>,
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

    /// Every record the receiver has queued, in order (the inbox itself is drained by the
    /// evaluator); capped at [`test_hooks::KEPT`].
    #[cfg(feature = "test-hooks")]
    pub fn records(&self) -> Vec<crate::request::RequestRecord> {
        self.state.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Receiver {
    /// Binds `otlp.listen`; a taken address is a setup error that names the key.
    pub async fn bind(config: &OtlpConfig, targets: &[Target], inbox: Inbox) -> std::io::Result<Receiver> {
        let listener = TcpListener::bind(config.listen).await.map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot listen for OTLP spans on {} (otlp.listen): {e}", config.listen),
            )
        })?;
        let names = targets.iter().map(|t| t.name.clone()).collect();
        let state = Arc::new(Ingest {
            routes: Routes::new(targets),
            inbox,
            stats: Arc::new(OtlpStats::new(names)),
            body_limit: config.body_limit,
            decoding: Semaphore::new(DECODE_PERMITS),
            logged: Mutex::default(),
            #[cfg(feature = "test-hooks")]
            seen: Mutex::default(),
        });
        Ok(Receiver { listener, state })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` turns true.
    pub fn spawn(
        self,
        limits: ServerLimits,
        stop: watch::Receiver<bool>,
        tasks: &mut JoinSet<()>,
    ) -> std::io::Result<Handle> {
        let addr = self.listener.local_addr()?;
        let limits = ServerLimits { max_connections: limits.max_connections.min(MAX_CONNECTIONS), ..limits };
        let router = Router::new().route("/v1/traces", post(export)).with_state(self.state.clone());
        tasks.spawn(serve(self.listener, router, limits, Arc::new(ConnStats::default()), stop));
        tracing::info!(%addr, "receiving OTLP/HTTP spans on /v1/traces");
        Ok(Handle { addr, state: self.state })
    }
}

/// The receiver's shared state.
struct Ingest {
    routes: Routes,
    inbox: Inbox,
    stats: Arc<OtlpStats>,
    body_limit: usize,
    decoding: Semaphore,
    /// Unknown service names and invalid attributes already logged.
    logged: Mutex<HashSet<String>>,
    #[cfg(feature = "test-hooks")]
    seen: Mutex<Vec<crate::request::RequestRecord>>,
}

#[cfg(feature = "test-hooks")]
mod test_hooks {
    /// Records kept for [`super::Handle::records`].
    pub const KEPT: usize = 100_000;
}

/// How one export's spans fared.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    unknown_service: u64,
    invalid: u64,
    inbox_full: u64,
}

impl Outcome {
    fn rejected(&self) -> u64 {
        self.unknown_service + self.invalid + self.inbox_full
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

async fn receive(s: &Ingest, headers: &HeaderMap, body: Body) -> Result<(decode::Encoding, Outcome), decode::Reject> {
    let enc = decode::encoding(headers)?;
    let bytes = decode::body(body, headers, s.body_limit, enc).await?;
    // The semaphore is never closed, so acquiring cannot fail.
    let _permit = s.decoding.acquire().await.ok();
    let request = decode::decode(enc, &bytes)?;
    drop(bytes);
    Ok((enc, s.ingest(&request)))
}

impl Ingest {
    /// Turns every span of one export into a record or a counted drop.
    fn ingest(&self, request: &ExportTraceServiceRequest) -> Outcome {
        let mut out = Outcome::default();
        let mut not_llm = 0u64;
        for rs in &request.resource_spans {
            let service = route::service_name(rs.resource.as_ref());
            for span in rs.scope_spans.iter().flat_map(|ss| &ss.spans) {
                let input = route::span_input(span);
                if !input.is_llm_request() {
                    not_llm += 1;
                    continue;
                }
                let Some(i) = self.routes.target_for(service) else {
                    out.unknown_service += 1;
                    self.log_once(format!("service {}", service.unwrap_or("")), || {
                        tracing::warn!(
                            service_name = service.unwrap_or("(none)"),
                            "OTLP spans from a service.name no target takes are dropped; set targets[].traces.service_name to it (counted in llm_slo_otlp_spans_dropped_total{{reason=\"unknown_service\"}})"
                        )
                    });
                    continue;
                };
                let mut record = match record_from_span(&input) {
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
                let target = self.routes.target(i);
                record.target = target.name.clone();
                if record.model.is_empty() {
                    record.model = target.model.clone();
                }
                #[cfg(feature = "test-hooks")]
                let copy = record.clone();
                if self.inbox.push(record) {
                    self.stats.received(i);
                    #[cfg(feature = "test-hooks")]
                    {
                        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                        if seen.len() < test_hooks::KEPT {
                            seen.push(copy);
                        }
                    }
                } else {
                    out.inbox_full += 1;
                }
            }
        }
        for (why, n) in [
            (Dropped::NotLlmRequest, not_llm),
            (Dropped::UnknownService, out.unknown_service),
            (Dropped::Invalid, out.invalid),
            (Dropped::InboxFull, out.inbox_full),
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

#[cfg(test)]
mod tests;
