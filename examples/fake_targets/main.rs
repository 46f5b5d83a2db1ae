//! Many fake engines on one port, for the aggregator footprint benchmark
//! (`scripts/bench/aggregator.sh`, docs/footprint.md).
//!
//! Serves target `i` (0 ≤ i < N) at `/t/<i>/metrics`. Every target serves the same template
//! exposition (a scrape saved from `goodput simulate`), with its counters and histograms
//! advancing over time so the daemon's window math has real deltas to work on. Running the
//! real simulator N times would cost far more CPU than the daemon under test; here a scrape
//! is a template walk plus number formatting.
//!
//! Counter-like samples are scaled by `1 + (t + phase_i) / ramp` (see `template.rs`).
//!
//! With `--history-out FILE`, instead of serving, it writes the targets' past as
//! OpenMetrics for `promtool tsdb create-blocks-from openmetrics` (see `history.rs`); a
//! server started later with the same `--anchor-unix-ms` continues that past.
//!
//! With `--gzip`, a scrape that asks for gzip (`Accept-Encoding: gzip`) gets its body
//! gzipped (at the fastest level, to keep the fake's CPU down), as engines behind Python's
//! `prometheus_client` and Go's `promhttp` answer; without it every body is sent as is.
//!
//! `/stats` says, per target since start or the last `/stats/reset`, how often it was
//! scraped and the longest gap between two scrapes: the ground truth for "every target
//! was scraped every interval", measured outside the daemon.
//!
//! ```sh
//! cargo run --release --example fake_targets -- --listen 127.0.0.1:19100 --targets 1000 \
//!     --template scrape.prom [--threads 1] [--ramp 600] [--anchor-unix-ms MS] [--gzip]
//! cargo run --release --example fake_targets -- --targets 20 --template scrape.prom \
//!     --anchor-unix-ms MS --history-out past.om [--history-from-unix-ms MS] --history-to-unix-ms MS [--history-step-ms 5000] \
//!     [--job fake] [--instance 127.0.0.1:19100]
//! ```

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

mod history;
mod template;
use template::{Template, factor};

fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Per-target scrape bookkeeping since the last reset.
#[derive(Clone, Copy, Default)]
struct Seen {
    count: u64,
    last_ms: Option<u64>,
    max_gap_ms: u64,
}

struct App {
    template: Template,
    started: Instant,
    /// Unix ms at which every target's counters start from the template's values.
    anchor_ms: i64,
    ramp_s: f64,
    gzip: bool,
    seen: Mutex<Vec<Seen>>,
}

async fn metrics(State(app): State<Arc<App>>, Path(i): Path<usize>, request: HeaderMap) -> Response {
    let now_ms = app.started.elapsed().as_millis() as u64;
    {
        let mut seen = app.seen.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = seen.get_mut(i) else {
            return (StatusCode::NOT_FOUND, "no such target\n").into_response();
        };
        s.count += 1;
        if let Some(last) = s.last_ms {
            s.max_gap_ms = s.max_gap_ms.max(now_ms - last);
        }
        s.last_ms = Some(now_ms);
    }
    let body = app.template.render(factor(unix_ms() - app.anchor_ms, i, app.ramp_s));
    let content_type = (header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    let asks_gzip = request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip"))));
    if app.gzip && asks_gzip {
        let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        if std::io::Write::write_all(&mut out, body.as_bytes()).is_ok()
            && let Ok(gz) = out.finish()
        {
            return ([content_type, (header::CONTENT_ENCODING, "gzip")], gz).into_response();
        }
    }
    ([content_type], body).into_response()
}

/// `targets N`, `scrapes`, `min_count`, `max_count`, `never_scraped`, `max_gap_ms`, one per line.
async fn stats(State(app): State<Arc<App>>) -> String {
    let seen = app.seen.lock().unwrap_or_else(|e| e.into_inner());
    let total: u64 = seen.iter().map(|s| s.count).sum();
    let min = seen.iter().map(|s| s.count).min().unwrap_or(0);
    let max = seen.iter().map(|s| s.count).max().unwrap_or(0);
    let never = seen.iter().filter(|s| s.count == 0).count();
    let gap = seen.iter().map(|s| s.max_gap_ms).max().unwrap_or(0);
    format!(
        "targets {}\nscrapes {total}\nmin_count {min}\nmax_count {max}\nnever_scraped {never}\nmax_gap_ms {gap}\n",
        seen.len()
    )
}

/// Starts a new measurement: counts and gaps restart, the next scrape of each target is its first.
async fn reset(State(app): State<Arc<App>>) -> &'static str {
    let mut seen = app.seen.lock().unwrap_or_else(|e| e.into_inner());
    seen.iter_mut().for_each(|s| *s = Seen::default());
    "reset\n"
}

