//! The scrape client against real HTTP servers on 127.0.0.1: headers sent, bearer token
//! re-read from its file on every scrape, gzip decoded (and the body limit applied to
//! the decoded size), Content-Length over the limit refused before reading; targets
//! sharing one client share its connections but not their headers.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, header};
use axum::routing::get;
use goodput::scrape::{ACCEPT, FetchSpec, Fetcher, HttpClient, READ_BUFFER};

type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// Serves `body` (gzip-compressed when the client asks for it) and keeps request headers.
async fn server(body: Vec<u8>) -> (std::net::SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let router = Router::new().route(
        "/metrics",
        get(move |headers: HeaderMap| {
            let gzip = headers.get(header::ACCEPT_ENCODING).is_some_and(|v| v.to_str().unwrap_or("").contains("gzip"));
            s.lock().unwrap().push(headers);
            let body = body.clone();
            async move {
                if gzip {
                    ([(header::CONTENT_ENCODING, "gzip")], gzip_encode(&body))
                } else {
                    ([(header::CONTENT_ENCODING, "identity")], body)
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (addr, seen)
}

/// A gzip member with stored (uncompressed) deflate blocks: valid gzip that any decoder
/// reads, written here so the test needs no compression crate.
fn gzip_encode(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    let mut chunks = data.chunks(65535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(c) = chunks.next() {
        out.push(if chunks.peek().is_none() { 1 } else { 0 });
        let len = c.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

fn spec(addr: std::net::SocketAddr) -> FetchSpec {
    FetchSpec {
        url: format!("http://{addr}/metrics").parse().unwrap(),
        headers: vec![("X-Tenant".into(), "infra".into())],
        bearer_token_file: None,
        timeout: Duration::from_secs(2),
        body_limit: 1 << 20,
        gzip: true,
        follow_redirects: true,
    }
}

#[tokio::test]
async fn sends_headers_and_rereads_the_token_file_each_scrape() {
    let body = common::vllm_body(3, 1.0).into_bytes();
    let (addr, seen) = server(body.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "first-token\n").unwrap();
    let fetcher = Fetcher::new(FetchSpec { bearer_token_file: Some(token.clone()), ..spec(addr) }).unwrap();

    assert_eq!(fetcher.fetch().await.unwrap(), body, "gzip body decoded to the original");
    std::fs::write(&token, "rotated-token").unwrap();
    assert_eq!(fetcher.fetch().await.unwrap(), body);

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0]["authorization"], "Bearer first-token");
    assert_eq!(seen[1]["authorization"], "Bearer rotated-token");
    assert_eq!(seen[0]["x-tenant"], "infra");
    assert_eq!(seen[0]["accept"], ACCEPT);
    assert!(seen[0]["accept-encoding"].to_str().unwrap().contains("gzip"));
    assert_eq!(seen[0]["x-prometheus-scrape-timeout-seconds"], "2");
}

#[tokio::test]
async fn missing_token_file_is_a_token_file_error() {
    let (addr, seen) = server(b"x 1\n".to_vec()).await;
    let fetcher =
        Fetcher::new(FetchSpec { bearer_token_file: Some("/nonexistent/goodput-token".into()), ..spec(addr) }).unwrap();
    let err = fetcher.fetch().await.unwrap_err();
    assert_eq!(err.reason(), "token_file");
    assert!(err.message().contains("/nonexistent/goodput-token"), "{err}");
    assert!(seen.lock().unwrap().is_empty(), "no request without the token");
}

#[tokio::test]
async fn body_limit_counts_decoded_bytes() {
    // 2 MiB of text; gzip with stored blocks keeps it about that size on the wire, and
    // the limit must apply to what is decoded either way.
    let body = "a 1\n".repeat(512 * 1024).into_bytes();
    let (addr, _) = server(body.clone()).await;
    let small = Fetcher::new(spec(addr)).unwrap();
    assert_eq!(small.fetch().await.unwrap_err().reason(), "body_too_large");
    let big = Fetcher::new(FetchSpec { body_limit: 4 << 20, ..spec(addr) }).unwrap();
    assert_eq!(big.fetch().await.unwrap().len(), body.len());
    // Without gzip the declared Content-Length is refused before reading.
    let plain = Fetcher::new(FetchSpec { gzip: false, ..spec(addr) }).unwrap();
    let err = plain.fetch().await.unwrap_err();
    assert_eq!(err.reason(), "body_too_large");
    assert!(err.message().contains(&format!("{} bytes", body.len())), "{err}");
}

/// Serves `/metrics` with a `x-pad` header of `pad` bytes and `body` (sent as is, with
/// `encoding` as its Content-Encoding when given).
async fn raw_server(pad: usize, body: Vec<u8>, encoding: Option<&'static str>) -> std::net::SocketAddr {
    let router = Router::new().route(
        "/metrics",
        get(move || {
            let body = body.clone();
            async move {
                let mut headers = HeaderMap::new();
                headers.insert("x-pad", "p".repeat(pad).parse().unwrap());
                if let Some(e) = encoding {
                    headers.insert(header::CONTENT_ENCODING, e.parse().unwrap());
                }
                (headers, body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

/// A connection reads through a buffer of READ_BUFFER bytes: a body many times that size
/// arrives whole, a response head that fits is read, and one that does not is refused
/// with the reason rather than read into an ever larger buffer.
#[tokio::test]
async fn a_connection_reads_through_a_fixed_buffer_and_refuses_a_head_larger_than_it() {
    let body: Vec<u8> = (0..10_000).flat_map(|i| format!("x{{i=\"{i}\"}} {i}\n").into_bytes()).collect();
    assert!(body.len() > 8 * READ_BUFFER, "the body spans many reads: {} bytes", body.len());
    let fits = raw_server(READ_BUFFER / 2, body.clone(), None).await;
    let fetcher = Fetcher::new(FetchSpec { gzip: false, ..spec(fits) }).unwrap();
    for _ in 0..2 {
        assert_eq!(fetcher.fetch().await.unwrap(), body, "the body arrives whole, on a fresh and a kept connection");
    }

    let too_big = raw_server(READ_BUFFER + 1024, body, None).await;
    let err = Fetcher::new(FetchSpec { gzip: false, ..spec(too_big) }).unwrap().fetch().await.unwrap_err();
    assert_eq!(err.reason(), "read_error", "{err}");
    assert!(err.message().contains("too large"), "the reason is named: {err}");
    assert!(err.message().contains(&too_big.to_string()), "the URL is named: {err}");
}

/// A gzip body of several members (as `cat a.gz b.gz` makes) decodes to all of them; one
/// that is not gzip is a read error that says so; a body sent gzipped to a client that did
/// not ask for it is not decoded.
#[tokio::test]
async fn gzip_members_are_all_decoded_and_a_corrupt_body_says_why() {
    let (a, b) = ("x 1\n".repeat(100), "y 2\n".repeat(100));
    let mut two = gzip_encode(a.as_bytes());
    two.extend(gzip_encode(b.as_bytes()));
    let members = raw_server(0, two.clone(), Some("gzip")).await;
    assert_eq!(Fetcher::new(spec(members)).unwrap().fetch().await.unwrap(), format!("{a}{b}").into_bytes());
    let unasked = Fetcher::new(FetchSpec { gzip: false, ..spec(members) }).unwrap();
    assert_eq!(unasked.fetch().await.unwrap(), two, "not asked for, not decoded");

    let corrupt = raw_server(0, b"not gzip at all".to_vec(), Some("gzip")).await;
    let err = Fetcher::new(spec(corrupt)).unwrap().fetch().await.unwrap_err();
    assert_eq!(err.reason(), "read_error", "{err}");
    assert!(err.message().contains("gzip"), "{err}");
}

/// What a hand-written server does with a connection after its first answer.
#[derive(Clone, Copy, Debug)]
enum After {
    /// Closes it at once, without having said so.
    Close,
    /// Closes it when the next request arrives, unanswered: the race of a server closing
    /// an idle keep-alive connection just as the client sends on it.
    CloseOnNextRequest,
    /// Said `Connection: close` in the answer, but keeps answering whatever comes.
    SaidClose,
    /// Keeps answering.
    KeepAlive,
}

/// A server answering every request with `x 1`, treating connections as `after` says;
/// counts the connections it accepted.
async fn hand_server(after: After) -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    async fn read_head(s: &mut tokio::net::TcpStream) -> bool {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if !matches!(s.read(&mut byte).await, Ok(1)) {
                return false;
            }
            head.push(byte[0]);
        }
        true
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let close = if matches!(after, After::SaidClose) { "Connection: close\r\n" } else { "" };
                let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n{close}\r\nx 1\n");
                let mut answered = 0;
                while read_head(&mut s).await {
                    if answered > 0 && matches!(after, After::CloseOnNextRequest) {
                        return;
                    }
                    if s.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                    answered += 1;
                    if matches!(after, After::Close) {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// A connection is kept for the next scrape only while the server keeps it: one closed by
/// the server between scrapes, or as the next request goes out, costs the scrape nothing
/// (it goes out again on a new connection), and one the server said it closes is not used
/// again.
#[tokio::test]
async fn a_kept_connection_the_server_closed_costs_no_scrape() {
    use std::sync::atomic::Ordering;
    for (after, connections) in
        [(After::KeepAlive, 1), (After::Close, 3), (After::CloseOnNextRequest, 3), (After::SaidClose, 3)]
    {
        let (addr, accepted) = hand_server(after).await;
        let fetcher = Fetcher::new(FetchSpec { gzip: false, ..spec(addr) }).unwrap();
        for i in 0..3 {
            let body = fetcher.fetch().await.unwrap_or_else(|e| panic!("{after:?}, scrape {i}: {e}"));
            assert_eq!(body, b"x 1\n", "{after:?}");
            // Long enough for a close to arrive before the next scrape.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), connections, "{after:?}: connections opened for 3 scrapes");
    }
}

/// Serves `/metrics` and keeps, per request, the client's address (one per connection)
/// and the request headers.
async fn peer_server() -> (std::net::SocketAddr, Arc<Mutex<Vec<(std::net::SocketAddr, HeaderMap)>>>) {
    use axum::extract::ConnectInfo;
    let seen: Arc<Mutex<Vec<(std::net::SocketAddr, HeaderMap)>>> = Arc::default();
    let s = seen.clone();
    let router = Router::new().route(
        "/metrics",
        get(move |ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>, headers: HeaderMap| {
            s.lock().unwrap().push((peer, headers));
            async { "x 1\n" }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>()).await;
    });
    (addr, seen)
}

#[tokio::test]
async fn targets_sharing_a_client_reuse_its_connection_and_keep_their_own_headers() {
    let (addr, seen) = peer_server().await;
    let client = HttpClient::new().unwrap();
    let tenant = |t: &str| FetchSpec { headers: vec![("X-Tenant".into(), t.into())], ..spec(addr) };
    let a = Fetcher::with_client(&client, tenant("a")).unwrap();
    let b = Fetcher::with_client(&client, FetchSpec { timeout: Duration::from_secs(3), ..tenant("b") }).unwrap();
    for f in [&a, &b, &a] {
        assert_eq!(f.fetch().await.unwrap(), b"x 1\n");
    }
    // A fetcher with a client of its own opens its own connection.
    let own = Fetcher::new(tenant("c")).unwrap();
    own.fetch().await.unwrap();
    // Whether a scrape asks for gzip is its request's: a target without it shares the pool.
    let plain = Fetcher::with_client(&client, FetchSpec { gzip: false, ..tenant("d") }).unwrap();
    plain.fetch().await.unwrap();

    let seen = seen.lock().unwrap();
    let tenants: Vec<&str> = seen.iter().map(|(_, h)| h["x-tenant"].to_str().unwrap()).collect();
    assert_eq!(tenants, ["a", "b", "a", "c", "d"]);
    assert_eq!(seen[0].0, seen[1].0, "the second target reused the first one's connection");
    assert_eq!(seen[0].0, seen[2].0);
    assert_ne!(seen[3].0, seen[0].0, "a separate client, a separate connection");
    assert_eq!(seen[4].0, seen[0].0, "a target without gzip went through the shared connection");
    assert_eq!(seen[0].1["x-prometheus-scrape-timeout-seconds"], "2");
    assert_eq!(seen[1].1["x-prometheus-scrape-timeout-seconds"], "3");
    assert!(seen[0].1["accept-encoding"].to_str().unwrap().contains("gzip"));
    assert!(seen[4].1.get("accept-encoding").is_none_or(|v| !v.to_str().unwrap().contains("gzip")));
}

/// A server on `ip` that answers `/metrics` with `status` and `Location: location`, and
/// `/final` with a small exposition; it keeps the headers of every request.
async fn redirector(
    ip: &str,
    status: u16,
    location: impl Fn(std::net::SocketAddr) -> String,
) -> (std::net::SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let location = location(addr);
    let seen: Seen = Arc::default();
    let (s1, s2) = (seen.clone(), seen.clone());
    let status = axum::http::StatusCode::from_u16(status).unwrap();
    let router = Router::new()
        .route(
            "/metrics",
            get(move |headers: HeaderMap| {
                s1.lock().unwrap().push(headers);
                let location = location.clone();
                async move { (status, [(header::LOCATION, location)], "moved\n") }
            }),
        )
        .route(
            "/final",
            get(move |headers: HeaderMap| {
                s2.lock().unwrap().push(headers);
                async { "x_total 1\n" }
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (addr, seen)
}

/// A fetcher for `addr` with a bearer token and a custom header, both secrets.
fn with_credentials(addr: std::net::SocketAddr, dir: &std::path::Path, follow: bool) -> Fetcher {
    let token = dir.join("token");
    std::fs::write(&token, "s3cret-token").unwrap();
    Fetcher::new(FetchSpec { bearer_token_file: Some(token), follow_redirects: follow, ..spec(addr) }).unwrap()
}

#[tokio::test]
async fn a_redirect_to_another_host_is_followed_without_the_credentials() {
    goodput::scrape::install_crypto_provider();
    // 127.0.0.2 is another host as far as origins go, though it is loopback too.
    let (other, other_seen) = redirector("127.0.0.2", 307, |_| String::new()).await;
    let (addr, seen) = redirector("127.0.0.1", 307, move |_| format!("http://{other}/final")).await;
    let dir = tempfile::tempdir().unwrap();

    let body = with_credentials(addr, dir.path(), true).fetch().await.unwrap();
    assert_eq!(body, b"x_total 1\n");
    let first = seen.lock().unwrap()[0].clone();
    assert_eq!(first["authorization"], "Bearer s3cret-token");
    assert_eq!(first["x-tenant"], "infra");
    let second = other_seen.lock().unwrap().clone();
    assert_eq!(second.len(), 1);
    assert!(second[0].get("authorization").is_none(), "{:?}", second[0]);
    assert!(second[0].get("x-tenant").is_none(), "{:?}", second[0]);
    assert_eq!(second[0]["accept"], ACCEPT, "the non-secret headers still go");

    // Off, the redirect is a scrape error that says where it pointed and what to do.
    let err = with_credentials(addr, dir.path(), false).fetch().await.unwrap_err();
    assert_eq!(err.reason(), "redirect");
    assert!(err.message().contains(&format!("HTTP 307 Temporary Redirect) to http://{other}/final")), "{err}");
    assert!(err.message().contains("follow_redirects is off"), "{err}");
    assert_eq!(other_seen.lock().unwrap().len(), 1, "nothing was sent to the other host");
}

#[tokio::test]
async fn a_redirect_within_the_origin_keeps_the_credentials() {
    goodput::scrape::install_crypto_provider();
    let (addr, seen) = redirector("127.0.0.1", 301, |_| "/final".to_string()).await;
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(with_credentials(addr, dir.path(), true).fetch().await.unwrap(), b"x_total 1\n");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1]["authorization"], "Bearer s3cret-token");
    assert_eq!(seen[1]["x-tenant"], "infra");
}

#[tokio::test]
async fn redirects_to_link_local_addresses_and_loops_are_refused() {
    goodput::scrape::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    for metadata in ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://[::ffff:169.254.1.1]/"] {
        let (addr, _) = redirector("127.0.0.1", 307, |_| metadata.to_string()).await;
        let err = with_credentials(addr, dir.path(), true).fetch().await.unwrap_err();
        assert_eq!(err.reason(), "redirect", "{metadata}: {err}");
        assert!(err.message().contains("refusing the redirect to the link-local address"), "{err}");
    }
    let (addr, seen) = redirector("127.0.0.1", 302, |a| format!("http://{a}/metrics")).await;
    let err = with_credentials(addr, dir.path(), true).fetch().await.unwrap_err();
    assert_eq!(err.reason(), "redirect");
    assert!(err.message().contains("more than 10 redirects"), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 11);
}
