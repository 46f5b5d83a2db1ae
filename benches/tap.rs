//! What the tap adds to a streaming request (docs/benchmarks.md#the-tap).
//!
//! One run measures the same streams straight to an upstream, through the real `goodput`
//! binary's tap, when `nginx` is on PATH through nginx as a streaming reverse proxy (the
//! alternative a team would put there), and with `GOODPUT_TAP_BENCH_FLOORS=1` through two
//! floors of the tap's stack (the plainest hyper proxy and a tokio byte relay: [`proxies`]),
//! interleaved so that machine noise hits all:
//!
//! - criterion: time to first token of a single stream on each path (median and the ratio
//!   between them);
//! - the p50, p90 and p99 of that TTFT over 2,000 streams on each path, in turn, and each
//!   proxy's CPU time per stream (its threads' `schedstat`);
//! - then, at 1, 64 and 512 concurrent streams: the p50 and p99 of TTFT and of per-event
//!   delivery delay, direct and through the tap, and the tap process's CPU per 1,000
//!   events/s.
//!
//! The upstream runs in this process and stamps each event with the instant it was written
//! (on this process's monotonic clock), so a client here measures each event's delivery
//! delay exactly; each proxy, a separate process, sees only bytes.
//!
//! `cargo bench --bench tap` runs everything; under `cargo test --benches` each criterion
//! benchmark runs once and the concurrency table is skipped.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::routing::{get, post};
use criterion::Criterion;
use futures_util::StreamExt;
use proxies::{Floor, Proxy};

#[path = "tap/proxies.rs"]
mod proxies;

/// The shared clock of upstream and client: every stamp is nanoseconds since this instant.
fn epoch() -> Instant {
    static E: OnceLock<Instant> = OnceLock::new();
    *E.get_or_init(Instant::now)
}

fn nanos_now() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

/// Query parameters of the upstream's stream: tokens and the gap between them.
#[derive(serde::Deserialize)]
struct Shape {
    tokens: u32,
    gap_us: u64,
}

/// vLLM's chunk shape, with the send instant in an extra field the tap ignores.
fn event(content: Option<&str>, t_ns: u64) -> Bytes {
    let delta = match content {
        Some(c) => format!(r#"{{"content":"{c}"}}"#),
        None => r#"{"role":"assistant","content":""}"#.to_string(),
    };
    Bytes::from(format!(
        "data: {{\"id\":\"chatcmpl-b\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":null}}],\"t_ns\":{t_ns}}}\n\n"
    ))
}

async fn stream(axum::extract::Query(shape): axum::extract::Query<Shape>) -> axum::response::Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(4);
    tokio::spawn(async move {
        let _ = tx.send(Ok(event(None, nanos_now()))).await;
        let mut next = tokio::time::Instant::now();
        for _ in 0..shape.tokens {
            if tx.send(Ok(event(Some("tok"), nanos_now()))).await.is_err() {
                return;
            }
            next += Duration::from_micros(shape.gap_us);
            tokio::time::sleep_until(next).await;
        }
        let usage = format!(
            "data: {{\"id\":\"chatcmpl-b\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{{\"prompt_tokens\":4,\"completion_tokens\":{},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
            shape.tokens,
            shape.tokens + 4
        );
        let _ = tx.send(Ok(Bytes::from(usage))).await;
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(tokio_stream(rx)))
        .expect("static response parts")
}

/// An mpsc receiver as a stream, without pulling in tokio-stream.
fn tokio_stream<T: Send + 'static>(mut rx: tokio::sync::mpsc::Receiver<T>) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