struct Args {
    listen: String,
    targets: usize,
    template: String,
    threads: usize,
    ramp_s: f64,
    anchor_ms: Option<i64>,
    history_out: Option<String>,
    history_from_ms: Option<i64>,
    history_to_ms: Option<i64>,
    history_step_ms: i64,
    job: String,
    instance: String,
    gzip: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        listen: "127.0.0.1:19100".into(),
        targets: 100,
        template: String::new(),
        threads: 1,
        ramp_s: 600.0,
        anchor_ms: None,
        history_out: None,
        history_from_ms: None,
        history_to_ms: None,
        history_step_ms: 5000,
        job: "fake".into(),
        instance: "127.0.0.1:19100".into(),
        gzip: false,
    };
    let int = |flag: &str, v: String| v.parse::<i64>().map_err(|e| format!("{flag}: {e}"));
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => a.listen = value()?,
            "--targets" => a.targets = value()?.parse().map_err(|e| format!("--targets: {e}"))?,
            "--template" => a.template = value()?,
            "--threads" => a.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--ramp" => a.ramp_s = value()?.parse().map_err(|e| format!("--ramp: {e}"))?,
            "--anchor-unix-ms" => a.anchor_ms = Some(int(&flag, value()?)?),
            "--history-out" => a.history_out = Some(value()?),
            "--history-from-unix-ms" => a.history_from_ms = Some(int(&flag, value()?)?),
            "--history-to-unix-ms" => a.history_to_ms = Some(int(&flag, value()?)?),
            "--history-step-ms" => a.history_step_ms = int(&flag, value()?)?,
            "--job" => a.job = value()?,
            "--instance" => a.instance = value()?,
            "--gzip" => a.gzip = true,
            other => {
                return Err(format!(
                    "unknown flag {other}; expected --listen, --targets, --template, --threads, --ramp, \
                     --anchor-unix-ms, --history-out, --history-from-unix-ms, --history-to-unix-ms, --history-step-ms, --job, --instance, --gzip"
                ));
            }
        }
    }
    if a.template.is_empty() {
        return Err("--template FILE is required (a scrape saved from `goodput simulate`)".into());
    }
    if a.threads == 0 || a.ramp_s <= 0.0 || a.history_step_ms <= 0 {
        return Err("--threads, --ramp and --history-step-ms must be positive".into());
    }
    if a.history_out.is_some() && (a.anchor_ms.is_none() || a.history_to_ms.is_none()) {
        return Err("--history-out needs --anchor-unix-ms (the history's start) and --history-to-unix-ms".into());
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fake_targets: {e}");
            std::process::exit(2);
        }
    };
    let text = match std::fs::read_to_string(&args.template) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("fake_targets: cannot read {}: {e}", args.template);
            std::process::exit(2);
        }
    };
    let template = Template::parse(&text);
    if let Some(path) = &args.history_out {
        write_history(&args, &template, path);
        return;
    }
    let app = Arc::new(App {
        template,
        started: Instant::now(),
        anchor_ms: args.anchor_ms.unwrap_or_else(unix_ms),
        ramp_s: args.ramp_s,
        gzip: args.gzip,
        seen: Mutex::new(vec![Seen::default(); args.targets]),
    });
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads).enable_all().build();
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fake_targets: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    rt.block_on(async move {
        let router = Router::new()
            .route("/t/{i}/metrics", get(metrics))
            .route("/stats", get(stats))
            .route("/stats/reset", get(reset))
            .with_state(app);
        let listener = match tokio::net::TcpListener::bind(&args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("fake_targets: cannot listen on {}: {e}", args.listen);
                std::process::exit(1);
            }
        };
        eprintln!("fake_targets: {} targets on http://{}/t/<i>/metrics", args.targets, args.listen);
        if let Err(e) = axum::serve(listener, router).await {
            eprintln!("fake_targets: server failed: {e}");
        }
    });
}

fn write_history(args: &Args, template: &Template, path: &str) {
    let (Some(anchor_ms), Some(to_ms)) = (args.anchor_ms, args.history_to_ms) else {
        eprintln!("fake_targets: --history-out needs --anchor-unix-ms and --history-to-unix-ms");
        std::process::exit(2);
    };
    let history = history::History {
        template,
        targets: args.targets,
        anchor_ms,
        from_ms: args.history_from_ms.unwrap_or(anchor_ms).max(anchor_ms),
        to_ms,
        step_ms: args.history_step_ms,
        ramp_s: args.ramp_s,
        job: &args.job,
        instance: &args.instance,
    };
    let written = std::fs::File::create(path).and_then(|f| {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
        let n = history.write(&mut out)?;
        std::io::Write::flush(&mut out)?;
        Ok(n)
    });
    match written {
        Ok(n) => eprintln!("fake_targets: wrote {n} samples of {} targets to {path}", args.targets),
        Err(e) => {
            eprintln!("fake_targets: cannot write {path}: {e}");
            std::process::exit(1);
        }
    }
}
