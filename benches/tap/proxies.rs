//! The proxies the bench sends streams through, each in its own process: the real daemon's
//! tap, nginx, and (with `GOODPUT_TAP_BENCH_FLOORS=1`) two floors of the tap's own stack,
//! served by this bench's binary started again ([`serve_floor_if_asked`]; a script can start
//! one the same way: `GOODPUT_TAP_BENCH_SERVE=hyper <bench binary> LISTEN UPSTREAM`):
//!
//! - **hyper**: the plainest reverse proxy hyper makes: one kept upstream connection per
//!   client connection, both driven in the client connection's task, requests and responses
//!   passed on as hyper hands them over. No header is touched and nothing is measured:
//!   what any proxy built on hyper's HTTP/1 server and client pays, and nothing of the tap.
//! - **relay**: tokio copying bytes both ways between the client's connection and one to the
//!   upstream, parsing nothing: what the runtime and the sockets cost a proxy.
//!
//! The tap is an HTTP proxy and cannot be a relay; the relay shows how much of what the tap
//! adds is HTTP handling (docs/benchmarks.md#the-tap-against-its-own-floors-2026-12-06).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// The variable that starts this bench's binary as a floor proxy (its value the floor's
/// name, its arguments the address to listen on and the upstream's).
const SERVE: &str = "GOODPUT_TAP_BENCH_SERVE";

/// A floor of the tap's stack ([module docs](self)).
#[derive(Clone, Copy)]
pub enum Floor {
    Hyper,
    Relay,
}

impl Floor {
    pub fn name(self) -> &'static str {
        match self {
            Floor::Hyper => "hyper",
            Floor::Relay => "relay",
        }
    }
}

/// When this process was started as a floor proxy, serves it until killed; otherwise returns.
pub fn serve_floor_if_asked() {
    let Ok(name) = std::env::var(SERVE) else { return };
    let floor = [Floor::Hyper, Floor::Relay]
        .into_iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("{SERVE}={name:?}: expected hyper or relay"));
    let mut args = std::env::args().skip(1).map(|a| a.parse::<SocketAddr>().expect("a socket address"));
    let (listen, upstream) = (args.next().expect("listen address"), args.next().expect("upstream address"));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(listen).await.expect("bind the floor's port");
        loop {
            let Ok((client, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                // A connection the bench dropped ends here; nothing to report.
                let _ = match floor {
                    Floor::Hyper => hyper_proxy(client, upstream).await,
                    Floor::Relay => relay(client, upstream).await,
                };
            });
        }
    });
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn relay(mut client: TcpStream, upstream: SocketAddr) -> Result<(), BoxError> {
    client.set_nodelay(true)?;
    let mut up = TcpStream::connect(upstream).await?;
    up.set_nodelay(true)?;
    tokio::io::copy_bidirectional(&mut client, &mut up).await?;
    Ok(())
}

async fn hyper_proxy(client: TcpStream, upstream: SocketAddr) -> Result<(), BoxError> {
    client.set_nodelay(true)?;
    let up = TcpStream::connect(upstream).await?;
    up.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake::<_, Incoming>(TokioIo::new(up)).await?;
    // HTTP/1 serves one request at a time on a connection: the lock is never contended.
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let service = service_fn(move |req: hyper::Request<Incoming>| {
        let sender = sender.clone();
        async move {
            let mut s = sender.lock().await;
            s.ready().await?;
            s.send_request(req).await
        }
    });
    let server = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(client), service);
    tokio::select! {
        r = server => r?,
        r = conn => r?,
    }
    Ok(())
}

/// A proxy in its own process in front of the upstream: the real daemon's tap, nginx as the
/// reverse proxy to compare it with, or one of the [floors](Floor). Killed (by PID) on drop.
pub struct Proxy {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("port").port()
}

impl Proxy {
    /// The real `goodput` binary with a tap in front of the upstream.
    pub fn tap(upstream: SocketAddr) -> Proxy {
        let (listen, tap) = (free_port(), free_port());
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = dir.path().join("goodput.yaml");
        std::fs::write(
            &cfg,
            format!(
                "listen: 127.0.0.1:{listen}\ntargets:\n  - name: bench\n    url: http://{upstream}/metrics\n    tap: {{listen: '127.0.0.1:{tap}', upstream: 'http://{upstream}'}}\n"
            ),
        )
        .expect("write the config");
        let child = Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(["run", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start goodput");
        Proxy::listening(child, tap, dir, "the tap")
    }

    /// nginx as a streaming reverse proxy, as `nginx.conf` beside this file sets it up;
    /// `None` when no `nginx` is on PATH.
    pub fn nginx(upstream: SocketAddr) -> Option<Proxy> {
        let port = free_port();
        let dir = tempfile::tempdir().expect("temp dir");
        let conf = dir.path().join("nginx.conf");
        std::fs::write(
            &conf,
            include_str!("nginx.conf")
                .replace("@DIR@", &dir.path().display().to_string())
                .replace("@UPSTREAM@", &upstream.to_string())
                .replace("@PORT@", &port.to_string()),
        )
        .expect("write the nginx config");
        let child = match Command::new("nginx")
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => panic!("start nginx: {e}"),
        };
        Some(Proxy::listening(child, port, dir, "nginx"))
    }

    /// This bench's own binary, started again as `floor` in front of the upstream.
    pub fn floor(floor: Floor, upstream: SocketAddr) -> Proxy {
        let port = free_port();
        let exe = std::env::current_exe().expect("the bench's own path");
        let child = Command::new(exe)
            .env(SERVE, floor.name())
            .arg(format!("127.0.0.1:{port}"))
            .arg(upstream.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a floor proxy");
        Proxy::listening(child, port, tempfile::tempdir().expect("temp dir"), floor.name())
    }

    fn listening(child: Child, port: u16, dir: tempfile::TempDir, what: &str) -> Proxy {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let p = Proxy { child, addr, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "{what} did not listen on {addr} within 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        p
    }

    /// User plus system CPU seconds the proxy's process has used.
    pub fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
        let f: Vec<f64> = rest.split_whitespace().map(|s| s.parse().unwrap_or(0.0)).collect();
        // utime and stime are fields 14 and 15 of proc(5); `rest` starts at field 3.
        // SAFETY: sysconf has no preconditions.
        let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / tick
    }

    /// Nanoseconds the proxy's threads have spent on a CPU: the sum of each live thread's
    /// first `schedstat` field, finer than `cpu_seconds`' clock ticks.
    pub fn cpu_nanos(&self) -> u64 {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.child.id())) else { return 0 };
        tasks
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }
}
