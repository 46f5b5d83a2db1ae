//! Waiting for a valid config (`goodput run --on-invalid-config wait`, docs/cli.md#goodput-run).
//!
//! Kubernetes counts every container of a pod in the pod's readiness, so a sidecar that
//! exits on a config it cannot use, and then restarts in CrashLoopBackOff, takes the
//! engine's pod out of its Service. Instead of exiting, the process stays up: it logs every
//! error at `file:line:column`, serves `/healthz` (200), `/readyz` (503), `/metrics`
//! (`llm_slo_config_waiting` 1, `llm_slo_config_last_reload_successful` 0, the build and
//! the process) and at `/` a page listing the errors, and reads the file again on SIGHUP
//! and whenever it changes, as the running daemon does (super::reload::Changes). Once the
//! file validates, the listener is closed and the caller starts the daemon, which binds
//! the same address.
//!
//! It listens on the file's own `listen` when the file reads far enough to have a valid
//! one (config::written_listen), otherwise on the address the caller gives (by default
//! [`DEFAULT_LISTEN`]). When neither can be bound it waits without serving.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::reload::{Change, Changes};
use crate::config::{self, ConfigErrors, Loaded, ServerConfig};
use crate::listen::server::{self, ConnStats, ServerLimits};
use crate::serve::page::html::Esc;
use crate::serve::reload::ReloadStats;
use crate::serve::{BuildInfo, CONTENT_TYPE_TEXT, process, render_collectors};

/// Where the process waits when the file has no valid `listen` of its own: every interface,
/// as a sidecar's goodput listens, so that Prometheus scraping the pod sees the wait.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9464";

/// How long requests in progress get when the wait ends, before the daemon binds.
const CLOSE: Duration = Duration::from_secs(1);

/// What the handlers show.
struct Waiting {
    file: String,
    /// Each error as `file:line:column: message`.
    errors: Mutex<Vec<String>>,
    reload: ReloadStats,
}

/// Waits until the config file at `path` validates and returns it; `None` when `stop`
/// resolves first (SIGTERM). `fallback` is where it serves when the file names no address
/// of its own.
pub async fn wait_for_valid_config(
    path: &Path,
    fallback: SocketAddr,
    stop: impl Future<Output = ()>,
) -> Option<Loaded> {
    let mut changes = Changes::new(path.to_path_buf());
    // Read (again) once changes are followed: a version written since the caller found the
    // file invalid would otherwise wait for the next change.
    let errors = match config::load(path) {
        Ok(loaded) => return Some(loaded),
        Err(errors) => errors,
    };
    log_errors(path, &errors);
    let state = Arc::new(Waiting {
        file: path.display().to_string(),
        errors: Mutex::new(lines(&errors)),
        reload: ReloadStats::default(),
    });
    state.reload.waiting();
    let serving = bind(path, fallback).await.map(|listener| serve(listener, state.clone()));
    tokio::pin!(stop);
    let loaded = loop {
        let why = tokio::select! {
            _ = &mut stop => break None,
            why = changes.next() => why,
        };
        match why {
            Change::Signal => tracing::info!(file = %path.display(), "SIGHUP: reading the config again"),
            Change::File => tracing::info!(file = %path.display(), "the config file changed: reading it again"),
        }
        // Reading and validating is file I/O and CPU: off the runtime's thread.
        let p: PathBuf = path.to_path_buf();
        match tokio::task::spawn_blocking(move || config::load(&p)).await {
            Ok(Ok(loaded)) => break Some(loaded),
            Ok(Err(errors)) => {
                log_errors(path, &errors);
                *state.errors.lock().unwrap_or_else(|e| e.into_inner()) = lines(&errors);
            }
            Err(e) => tracing::error!("cannot read the config: {e}"),
        }
    };
    if let Some((stop_server, mut server)) = serving {
        // Closed before returning: the daemon binds the same address.
        let _ = stop_server.send(true);
        if tokio::time::timeout(CLOSE, &mut server).await.is_err() {
            server.abort();
            let _ = server.await;
        }
    }
    if loaded.is_some() {
        tracing::info!(file = %path.display(), "the config is valid: starting");
    }
    loaded
}

fn lines(errors: &ConfigErrors) -> Vec<String> {
    errors.0.iter().map(ToString::to_string).collect()
}

