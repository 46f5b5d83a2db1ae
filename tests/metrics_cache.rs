//! /metrics is rendered at most once per published report, by the first GET after it, and
//! served from those bytes (crates/daemon/src/serve/cache.rs,
//! docs/metrics.md#how-metrics-is-served): a report nobody fetches is never rendered; GETs
//! arriving together share one rendering; the body a GET serves is the report rendered
//! afresh plus the live counters; the gzip body decodes to the same bytes; later GETs
//! allocate a small fraction of the body and leave RSS flat; the previous report's rendering
//! is dropped when a new one is published; and a real Prometheus, which asks for gzip, reads
//! every series of it.
//!
//! Allocations are counted by this binary's global allocator, so the tests take turns.

#[path = "it/support/mod.rs"]
mod support;
#[path = "it/tools/mod.rs"]
mod tools;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use goodput::serve::server::{ConnStats, ServerLimits};
use goodput::serve::{self, Shared, page::sample};
use support::prometheus::Prometheus;
use tokio::sync::watch;

struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size.saturating_sub(layout.size()), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

static TURNS: Mutex<()> = Mutex::new(());

/// The daemon's HTTP side on a runtime of its own, serving `shared`.
struct Server {
    port: u16,
    stop: watch::Sender<bool>,
    rt: tokio::runtime::Runtime,
}

impl Server {
    fn start(shared: &Shared) -> Server {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stop, stop_rx) = watch::channel(false);
        let limits = ServerLimits {
            max_connections: 64,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(5),
            date_header: true,
        };
        rt.spawn(serve::server::serve(listener, serve::router(shared.clone()), limits, shared.http.clone(), stop_rx));
        Server { port, stop, rt }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.rt.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
    }
}

fn request(port: u16, gzip: bool) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let enc = if gzip { "Accept-Encoding: gzip\r\n" } else { "" };
    write!(s, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n{enc}Connection: close\r\n\r\n").unwrap();
    s
}

/// The response's header block (lowercased) and body.
fn get(port: u16, gzip: bool) -> (String, Vec<u8>) {
    let mut raw = Vec::new();
    request(port, gzip).read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a header block") + 4;
    (String::from_utf8_lossy(&raw[..split]).to_lowercase(), raw[split..].to_vec())
}

/// Reads a whole response into a fixed buffer, so that the client allocates nothing; returns
/// the bytes read.
fn get_discarding(port: u16, gzip: bool) -> usize {
    let mut s = request(port, gzip);
    let mut buf = [0u8; 64 << 10];
    let mut total = 0;
    loop {
        match s.read(&mut buf).unwrap() {
            0 => return total,
            n => total += n,
        }
    }
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b).read_to_end(&mut out).expect("a valid gzip body");
    out
}

/// The lines of families that move between GETs (process CPU and memory, connections open)
/// or that only the handler adds (config reload, discovery, clock steps).
fn is_live(line: &str) -> bool {
    let name = line.trim_start_matches("# HELP ").trim_start_matches("# TYPE ");
    ["process_", "llm_slo_http_connections", "llm_slo_config_", "llm_slo_discovery_", "llm_slo_clock_"]
        .iter()
        .any(|p| name.starts_with(p))
}

fn without_live(body: &str) -> Vec<&str> {
    body.lines().filter(|l| !is_live(l)).collect()
}