async fn start_upstream() -> SocketAddr {
    let app = Router::new()
        .route("/v1/chat/completions", post(stream))
        .route("/metrics", get(|| async { "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 0\n" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the upstream");
    let addr = listener.local_addr().expect("upstream address");
    // As an engine's server: with Nagle on, a token event written right after the role
    // event waits for the client's delayed ACK (tens of milliseconds).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// One stream's timings: request sent → first token event read, and each token event's
/// delivery delay (read − written).
struct Times {
    ttft: Duration,
    delays: Vec<Duration>,
}

async fn one(client: &reqwest::Client, base: SocketAddr, tokens: u32, gap_us: u64) -> Times {
    let url = format!("http://{base}/v1/chat/completions?tokens={tokens}&gap_us={gap_us}");
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let sent = Instant::now();
    let resp = client.post(&url).header("content-type", "application/json").body(body).send().await.expect("request");
    let mut bytes = resp.bytes_stream();
    let (mut ttft, mut delays, mut carry) = (None, Vec::new(), Vec::<u8>::new());
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.expect("stream");
        let (read_at, read_ns) = (Instant::now(), nanos_now());
        carry.extend_from_slice(&chunk);
        while let Some(end) = carry.windows(2).position(|w| w == b"\n\n") {
            let ev: Vec<u8> = carry.drain(..end + 2).collect();
            let ev = String::from_utf8_lossy(&ev);
            let Some(t_ns) =
                ev.split("\"t_ns\":").nth(1).and_then(|s| s.trim_end_matches(['}', '\n']).parse::<u64>().ok())
            else {
                continue;
            };
            if ev.contains("\"content\":\"tok\"") {
                ttft.get_or_insert(read_at - sent);
                delays.push(Duration::from_nanos(read_ns.saturating_sub(t_ns)));
            }
        }
    }
    Times { ttft: ttft.expect("a token event"), delays }
}

async fn round(client: &reqwest::Client, base: SocketAddr, streams: usize, tokens: u32, gap_us: u64) -> Vec<Times> {
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn({
                let client = client.clone();
                async move { one(&client, base, tokens, gap_us).await }
            })
        })
        .collect();
    let mut out = Vec::with_capacity(streams);
    for t in tasks {
        out.push(t.await.expect("stream task"));
    }
    out
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn us(d: Duration) -> String {
    format!("{:.0}µs", d.as_secs_f64() * 1e6)
}

fn criterion_ttft(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    up: SocketAddr,
    proxies: &[(&str, &Proxy)],
) {
    let mut g = c.benchmark_group("tap_ttft_single_stream");
    g.sample_size(50).measurement_time(Duration::from_secs(5));
    let paths = std::iter::once(("direct".to_string(), up))
        .chain(proxies.iter().map(|(n, p)| (format!("through_{n}"), p.addr)));
    for (name, base) in paths {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += one(client, base, 1, 0).await.ttft;
                    }
                    total
                })
            })
        });
    }
    g.finish();
}

/// TTFT of many one-token streams, one at a time, direct and through each proxy in turn:
/// enough samples (the table's single-stream row has 40) for
/// their p99 to be a p99 and not the worst of a few.
fn ttft_quantiles(rt: &tokio::runtime::Runtime, client: &reqwest::Client, up: SocketAddr, proxies: &[(&str, &Proxy)]) {
    const ROUNDS: usize = 2_000;
    let bases: Vec<SocketAddr> = std::iter::once(up).chain(proxies.iter().map(|(_, p)| p.addr)).collect();
    let mut ttft = vec![Vec::with_capacity(ROUNDS); bases.len()];
    let cpu_before: Vec<u64> = proxies.iter().map(|(_, p)| p.cpu_nanos()).collect();
    rt.block_on(async {
        for i in 0..ROUNDS {
            // Rotate which goes first, so that none always follows another.
            for j in 0..bases.len() {
                let k = (i + j) % bases.len();
                ttft[k].push(one(client, bases[k], 1, 0).await.ttft);
            }
        }
    });
    // A proxy idles while the other paths' streams run: its CPU here is that of its streams.
    let cpu_per_stream: Vec<f64> = proxies
        .iter()
        .zip(cpu_before)
        .map(|((_, p), before)| p.cpu_nanos().saturating_sub(before) as f64 / ROUNDS as f64 / 1e3)
        .collect();
    for v in &mut ttft {
        v.sort();
    }
    let names: Vec<&str> = proxies.iter().map(|(n, _)| *n).collect();
    println!("\ntap: TTFT of {ROUNDS} one-token streams each way, one at a time, in turn ({})", names.join(", "));
    let mut head = format!("{:>6} {:>10}", "q", "direct");
    for n in &names {
        head += &format!(" {n:>10} {:>10}", "added");
    }
    println!("{head}");
    for q in [0.5, 0.9, 0.99] {
        let d = quantile(&ttft[0], q);
        let mut row = format!("{q:>6} {:>10}", us(d));
        for v in &ttft[1..] {
            let t = quantile(v, q);
            row += &format!(" {:>10} {:>10}", us(t), us(t.saturating_sub(d)));
        }
        println!("{row}");
    }
    for (n, c) in names.iter().zip(cpu_per_stream) {
        let whose = if *n == "tap" { "the tap's".to_string() } else { format!("{n}'s") };
        println!("{whose} CPU per stream: {c:.1}µs");
    }
}

