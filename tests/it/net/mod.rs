//! Plain loopback HTTP for the tests that start a server (the daemon binary, the demo, a
//! simulator) and read it back without an async runtime: a free port, and one GET.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A port free now: bind, read, release. Nothing listens on it afterwards (until the test
/// starts something there).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// The raw response, head and body, to `GET path` on 127.0.0.1:`port`; `None` when nothing
/// answers (yet) within 5 s.
pub fn get_raw(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The body of a 200 answer to `GET path`; `None` for anything else.
pub fn get_body(port: u16, path: &str) -> Option<String> {
    let raw = get_raw(port, path)?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}
