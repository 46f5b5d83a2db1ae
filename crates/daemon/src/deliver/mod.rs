//! Delivery of notifications to Alertmanagers (API v2, `POST /api/v2/alerts`) and an
//! optional generic JSON webhook, each through its own [`Queue`] and worker task.
//!
//! Nothing is lost while a destination is down: its worker retries with exponential backoff,
//! and the queue coalesces per alert so it stays bounded. A firing alert's `endsAt` is set
//! at send time to `now + 4 × resend interval` (as Prometheus does), so a queued alert never
//! arrives already expired, and Alertmanager resolves it by itself if this daemon dies.

pub mod metrics;
pub mod queue;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use self::queue::{Batch, Queue};
use crate::alert::config::AlertingConfig;
use crate::alert::state::Notification;
use crate::alert::view::rfc3339_ms;

/// Most notifications per POST.
const MAX_BATCH: usize = 256;

#[derive(Debug, Clone)]
pub struct DeliveryOptions {
    pub resend_interval: Duration,
    pub timeout: Duration,
    pub queue_capacity: usize,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl DeliveryOptions {
    pub fn from_config(cfg: &AlertingConfig) -> Self {
        DeliveryOptions {
            resend_interval: cfg.resend_interval,
            timeout: cfg.timeout,
            queue_capacity: cfg.queue_capacity,
            initial_backoff: Duration::from_millis(500),
            // A destination that comes back hears from us within one resend interval,
            // the cadence firing alerts are refreshed at anyway (30 s at most).
            max_backoff: cfg.resend_interval.clamp(Duration::from_millis(500), Duration::from_secs(30)),
        }
    }
}

/// One alert as Alertmanager's API v2 (and the webhook) receive it.
#[derive(Debug, Clone, Serialize)]
pub struct PostableAlert<'a> {
    pub labels: &'a std::collections::BTreeMap<String, String>,
    pub annotations: &'a std::collections::BTreeMap<String, String>,
    #[serde(rename = "startsAt")]
    pub starts_at: String,
    #[serde(rename = "endsAt")]
    pub ends_at: String,
}

