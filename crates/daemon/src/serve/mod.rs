//! The HTTP side of the daemon (axum): `/metrics`, `/healthz`, `/readyz`,
//! `/api/v1/report` and the status page at `/` ([`page`]), all read from the latest
//! published [`Report`] without blocking the evaluator. [`server`] serves them with timeouts
//! and a connection cap. /metrics is rendered at most once per report, by its first GET
//! ([`cache`]).

pub mod cache;
pub mod exposition;
pub mod fds;
pub mod page;
pub mod process;
pub mod reload;
pub mod server;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::deliver::DeliveryMetrics;
use crate::deliver::metrics as delivery_metrics;
use crate::export;
use crate::otlp::metrics::{self as otlp_metrics, OtlpStats};
use crate::report::Report;
use crate::tap::metrics::{self as tap_metrics, TapMetrics};
use cache::Rendered;
use exposition::Line;
use server::{Closed, ConnStats};

/// What the handlers read: the latest report and its /metrics rendering, whether one has
/// been published yet, and the alert-delivery, HTTP server and OTLP receiver counters, which
/// are live rather than part of a report, and the status page's history of recent reports.
#[derive(Clone)]
pub struct Shared {
    pub report: Arc<ArcSwap<Report>>,
    /// The report's families as /metrics serves them: stored by [`Shared::publish`], rendered
    /// by the first GET after it.
    pub metrics: Arc<ArcSwap<Rendered>>,
    pub ready: Arc<AtomicBool>,
    pub delivery: Option<DeliveryMetrics>,
    pub http: Arc<ConnStats>,
    /// `None` when `otlp:` is not configured.
    pub otlp: Option<Arc<OtlpStats>>,
    /// The taps' health counters (crate::tap::metrics).
    pub taps: TapMetrics,
    pub page: Arc<page::StatusPage>,
    /// `external_labels`, added to every series on /metrics ([`Shared::set_external_labels`]).
    pub external_labels: Arc<[(String, String)]>,
    /// The state snapshot's counters; `None` without `state_dir`.
    pub state: Option<Arc<crate::state::metrics::StateStats>>,
    /// The config reloads' outcome (crate::daemon::reload).
    pub reload: Arc<reload::ReloadStats>,
}

impl Shared {
    pub fn new() -> Shared {
        let report = Arc::new(Report::default());
        Shared {
            metrics: Arc::new(ArcSwap::from_pointee(rendering(report.clone(), Arc::new([])))),
            report: Arc::new(ArcSwap::new(report)),
            ready: Arc::new(AtomicBool::new(false)),
            delivery: None,
            http: Arc::default(),
            otlp: None,
            taps: TapMetrics::default(),
            page: Arc::default(),
            external_labels: Arc::new([]),
            state: None,
            reload: Arc::default(),
        }
    }

    /// Sets the labels every /metrics series carries, before the first report is published.
    pub fn set_external_labels(&mut self, labels: &[(String, String)]) {
        self.external_labels = labels.into();
        let report = self.report.load_full();
        self.metrics.store(Arc::new(rendering(report, self.external_labels.clone())));
    }

