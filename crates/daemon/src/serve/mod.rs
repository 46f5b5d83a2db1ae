//! The HTTP side of the daemon (axum): `/metrics`, `/healthz`, `/readyz`,
//! `/api/v1/report` and the status page at `/` ([`page`]), all read from the latest
//! published [`Report`] without blocking the evaluator, and the runbooks at `/runbooks/`
//! ([`runbooks`]). [`server`] serves them with timeouts and a connection cap. /metrics is
//! rendered at most once per report, by its first GET ([`cache`]).

pub mod cache;
pub mod catalog;
pub mod exposition;
pub mod page;
pub mod process;
pub mod reload;
pub mod runbooks;

/// The listener machinery, under its former paths (crate::listen).
pub use crate::listen::{fds, paced, server};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use goodput_core::export::{Collector, Emit, Family, Labels, NoLabels, Unit};

use crate::deliver::DeliveryMetrics;
use crate::export;
use crate::otlp::metrics::OtlpStats;
use crate::report::Report;
use crate::tap::metrics::TapMetrics;
use cache::Rendered;
use server::{Closed, ConnStats};

/// What the handlers read: the latest report and its /metrics rendering, whether one has
/// been published yet, and the alert-delivery, HTTP server and OTLP receiver counters, which
/// are live rather than part of a report, and the status page's history of recent reports.
/// What a config reload may replace (the destinations, the receiver, the taps, the labels,
/// the snapshot's counters) is behind an `ArcSwap`, read afresh by each request.
#[derive(Clone)]
pub struct Shared {
    pub report: Arc<ArcSwap<Report>>,
    /// The report's families as /metrics serves them: stored by [`Shared::publish`], rendered
    /// by the first GET after it.
    pub metrics: Arc<ArcSwap<Rendered>>,
    pub ready: Arc<AtomicBool>,
    pub delivery: Arc<ArcSwap<Option<DeliveryMetrics>>>,
    pub http: Arc<ConnStats>,
    /// `None` when `otlp:` is not configured.
    pub otlp: Arc<ArcSwap<Option<Arc<OtlpStats>>>>,
    /// The taps' health counters (crate::tap::metrics).
    pub taps: Arc<ArcSwap<TapMetrics>>,
    pub page: Arc<page::StatusPage>,
    /// `external_labels`, added to every series on /metrics ([`Shared::set_external_labels`]).
    pub external_labels: Arc<ArcSwap<Vec<(String, String)>>>,
    /// The state snapshot's counters; `None` without `state_dir`.
    pub state: Arc<ArcSwap<Option<Arc<crate::state::metrics::StateStats>>>>,
    /// The config reloads' outcome (crate::daemon::reload).
    pub reload: Arc<reload::ReloadStats>,
    /// The wall clock's steps (crate::daemon::clock).
    pub clock: Arc<crate::daemon::clock::ClockStats>,
    /// Discovery's limit, refusals and failed reads (crate::discovery::limits).
    pub discovery: Arc<crate::discovery::limits::DiscoveryStats>,
}

impl Shared {
    pub fn new() -> Shared {
        let report = Arc::new(Report::default());
        Shared {
            metrics: Arc::new(ArcSwap::from_pointee(rendering(report.clone(), Arc::default()))),
            report: Arc::new(ArcSwap::new(report)),
            ready: Arc::new(AtomicBool::new(false)),
            delivery: Arc::default(),
            http: Arc::default(),
            otlp: Arc::default(),
            taps: Arc::default(),
            page: Arc::default(),
            external_labels: Arc::default(),
            state: Arc::default(),
            reload: Arc::default(),
            clock: Arc::default(),
            discovery: Arc::default(),
        }
    }

    /// Sets the labels every /metrics series carries: at start, and when a reload changes
    /// them (the latest report is rendered again with them).
    pub fn set_external_labels(&self, labels: &[(String, String)]) {
        self.external_labels.store(Arc::new(labels.to_vec()));
        let report = self.report.load_full();
        self.metrics.store(Arc::new(rendering(report, self.external_labels.load_full())));
    }

    /// Publishes a new report; readers see it on their next request. The status page's
    /// history takes its point first, so that a page never shows a report its charts lack.
    /// The report's /metrics families are rendered by the first GET that wants them, and the
    /// previous report's rendering is dropped here (once the GETs sending it are done).
    pub fn publish(&self, report: Report) {
        self.page.record(&report);
        let report = Arc::new(report);
        self.metrics.store(Arc::new(rendering(report.clone(), self.external_labels.load_full())));
        self.report.store(report);
        self.ready.store(true, Ordering::Release);
    }
}

impl Default for Shared {
    fn default() -> Self {
        Shared::new()
    }
}

pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/", get(status_page))
        .route("/status.css", get(|| async { page::stylesheet() }))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/v1/report", get(report))
        .route("/api/v1/alerts", get(alerts))
        .route("/api/v1/config", get(config))
        .route("/runbooks", get(runbooks::redirect))
        .route("/runbooks/", get(runbooks::runbooks))
        .route("/runbooks/runbooks.css", get(runbooks::stylesheet))
        .with_state(shared)
}