#[test]
fn a_get_serves_the_published_report_rendered_once_and_its_gzip_decodes_to_the_same() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let shared = Shared::new();
    let report = sample::report(100, 0);
    shared.publish(report.clone());
    let server = Server::start(&shared);

    let (head, body) = get(server.port, false);
    let body = String::from_utf8(body).unwrap();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("vary: accept-encoding"), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
    // The cached part comes first, byte for byte what a render of the report gives now.
    let fresh_report = serve::render_report(&report, &[]);
    assert!(body.starts_with(&fresh_report), "the body does not begin with the report's rendering");
    let fresh = serve::render_metrics(&report, None, &ConnStats::default(), None, &[]);
    assert_eq!(without_live(&body), without_live(&fresh), "served and fresh renders differ");
    for live in ["process_resident_memory_bytes ", "llm_slo_http_connections_limit 64"] {
        assert!(body.lines().any(|l| l.starts_with(live)), "no {live} in the live part");
    }

    let (head, gz) = get(server.port, true);
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(head.contains("vary: accept-encoding"), "{head}");
    assert!(gz.len() * 5 < body.len(), "gzip {} of {} bytes", gz.len(), body.len());
    let decoded = String::from_utf8(gunzip(&gz)).unwrap();
    assert_eq!(without_live(&decoded), without_live(&body), "gzip decodes to other bytes");
    assert!(decoded.lines().any(|l| l.starts_with("process_resident_memory_bytes ")));

    // A new report is served at once, and with a new gzip copy.
    let next = sample::report(100, 7);
    shared.publish(next.clone());
    let (_, body) = get(server.port, false);
    assert!(body.starts_with(serve::render_report(&next, &[]).as_bytes()), "the new report is not served");
    assert_ne!(serve::render_report(&next, &[]), fresh_report, "the two sample reports should differ");
    let decoded = gunzip(&get(server.port, true).1);
    assert!(decoded.starts_with(serve::render_report(&next, &[]).as_bytes()), "the gzip copy is stale");
}

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}

#[test]
fn gets_neither_render_nor_copy_the_body_and_leave_rss_flat() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let shared = Shared::new();
    let report = sample::report(100, 0);
    shared.publish(report.clone());
    let body_len = shared.metrics.load().report_len();
    assert!(body_len > 1 << 20, "the sample report should render to megabytes, not {body_len}");

    // What a GET cost before the cache, as the yardstick the measure must be able to see.
    let before = ALLOCATED.load(Ordering::Relaxed);
    let fresh = serve::render_metrics(&report, None, &ConnStats::default(), None, &[]);
    let render_cost = ALLOCATED.load(Ordering::Relaxed) - before;
    assert!(render_cost > fresh.len(), "a render allocates at least its body: {render_cost}");
    drop(fresh);

    let server = Server::start(&shared);
    // Warm up: connections, the runtime's buffers, and the gzip copy of this report.
    for i in 0..10 {
        assert!(get_discarding(server.port, i % 2 == 0) > 1000);
    }
    let gets = 60;
    let rss_before = rss_bytes();
    let before = ALLOCATED.load(Ordering::Relaxed);
    for i in 0..gets {
        get_discarding(server.port, i % 2 == 0);
    }
    let per_get = (ALLOCATED.load(Ordering::Relaxed) - before) / gets;
    let rss_growth = rss_bytes().saturating_sub(rss_before);
    eprintln!(
        "body {body_len} B; a render allocates {render_cost} B; a cached GET {per_get} B; RSS +{rss_growth} B after {gets} GETs"
    );
    assert!(per_get * 20 < body_len, "a GET allocates {per_get} B for a {body_len} B body: it copies or renders");
    assert!(per_get * 50 < render_cost, "a GET allocates {per_get} B, a render {render_cost} B");
    assert!(rss_growth < 4 << 20, "RSS grew {rss_growth} B over {gets} GETs");
}

