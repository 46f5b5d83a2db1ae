//! DNS discovery against a real DNS server on 127.0.0.1 (a UDP responder built on
//! hickory-proto, serving A and SRV records the test changes), and real engines: A records
//! with the configured port and SRV records with their own ports become targets, scraped on
//! the next tick; a record taken away makes its target vanish at the next refresh, while a
//! server failure (SERVFAIL) keeps the targets the names gave before.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{PATIENCE, until_async};

use common::vllm_body;
use goodput::report::Report;
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, SRV};
use hickory_proto::rr::{Name, RData, Record};

type Zone = Arc<Mutex<Vec<Record>>>;

/// Answers every query from `zone` (NXDOMAIN when nothing matches), or SERVFAIL while
/// `failing`; counts the queries.
async fn dns_server(zone: Zone, queries: Arc<AtomicU64>, failing: Arc<AtomicBool>) -> SocketAddr {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, peer)) = sock.recv_from(&mut buf).await else { return };
            let Ok(q) = Message::from_vec(&buf[..n]) else { continue };
            queries.fetch_add(1, Ordering::Relaxed);
            let mut resp = Message::response(q.metadata.id, q.metadata.op_code);
            resp.metadata.message_type = MessageType::Response;
            resp.metadata.recursion_desired = q.metadata.recursion_desired;
            resp.metadata.recursion_available = true;
            resp.metadata.authoritative = true;
            let mut answers = Vec::new();
            for query in &q.queries {
                resp.add_query(query.clone());
                let zone = zone.lock().unwrap();
                answers.extend(
                    zone.iter().filter(|r| r.name == *query.name() && r.record_type() == query.query_type()).cloned(),
                );
            }
            if failing.load(Ordering::Relaxed) {
                resp.metadata.response_code = ResponseCode::ServFail;
                answers.clear();
            } else if answers.is_empty() {
                resp.metadata.response_code = ResponseCode::NXDomain;
            }
            resp.add_answers(answers);
            let _ = sock.send_to(&resp.to_vec().unwrap(), peer).await;
        }
    });
    addr
}

/// A vLLM-like engine on `addr`; counts its scrapes.
async fn engine(addr: SocketAddr) -> (SocketAddr, Arc<AtomicU64>) {
    let served = Arc::new(AtomicU64::new(0));
    let s = served.clone();
    let router = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let n = s.fetch_add(1, Ordering::Relaxed) + 1;
            async move { vllm_body(n, 1_700_000_000.0) }
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (addr, served)
}

fn a(name: &str, ip: Ipv4Addr) -> Record {
    Record::from_rdata(Name::from_str(name).unwrap(), 0, RData::A(A(ip)))
}

fn srv(name: &str, port: u16, target: &str) -> Record {
    Record::from_rdata(
        Name::from_str(name).unwrap(),
        0,
        RData::SRV(SRV::new(0, 10, port, Name::from_str(target).unwrap())),
    )
}

async fn until(d: &goodput::daemon::Daemon, what: &str, ok: impl Fn(&Report) -> bool) -> Arc<Report> {
    let began = std::time::Instant::now();
    while began.elapsed() < PATIENCE {
        let r = d.report();
        if ok(&r) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not seen within {PATIENCE:?}; last report: {:?}", d.report().targets);
}

fn present_and_up(r: &Report, name: &str) -> bool {
    r.targets.iter().any(|t| t.target == name && t.health.up && t.health.vanished_ms.is_none())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_and_srv_records_become_targets_and_a_removed_record_vanishes() {
    goodput::scrape::install_crypto_provider();
    // Two engines on one port, at two loopback addresses: the A records' targets.
    let (first, _) = engine("127.0.0.1:0".parse().unwrap()).await;
    let port = first.port();
    let (_, second_served) = engine(SocketAddr::from(([127, 0, 0, 2], port))).await;
    // Two engines at their own ports: the SRV records' targets.
    let (srv1, _) = engine("127.0.0.1:0".parse().unwrap()).await;
    let (srv2, _) = engine("127.0.0.1:0".parse().unwrap()).await;

    let zone: Zone = Arc::new(Mutex::new(vec![
        a("engines.test.", Ipv4Addr::new(127, 0, 0, 1)),
        a("engines.test.", Ipv4Addr::new(127, 0, 0, 2)),
        srv("_metrics._tcp.vllm.test.", srv1.port(), "localhost."),
        srv("_metrics._tcp.vllm.test.", srv2.port(), "localhost."),
    ]));
    let queries = Arc::new(AtomicU64::new(0));
    let failing = Arc::new(AtomicBool::new(false));
    let ns = dns_server(zone.clone(), queries.clone(), failing.clone()).await;

    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 200ms
scrape: {{interval: 200ms, timeout: 150ms}}
discovery:
  - dns: {{names: [engines.test], type: A, port: {port}, refresh: 1s, nameserver: '{ns}'}}
  - dns: {{names: [_metrics._tcp.vllm.test], type: SRV, refresh: 1s, nameserver: '{ns}'}}
"
    );
    let cfg = goodput::config::from_str(&yaml, "dns.yaml").expect("valid config").config;
    assert!(cfg.targets.is_empty(), "discovery alone is a valid config");
    let d = goodput::daemon::start(cfg, Arc::new(goodput::daemon::clock::SystemClock)).await.expect("daemon starts");

    let names = [
        format!("127.0.0.1:{port}"),
        format!("127.0.0.2:{port}"),
        format!("localhost:{}", srv1.port()),
        format!("localhost:{}", srv2.port()),
    ];
    let r = until(&d, "every DNS target up", |r| names.iter().all(|n| present_and_up(r, n))).await;
    assert_eq!(r.targets.len(), 4, "{:?}", r.targets.iter().map(|t| &t.target).collect::<Vec<_>>());
    let t = r.targets.iter().find(|t| t.target == names[1]).unwrap();
    assert_eq!(t.health.labels.get("discovery").map(String::as_str), Some("dns"));
    assert!(second_served.load(Ordering::Relaxed) > 0, "the engine at 127.0.0.2 was never scraped");

    // The names are asked again every refresh: a record taken away takes its target.
    let asked = queries.load(Ordering::Relaxed);
    zone.lock().unwrap().retain(|r| !matches!(&r.data, RData::A(A(ip)) if *ip == Ipv4Addr::new(127, 0, 0, 2)));
    let r = until(&d, "the removed record's target vanished", |r| {
        r.targets.iter().any(|t| t.target == names[1] && t.health.vanished_ms.is_some())
    })
    .await;
    assert!(queries.load(Ordering::Relaxed) > asked, "the names were not resolved again");
    for n in [&names[0], &names[2], &names[3]] {
        assert!(present_and_up(&r, n), "{n} should stay");
    }

    // The server fails: the names are still asked, and their targets stay.
    failing.store(true, Ordering::Relaxed);
    let asked = queries.load(Ordering::Relaxed);
    until_async(PATIENCE, "the names asked while the server failed", async || {
        (queries.load(Ordering::Relaxed) >= asked + 4).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = d.report();
    for n in [&names[0], &names[2], &names[3]] {
        assert!(present_and_up(&r, n), "{n} was dropped on a SERVFAIL");
    }
    d.shutdown().await;
}