goodput_core::label_set! {
    pub ClosedReason = [reason: Closed];
    pub Build = [version, commit];
}

/// The HTTP server's families on /metrics (docs/metrics.md).
pub const HTTP_FAMILIES: &[Family] = &[
    Family::gauge::<NoLabels>(HTTP_CONNECTIONS, Unit::Count, "Client connections open to this daemon's HTTP server."),
    Family::gauge::<NoLabels>(
        HTTP_CONNECTIONS_LIMIT,
        Unit::Count,
        "The connection cap in force: server.max_connections, lowered to fit the descriptor limit.",
    ),
    Family::counter::<ClosedReason>(
        HTTP_CONNECTIONS_CLOSED,
        Unit::Count,
        "Client connections the server closed, by reason: header_timeout, idle_timeout, body_timeout (a request body stalled or trickled), evicted (to make room at the cap) or refused (at the cap, all busy).",
    ),
];

const HTTP_CONNECTIONS: &str = "llm_slo_http_connections";
const HTTP_CONNECTIONS_LIMIT: &str = "llm_slo_http_connections_limit";
const HTTP_CONNECTIONS_CLOSED: &str = "llm_slo_http_connections_closed_total";

/// The HTTP server's connections, read at each GET of /metrics.
pub struct HttpServer<'a>(pub &'a ConnStats);

impl Collector for HttpServer<'_> {
    fn families(&self) -> &'static [Family] {
        HTTP_FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        out.sample(HTTP_CONNECTIONS, Labels::new(&[], &[]), self.0.open() as f64);
        out.sample(HTTP_CONNECTIONS_LIMIT, Labels::new(&[], &[]), self.0.limit() as f64);
        for c in Closed::ALL {
            out.sample(HTTP_CONNECTIONS_CLOSED, Labels::new(&[("reason", c.as_str())], &[]), self.0.closed(c) as f64);
        }
    }
}

/// Always 1; its labels say which build is running, for joins and rollout dashboards.
pub const BUILD_INFO: &[Family] = &[Family::gauge::<Build>(
    "llm_slo_build_info",
    Unit::Flag,
    "The goodput build serving these metrics: its version and the commit it was built from.",
)];

/// `llm_slo_build_info`: the last family of the report's part of /metrics.
pub struct BuildInfo;

impl Collector for BuildInfo {
    fn families(&self) -> &'static [Family] {
        BUILD_INFO
    }

    fn collect(&self, out: &mut dyn Emit) {
        out.sample(
            BUILD_INFO[0].name,
            Labels::new(&[("version", crate::VERSION), ("commit", crate::COMMIT)], &[]),
            1.0,
        );
    }
}

/// The full /metrics body for a report, rendered afresh: the report's families, then the
/// alert-delivery, HTTP server and OTLP receiver counters and process metrics. A GET serves
/// the same bytes from [`Shared::metrics`] plus [`render_live`], without this call.
pub fn render_metrics(
    report: &Report,
    delivery: Option<&DeliveryMetrics>,
    http: &ConnStats,
    otlp: Option<&OtlpStats>,
    external: &[(String, String)],
) -> String {
    let mut out = render_report(report, external);
    out.push_str(&render_live(delivery, http, otlp, &TapMetrics::default(), external));
    out
}

/// The report's families and the build info, joined: what a GET serves before the live part.
/// Tests and benchmarks read it; the daemon serves [`render_report_chunks`] unjoined.
pub fn render_report(report: &Report, external: &[(String, String)]) -> String {
    let chunks = render_report_chunks(report, external);
    let mut out = String::with_capacity(chunks.iter().map(|c| c.len()).sum());
    for c in &chunks {
        out.push_str(c);
    }
    out
}

/// The report's families and the build info, a buffer per family: everything on /metrics that
/// changes only when a report is published. Written straight from the report
/// (export::emit_targets), a sample's labels borrowed from it; HELP and TYPE from the
/// report's registry (export::report_registry).
pub fn render_report_chunks(report: &Report, external: &[(String, String)]) -> Vec<String> {
    let registry = export::report_registry();
    let meta = |name: &str| registry.meta(name).or_else(|| (name == BUILD_INFO[0].name).then(|| BUILD_INFO[0].meta()));
    let mut families = exposition::Families::new(external, &meta);
    families.section(export::target_rank);
    export::emit_targets(&report.targets, &mut families);
    families.section(export::report_rank);
    export::emit_report_wide(report, &mut families);
    families.section(|_| None);
    BuildInfo.collect(&mut families);
    families.finish()
}

/// `report`'s /metrics families, to be rendered by the first GET that wants them.
fn rendering(report: Arc<Report>, external: Arc<Vec<(String, String)>>) -> Rendered {
    Rendered::new(move || render_report_chunks(&report, &external).into_iter().map(bytes::Bytes::from).collect())
}