#[test]
fn a_report_is_rendered_by_its_first_get_once_however_many_arrive_together() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let shared = Shared::new();
    let report = sample::report(100, 0);
    // What one rendering allocates, as the yardstick.
    shared.publish(report.clone());
    let before = ALLOCATED.load(Ordering::Relaxed);
    shared.metrics.load().prepare(false);
    let render_cost = ALLOCATED.load(Ordering::Relaxed) - before;
    let body_len = shared.metrics.load().report_len();
    assert!(render_cost >= body_len, "a rendering allocates at least its text: {render_cost} of {body_len}");

    // Publishing renders nothing: a tick nobody fetches costs nothing.
    let next = report.clone();
    let before = ALLOCATED.load(Ordering::Relaxed);
    shared.publish(next);
    let publish_cost = ALLOCATED.load(Ordering::Relaxed) - before;
    assert!(!shared.metrics.load().is_rendered(), "publish rendered the report");
    assert!(publish_cost * 10 < render_cost, "publishing allocated {publish_cost} B, a rendering {render_cost} B");

    // Eight GETs at once of a report not yet rendered: one rendering for all of them.
    let server = Server::start(&shared);
    let old = std::sync::Arc::downgrade(&shared.metrics.load_full());
    let before = ALLOCATED.load(Ordering::Relaxed);
    // Read into a fixed buffer each, so that the clients allocate nothing.
    let lens: Vec<usize> = std::thread::scope(|scope| {
        let gets: Vec<_> = (0..8).map(|i| scope.spawn(move || get_discarding(server.port, i % 2 == 0))).collect();
        gets.into_iter().map(|g| g.join().unwrap()).collect()
    });
    let gets_cost = ALLOCATED.load(Ordering::Relaxed) - before;
    eprintln!("one rendering allocates {render_cost} B; 8 GETs together {gets_cost} B; publish {publish_cost} B");
    assert!(lens.iter().all(|&n| n > 1000), "{lens:?}");
    assert!(gets_cost < render_cost * 7 / 4, "8 GETs allocated {gets_cost} B, one rendering {render_cost} B");
    assert!(shared.metrics.load().is_rendered() && shared.metrics.load().has_gzip());
    let fresh = serve::render_report(&report, &[]);
    let (_, plain) = get(server.port, false);
    assert!(plain.starts_with(fresh.as_bytes()), "the body does not begin with the report's rendering");
    assert!(gunzip(&get(server.port, true).1).starts_with(fresh.as_bytes()), "the gzip body differs");

    // A new report drops the old one's rendering.
    shared.publish(sample::report(100, 7));
    assert!(old.upgrade().is_none(), "the previous report's rendering is still held");
    let (_, body) = get(server.port, false);
    assert!(body.starts_with(serve::render_report(&sample::report(100, 7), &[]).as_bytes()));
}

#[test]
fn prometheus_reads_every_series_of_the_gzip_body() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let prometheus = tools::require_tool!("prometheus");
    let shared = Shared::new();
    shared.publish(sample::report(100, 0));
    let server = Server::start(&shared);
    let body = String::from_utf8(get(server.port, false).1).unwrap();
    assert!(!shared.metrics.load().has_gzip(), "no gzip GET yet");
    let ttft = body.lines().filter(|l| l.starts_with("llm_slo_ttft_seconds{")).count();
    let series = body.lines().filter(|l| !l.starts_with('#')).count();

    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::scraping(&prometheus, dir.path(), "goodput", &format!("127.0.0.1:{}", server.port));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = None;
    while Instant::now() < deadline && got.is_none() {
        std::thread::sleep(Duration::from_millis(500));
        got = (|| {
            let up = prom.query("up{job=\"goodput\"}")?;
            let scraped = prom.query("scrape_samples_scraped{job=\"goodput\"}")?;
            let ttft = prom.query("count(llm_slo_ttft_seconds)")?;
            // In the live part, the gzip stream's last block.
            let rss = prom.query("process_resident_memory_bytes")?;
            Some((up, scraped, ttft, rss))
        })();
    }
    let (up, scraped, got_ttft, rss) = got.expect("Prometheus scraped goodput within 60 s");
    assert_eq!(up, 1.0, "the scrape failed");
    assert_eq!(got_ttft, ttft as f64, "TTFT series stored");
    assert_eq!(scraped, series as f64, "samples scraped against lines in the plain body");
    assert!(rss > 1e6, "process_resident_memory_bytes {rss}");
    assert!(shared.metrics.load().has_gzip(), "Prometheus asked for gzip and got it");
}