fn log_errors(path: &Path, errors: &ConfigErrors) {
    for e in &errors.0 {
        tracing::error!("{e}");
    }
    tracing::error!(
        file = %path.display(),
        errors = errors.0.len(),
        "the config is not valid: waiting for a valid one (--on-invalid-config wait); `goodput check --config FILE` shows the errors too"
    );
}

/// The file's own `listen`, else `fallback`; `None` when neither binds.
async fn bind(path: &Path, fallback: SocketAddr) -> Option<TcpListener> {
    let written = config::written_listen(path);
    for addr in written.into_iter().chain((written != Some(fallback)).then_some(fallback)) {
        match TcpListener::bind(addr).await {
            Ok(l) => {
                tracing::warn!(%addr, "serving /metrics, /healthz and the errors at / while waiting for a valid config");
                return Some(l);
            }
            Err(e) => tracing::error!("cannot listen on {addr} while waiting for a valid config: {e}"),
        }
    }
    tracing::error!("waiting for a valid config without serving HTTP: no address could be bound");
    None
}

type Serving = (watch::Sender<bool>, tokio::task::JoinHandle<()>);

fn serve(listener: TcpListener, state: Arc<Waiting>) -> Serving {
    let s = ServerConfig::default();
    let limits = ServerLimits {
        max_connections: s.max_connections,
        header_read_timeout: s.header_read_timeout,
        idle_timeout: s.idle_timeout,
        body_read_timeout: s.header_read_timeout,
        date_header: true,
    };
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(server::serve(listener, router(state), limits, Arc::new(ConnStats::default()), stopped));
    (stop, task)
}

fn router(state: Arc<Waiting>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn readyz() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, "not ready: waiting for a valid config; GET / lists its errors\n").into_response()
}

async fn metrics(State(s): State<Arc<Waiting>>) -> Response {
    let mut out = String::new();
    render_collectors(&mut out, &[&s.reload, &BuildInfo, &process::Process], &[]);
    ([(header::CONTENT_TYPE, CONTENT_TYPE_TEXT)], out).into_response()
}

/// Every error, escaped: a message quotes the file, whose text is anyone's who can edit it.
async fn page(State(s): State<Arc<Waiting>>) -> Response {
    let errors = s.errors.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut body = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"5\"><title>goodput: waiting for a valid config</title></head><body>\n\
         <h1>goodput is waiting for a valid config</h1>\n",
    );
    body.push_str(&format!(
        "<p>{} does not validate ({} error(s)). goodput reads it again when it changes and on SIGHUP, \
         and starts as soon as it validates. <code>goodput check --config FILE</code> shows the same errors.</p>\n<pre>",
        Esc(&s.file),
        errors.len()
    ));
    for e in &errors {
        body.push_str(&format!("{}\n", Esc(e)));
    }
    body.push_str("</pre>\n</body></html>\n");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(errors: Vec<&str>) -> Arc<Waiting> {
        let w = Waiting {
            file: "/etc/goodput/<config>.yaml".into(),
            errors: Mutex::new(errors.into_iter().map(String::from).collect()),
            reload: ReloadStats::default(),
        };
        w.reload.waiting();
        Arc::new(w)
    }

    async fn body(r: Response) -> (StatusCode, String) {
        let status = r.status();
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn the_page_lists_every_error_escaped() {
        let w = waiting(vec!["c.yaml:3:5: unknown key \"<script>\"", "c.yaml:9:1: url: unsupported URL & more"]);
        let (status, html) = body(page(State(w)).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains("c.yaml:3:5: unknown key &quot;&lt;script&gt;&quot;\n"), "{html}");
        assert!(html.contains("c.yaml:9:1: url: unsupported URL &amp; more\n"), "{html}");
        assert!(html.contains("/etc/goodput/&lt;config&gt;.yaml does not validate (2 error(s))"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
    }

    #[tokio::test]
    async fn metrics_say_waiting_and_not_reloaded() {
        let (status, text) = body(metrics(State(waiting(vec!["x"]))).await).await;
        assert_eq!(status, StatusCode::OK);
        for line in [
            "llm_slo_config_waiting 1.0",
            "llm_slo_config_last_reload_successful 0.0",
            "# TYPE llm_slo_config_waiting gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert!(text.contains("llm_slo_build_info{version=\""), "{text}");
        let (status, _) = body(readyz().await).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }
}