/// Appends the families of `collectors`, one after the other, each collector's in the order
/// it writes them, with the HELP and TYPE each declares. No collector may write a family
/// another declares: each family's lines stay together.
pub fn render_collectors(out: &mut String, collectors: &[&dyn Collector], external: &[(String, String)]) {
    let meta = |name: &str| collectors.iter().flat_map(|c| c.families()).find(|f| f.name == name).map(|f| f.meta());
    let mut families = exposition::Families::new(external, &meta);
    for c in collectors {
        families.section(|_| None);
        c.collect(&mut families);
    }
    for chunk in families.finish() {
        out.push_str(&chunk);
    }
}

/// The families that change between ticks, rendered per GET: alert delivery, the HTTP
/// server, the OTLP receiver, process metrics and the taps. None shares a name with a
/// report family, so they follow the cached part without splitting a family.
pub fn render_live(
    delivery: Option<&DeliveryMetrics>,
    http: &ConnStats,
    otlp: Option<&OtlpStats>,
    taps: &TapMetrics,
    external: &[(String, String)],
) -> String {
    let mut collectors: Vec<&dyn Collector> = Vec::with_capacity(5);
    collectors.extend(delivery.map(|d| d as &dyn Collector));
    let http = HttpServer(http);
    collectors.push(&http);
    collectors.extend(otlp.map(|o| o as &dyn Collector));
    collectors.push(&process::Process);
    collectors.push(taps);
    let mut out = String::with_capacity(4096);
    render_collectors(&mut out, &collectors, external);
    out
}

/// The cached report families plus the live ones, gzipped when the client accepts it. Only
/// the first GET after a tick renders the report's families, and the first gzip GET deflates
/// them, on the blocking pool; GETs arriving meanwhile wait for that one rendering.
async fn metrics(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let rendered = s.metrics.load_full();
    let (delivery, otlp, taps, external) =
        (s.delivery.load_full(), s.otlp.load_full(), s.taps.load_full(), s.external_labels.load_full());
    let mut live = render_live(Option::as_ref(&delivery), &s.http, Option::as_deref(&otlp), &taps, &external);
    let state = s.state.load_full();
    let mut daemon: Vec<&dyn Collector> = Vec::with_capacity(4);
    daemon.extend(Option::as_deref(&state).map(|s| s as &dyn Collector));
    daemon.extend([&*s.reload as &dyn Collector, &*s.clock, &*s.discovery]);
    render_collectors(&mut live, &daemon, &external);
    let gzip = headers.get_all(header::ACCEPT_ENCODING).iter().any(|v| v.to_str().is_ok_and(cache::accepts_gzip));
    let vary = (header::VARY, "Accept-Encoding");
    if !rendered.is_rendered() || (gzip && !rendered.has_gzip()) {
        let r = rendered.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || r.prepare(gzip)).await {
            return (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render /metrics: {e}\n")).into_response();
        }
    }
    if !gzip {
        return ([(header::CONTENT_TYPE, CONTENT_TYPE_TEXT), vary], Body::new(rendered.plain(live))).into_response();
    }
    let body = Body::new(rendered.gzip(&live));
    ([(header::CONTENT_TYPE, CONTENT_TYPE_TEXT), (header::CONTENT_ENCODING, "gzip"), vary], body).into_response()
}

/// Rendered on the blocking pool: a page of 100 targets takes milliseconds, which the
/// scrape and evaluation tasks sharing the async workers should not wait for.
async fn status_page(State(s): State<Shared>) -> Response {
    let report = s.report.load_full();
    let page = s.page.clone();
    match tokio::task::spawn_blocking(move || page.response(&report)).await {
        Ok(r) => r,
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render the status page: {e}\n")).into_response(),
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<Shared>) -> Response {
    if s.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: no evaluation has completed yet\n").into_response()
    }
}

/// The running config in normal form (serve::reload).
async fn config(State(s): State<Shared>) -> Response {
    reload::config(State(s.reload.clone())).await
}

/// Pending and firing alerts, shaped like Prometheus's `/api/v1/alerts`, and beside them the
/// rules that cannot judge yet because their windows are not covered (a field Prometheus
/// clients ignore; docs/alerts.md#after-a-restart).
async fn alerts(State(s): State<Shared>) -> Response {
    let report = s.report.load_full();
    let waiting: Vec<_> = report.alert_readiness.iter().filter(|r| !r.ready).collect();
    let body =
        serde_json::json!({"status": "success", "data": {"alerts": report.alerts, "waiting_for_coverage": waiting}});
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// `GET /api/v1/report[?target=NAME]`.
#[derive(serde::Deserialize)]
struct ReportQuery {
    target: Option<String>,
}

/// The whole report, or with `?target=NAME` the same shape holding only that target's entries
/// (docs/config.md#http-endpoints): a fleet's report is megabytes.
async fn report(State(s): State<Shared>, Query(q): Query<ReportQuery>) -> Response {
    let report = s.report.load_full();
    let body = match q.target.as_deref() {
        None => serde_json::to_vec(report.as_ref()),
        Some(name) => match report.for_target(name) {
            Some(view) => serde_json::to_vec(&view),
            None => {
                return (StatusCode::NOT_FOUND, format!("no target named {name:?} in the report\n")).into_response();
            }
        },
    };
    match body {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the report: {e}\n")).into_response(),
    }
}