    /// Publishes a new report; readers see it on their next request. The status page's
    /// history takes its point first, so that a page never shows a report its charts lack.
    /// The report's /metrics families are rendered by the first GET that wants them, and the
    /// previous report's rendering is dropped here (once the GETs sending it are done).
    pub fn publish(&self, report: Report) {
        self.page.record(&report);
        let report = Arc::new(report);
        self.metrics.store(Arc::new(rendering(report.clone(), self.external_labels.clone())));
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
        .with_state(shared)
}

/// The HTTP server's families on /metrics (docs/metrics.md), with HELP and TYPE.
pub const HTTP_FAMILIES: &[(&str, &str, &str)] = &[
    ("llm_slo_http_connections", "Client connections open to this daemon's HTTP server.", "gauge"),
    (
        "llm_slo_http_connections_limit",
        "The connection cap in force: server.max_connections, lowered to fit the descriptor limit.",
        "gauge",
    ),
    (
        "llm_slo_http_connections_closed_total",
        "Client connections the server closed, by reason: header_timeout, idle_timeout, evicted (to make room at the cap) or refused (at the cap, all busy).",
        "counter",
    ),
];

fn http_lines(stats: &ConnStats) -> Vec<(&'static str, Option<&'static str>, f64)> {
    let mut out =
        vec![(HTTP_FAMILIES[0].0, None, stats.open() as f64), (HTTP_FAMILIES[1].0, None, stats.limit() as f64)];
    out.extend(Closed::ALL.iter().map(|c| (HTTP_FAMILIES[2].0, Some(c.as_str()), stats.closed(*c) as f64)));
    out
}

/// Always 1; its labels say which build is running, for joins and rollout dashboards.
const BUILD_INFO: (&str, &str) =
    ("llm_slo_build_info", "The goodput build serving these metrics: its version and the commit it was built from.");

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
/// (export::emit_targets), a sample's labels borrowed from it.
pub fn render_report_chunks(report: &Report, external: &[(String, String)]) -> Vec<String> {
    let meta =
        |name: &str| export::family_meta(name).or_else(|| (name == BUILD_INFO.0).then_some((BUILD_INFO.1, "gauge")));
    let mut families = exposition::Families::new(external, &meta);
    families.section(export::target_rank);
    export::emit_targets(&report.targets, &mut families);
    families.section(export::report_rank);
    export::emit_report_wide(report, &mut families);
    families.section(|_| None);
    let build =
        Line { name: BUILD_INFO.0, labels: vec![("version", crate::VERSION), ("commit", crate::COMMIT)], value: 1.0 };
    families.add(&[build]);
    families.finish()
}

/// `report`'s /metrics families, to be rendered by the first GET that wants them.
fn rendering(report: Arc<Report>, external: Arc<[(String, String)]>) -> Rendered {
    Rendered::new(move || render_report_chunks(&report, &external).into_iter().map(bytes::Bytes::from).collect())
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
    let delivered = delivery.map(|d| delivery_metrics::samples(&d.stats())).unwrap_or_default();
    let mut lines: Vec<Line<'_>> = delivered.iter().map(Line::of).collect();
    let served = http_lines(http);
    lines.extend(served.iter().map(|(name, reason, value)| Line {
        name,
        labels: reason.iter().map(|r| ("reason", *r)).collect(),
        value: *value,
    }));
    let received = otlp.map(OtlpStats::samples).unwrap_or_default();
    lines.extend(received.iter().map(|s| Line {
        name: s.name,
        labels: vec![(s.label.0, s.label.1.as_str())],
        value: s.value,
    }));
    let process = process::process_metrics();
    lines.extend(process.iter().map(|(name, _, _, v)| Line { name, labels: Vec::new(), value: *v }));
    let mut out = String::with_capacity(lines.len() * 96);
    exposition::write(&mut out, &lines, external, |name| {
        delivery_metrics::family_meta(name)
            .or_else(|| HTTP_FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2)))
            .or_else(|| otlp_metrics::family_meta(name))
            .or_else(|| process.iter().find(|p| p.0 == name).map(|p| (p.1, p.2)))
    });
    render_taps(&mut out, taps, external);
    out
}

/// Appends the taps' health families (none without taps).
pub fn render_taps(out: &mut String, taps: &TapMetrics, external: &[(String, String)]) {
    let samples = taps.samples();
    let lines: Vec<Line<'_>> = samples.iter().map(Line::of).collect();
    exposition::write(out, &lines, external, tap_metrics::family_meta);
}

/// The cached report families plus the live ones, gzipped when the client accepts it. Only
/// the first GET after a tick renders the report's families, and the first gzip GET deflates
/// them, on the blocking pool; GETs arriving meanwhile wait for that one rendering.
async fn metrics(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let rendered = s.metrics.load_full();
    let mut live = render_live(s.delivery.as_ref(), &s.http, s.otlp.as_deref(), &s.taps, &s.external_labels);
    if let Some(state) = &s.state {
        state.render(&mut live, &s.external_labels);
    }
    s.reload.render(&mut live, &s.external_labels);
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