/// Adds `external_labels` to alerts: those queued for delivery and those the report shows
/// (/api/v1/report, /api/v1/alerts), so that each replica's alert is its own in Alertmanager.
/// An alert's own label of the same name wins, as with Prometheus's external labels.
pub fn add_external_labels(
    external: &[(String, String)],
    report: &mut crate::report::Report,
    batch: &mut [Notification],
) {
    if external.is_empty() {
        return;
    }
    let labelled = report.alerts.iter_mut().map(|a| &mut a.labels).chain(batch.iter_mut().map(|n| &mut n.labels));
    for labels in labelled {
        for (k, v) in external {
            labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// The JSON array sent for `batch` at wall-clock `now_ms`.
pub fn postable(batch: &[Notification], now_ms: i64, validity: Duration) -> Vec<PostableAlert<'_>> {
    batch
        .iter()
        .map(|n| PostableAlert {
            labels: &n.labels,
            annotations: &n.annotations,
            starts_at: rfc3339_ms(n.starts_at_ms),
            ends_at: rfc3339_ms(n.ends_at_ms.unwrap_or(now_ms + validity.as_millis() as i64)),
        })
        .collect()
}

/// Counters of one destination, for logs, health and /metrics (docs/metrics.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DestinationStats {
    /// The POST URL with its credentials masked (crate::redact).
    pub url: String,
    /// The URL without credentials, safe to show on /metrics (see [`destination_label`]).
    pub label: String,
    pub queued: usize,
    pub sent_batches: u64,
    pub failed_attempts: u64,
    /// Notifications in batches that were delivered.
    pub sent_notifications: u64,
    /// Notifications in batches that failed and stay queued for a retry (each retry counts).
    pub retried_notifications: u64,
    /// Notifications in batches the receiver rejected (4xx), dropped without a retry.
    pub dropped_notifications: u64,
    pub evicted_firing: u64,
    pub evicted_resolved: u64,
    pub last_error: Option<String>,
}

/// How a destination is named on /metrics: its URL without user, password, query or
/// fragment, where secrets live; for the webhook only scheme, host and port, because webhook
/// URLs often carry a token in the path. Anything unparsable is shown as `invalid URL`.
pub fn destination_label(url: &str, webhook: bool) -> String {
    let Ok(mut u) = url::Url::parse(url) else { return "invalid URL".to_string() };
    if webhook {
        return u.origin().ascii_serialization();
    }
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

struct Destination {
    url: String,
    /// What logs and errors name it by: [`destination_label`], never the URL's credentials.
    label: String,
    queue: Mutex<Queue>,
    wake: Notify,
    /// Cuts a retry backoff short: on shutdown there is no time left to wait it out.
    retry_now: Notify,
    stats: Mutex<DestinationStats>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not stop alert delivery: the data is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why alert delivery could not start.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("alert delivery must be started inside the tokio runtime")]
    NoRuntime,
    #[error("cannot build the HTTP client for alert delivery: {0}")]
    Client(reqwest::Error),
}

/// The running delivery workers. Dropping it stops them.
pub struct Delivery {
    dests: Vec<Arc<Destination>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Delivery {
    /// Starts one worker per Alertmanager and webhook in `cfg`. Call inside a tokio runtime.
    pub fn start(cfg: &AlertingConfig) -> Result<Delivery, DeliveryError> {
        Self::start_with(cfg, DeliveryOptions::from_config(cfg))
    }

    /// [`Delivery::start`] with explicit options (tests shorten the backoff).
    pub fn start_with(cfg: &AlertingConfig, opts: DeliveryOptions) -> Result<Delivery, DeliveryError> {
        let mut urls: Vec<(String, bool)> = cfg
            .alertmanager_urls()
            .iter()
            .map(|u| (format!("{}/api/v2/alerts", u.trim_end_matches('/')), false))
            .collect();
        urls.extend(cfg.webhook.iter().map(|w| (w.url.clone(), true)));
        Self::start_destinations(urls, opts)
    }

    /// Starts one worker per full POST URL, each labelled as an Alertmanager.
    pub fn start_urls(urls: Vec<String>, opts: DeliveryOptions) -> Result<Delivery, DeliveryError> {
        Self::start_destinations(urls.into_iter().map(|u| (u, false)).collect(), opts)
    }

    /// Starts one worker per (POST URL, is the webhook).
    fn start_destinations(urls: Vec<(String, bool)>, opts: DeliveryOptions) -> Result<Delivery, DeliveryError> {
        let rt = tokio::runtime::Handle::try_current().map_err(|_| DeliveryError::NoRuntime)?;
        crate::scrape::install_crypto_provider();
        let client =
            reqwest::Client::builder().no_proxy().timeout(opts.timeout).build().map_err(DeliveryError::Client)?;
        let mut dests = Vec::new();
        let mut tasks = Vec::new();
        let mut labels: Vec<String> = Vec::new();
        for (url, webhook) in urls {
            let mut label = destination_label(&url, webhook);
            // Two destinations differing only in credentials must still be two series.
            if labels.contains(&label) {
                label = format!("{label}#{}", labels.len() + 1);
            }
            labels.push(label.clone());
            let d = Arc::new(Destination {
                queue: Mutex::new(Queue::new(opts.queue_capacity)),
                wake: Notify::new(),
                retry_now: Notify::new(),
                stats: Mutex::new(DestinationStats {
                    url: crate::redact::url_str(&url),
                    label: label.clone(),
                    ..Default::default()
                }),
                url,
                label,
            });
            tasks.push(rt.spawn(worker(d.clone(), client.clone(), opts.clone())));
            dests.push(d);
        }
        Ok(Delivery { dests, tasks })
    }

    /// Queues `notifications` at every destination.
    pub fn submit(&self, notifications: &[Notification]) {
        if notifications.is_empty() {
            return;
        }
        for d in &self.dests {
            let mut q = lock(&d.queue);
            for n in notifications {
                q.push(n.clone());
            }
            drop(q);
            d.wake.notify_one();
        }
    }

    pub fn stats(&self) -> Vec<DestinationStats> {
        stats_of(&self.dests)
    }

    /// A handle that reads the live counters, for /metrics; it outlives nothing it reads.
    pub fn metrics(&self) -> DeliveryMetrics {
        DeliveryMetrics { dests: self.dests.clone() }
    }

    /// True when every queue is empty (everything submitted was delivered).
    pub fn idle(&self) -> bool {
        self.dests.iter().all(|d| lock(&d.queue).is_empty())
    }

    /// Waits until everything queued is delivered or `deadline` passes (for shutdown);
    /// returns whether it all went out. A destination waiting out a retry backoff is
    /// retried at once.
    pub async fn flush(&self, deadline: Duration) -> bool {
        let end = tokio::time::Instant::now() + deadline;
        for d in &self.dests {
            d.retry_now.notify_one();
        }
        while !self.idle() {
            if tokio::time::Instant::now() >= end {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }
}

fn stats_of(dests: &[Arc<Destination>]) -> Vec<DestinationStats> {
    dests
        .iter()
        .map(|d| {
            let q = lock(&d.queue);
            let mut s = lock(&d.stats).clone();
            s.queued = q.len();
            (s.evicted_firing, s.evicted_resolved) = q.evicted();
            s
        })
        .collect()
}

/// The counters of every destination of a [`Delivery`], read when /metrics is rendered.
#[derive(Clone)]
pub struct DeliveryMetrics {
    dests: Vec<Arc<Destination>>,
}

impl DeliveryMetrics {
    pub fn stats(&self) -> Vec<DestinationStats> {
        stats_of(&self.dests)
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

async fn worker(d: Arc<Destination>, client: reqwest::Client, opts: DeliveryOptions) {
    let validity = opts.resend_interval * 4;
    let mut backoff = opts.initial_backoff;
    loop {
        let batch: Batch = lock(&d.queue).batch(MAX_BATCH);
        if batch.notifications.is_empty() {
            d.wake.notified().await;
            continue;
        }
        let body = postable(&batch.notifications, now_ms(), validity);
        match post(&client, &d.url, &d.label, &body).await {
            Ok(()) => {
                lock(&d.queue).ack(&batch);
                let mut s = lock(&d.stats);
                s.sent_batches += 1;
                s.sent_notifications += batch.notifications.len() as u64;
                s.last_error = None;
                backoff = opts.initial_backoff;
            }
            Err(PostError::Rejected(e)) => {
                tracing::error!(destination = %d.label, error = %e, "alert delivery rejected; dropping this batch");
                lock(&d.queue).ack(&batch);
                let mut s = lock(&d.stats);
                s.failed_attempts += 1;
                s.dropped_notifications += batch.notifications.len() as u64;
                s.last_error = Some(e);
            }
            Err(PostError::Transient(e)) => {
                tracing::warn!(destination = %d.label, error = %e, retry_in = ?backoff, "alert delivery failed; will retry");
                {
                    let mut s = lock(&d.stats);
                    s.failed_attempts += 1;
                    s.retried_notifications += batch.notifications.len() as u64;
                    s.last_error = Some(e);
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = d.retry_now.notified() => {}
                }
                backoff = (backoff * 2).min(opts.max_backoff);
            }
        }
    }
}

enum PostError {
    /// Worth retrying: connection failures, timeouts, 5xx, 429.
    Transient(String),
    /// The receiver rejected the alerts themselves; sending them again cannot help.
    Rejected(String),
}

/// POSTs `body` to `url`; errors name the destination by `label` (no credentials), since
/// they reach the logs and [`DestinationStats::last_error`].
async fn post(client: &reqwest::Client, url: &str, label: &str, body: &[PostableAlert<'_>]) -> Result<(), PostError> {
    let json = serde_json::to_vec(body).map_err(|e| PostError::Rejected(format!("cannot encode alerts: {e}")))?;
    let sent = client.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(json).send().await;
    // The error's own URL is dropped: `label` names the destination.
    let resp = sent
        .map_err(|e| PostError::Transient(format!("POST {label}: {}", crate::redact::error_chain(&e.without_url()))))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let text = resp.text().await.unwrap_or_default();
    let msg = format!("POST {label}: HTTP {status}: {}", text.chars().take(300).collect::<String>());
    if status.is_client_error() && status != reqwest::StatusCode::TOO_MANY_REQUESTS {
        Err(PostError::Rejected(msg))
    } else {
        Err(PostError::Transient(msg))
    }
}