fn concurrency_table(rt: &tokio::runtime::Runtime, client: &reqwest::Client, up: SocketAddr, tap: &Proxy) {
    const TOKENS: u32 = 50;
    const GAP_US: u64 = 20_000;
    println!(
        "\ntap: {TOKENS} tokens per stream, one every {}ms; medians over rounds, direct and tap interleaved",
        GAP_US / 1000
    );
    println!(
        "{:>8} {:>13} {:>13} {:>13} {:>13} {:>15} {:>15} {:>14}",
        "streams",
        "TTFT p50 dir",
        "TTFT p50 tap",
        "TTFT p99 dir",
        "TTFT p99 tap",
        "event p50 +tap",
        "event p99 +tap",
        "CPU/1k ev/s"
    );
    for streams in [1usize, 64, 512] {
        let rounds = if streams == 1 { 40 } else { 5 };
        let (mut ttft, mut ev, mut cpu, mut events, mut wall) =
            ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()], 0.0, 0usize, 0.0);
        for _ in 0..rounds {
            for (i, base) in [up, tap.addr].into_iter().enumerate() {
                let (c0, t0) = (tap.cpu_seconds(), Instant::now());
                let times = rt.block_on(round(client, base, streams, TOKENS, GAP_US));
                if i == 1 {
                    cpu += tap.cpu_seconds() - c0;
                    wall += t0.elapsed().as_secs_f64();
                    events += times.iter().map(|t| t.delays.len()).sum::<usize>();
                }
                ttft[i].extend(times.iter().map(|t| t.ttft));
                ev[i].extend(times.iter().flat_map(|t| t.delays.iter().copied()));
            }
        }
        for v in ttft.iter_mut().chain(ev.iter_mut()) {
            v.sort();
        }
        let added = |q: f64| quantile(&ev[1], q).saturating_sub(quantile(&ev[0], q));
        // CPU seconds per second of wall time, scaled to 1,000 events per second.
        let cpu_per_k = cpu / wall / (events as f64 / wall / 1000.0);
        println!(
            "{:>8} {:>13} {:>13} {:>13} {:>13} {:>15} {:>15} {:>13.1}%",
            streams,
            us(quantile(&ttft[0], 0.5)),
            us(quantile(&ttft[1], 0.5)),
            us(quantile(&ttft[0], 0.99)),
            us(quantile(&ttft[1], 0.99)),
            us(added(0.5)),
            us(added(0.99)),
            cpu_per_k * 100.0
        );
    }
}

fn main() {
    proxies::serve_floor_if_asked();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let up = rt.block_on(start_upstream());
    let tap = Proxy::tap(up);
    let nginx = Proxy::nginx(up);
    if nginx.is_none() {
        eprintln!("no nginx on PATH: measuring the tap against direct and its floors only");
    }
    // Off by default: two more paths in the rotation leave each path's caches colder
    // between its streams, which raises every proxy's added TTFT a little.
    let floors: Vec<(&str, Proxy)> = if std::env::var_os("GOODPUT_TAP_BENCH_FLOORS").is_some_and(|v| v == "1") {
        [Floor::Hyper, Floor::Relay].into_iter().map(|f| (f.name(), Proxy::floor(f, up))).collect()
    } else {
        Vec::new()
    };
    let proxies: Vec<(&str, &Proxy)> = std::iter::once(("tap", &tap))
        .chain(nginx.as_ref().map(|n| ("nginx", n)))
        .chain(floors.iter().map(|(n, p)| (*n, p)))
        .collect();
    goodput::scrape::install_crypto_provider();
    let client =
        reqwest::Client::builder().no_proxy().tcp_nodelay(true).pool_max_idle_per_host(1024).build().expect("client");
    let mut c = Criterion::default().configure_from_args();
    criterion_ttft(&mut c, &rt, &client, up, &proxies);
    c.final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` does not, and runs each
    // criterion benchmark once as a test.
    if std::env::args().any(|a| a == "--bench") {
        ttft_quantiles(&rt, &client, up, &proxies);
        concurrency_table(&rt, &client, up, &tap);
    }
}
