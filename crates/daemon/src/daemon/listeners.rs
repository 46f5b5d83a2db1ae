//! The daemon's listeners (the HTTP server, the OTLP receiver, each target's tap) and how a
//! config reload changes them (docs/discovery.md#reload).
//!
//! A listener whose settings changed is served anew: on the same socket when its address
//! did not change, so no connection attempt is refused, or on a new socket bound to the new
//! address. The previous server stops accepting and lets its requests in progress finish
//! under the settings they started with: a streamed completion through the tap, an export
//! being decoded, a /metrics being written. A listener the new config drops stops the same
//! way. Binding is the part that can fail (an address taken, a port not allowed), so a
//! reload binds everything it needs first ([`Listeners::plan`]) and changes nothing if one
//! bind fails; starting the servers ([`Listeners::commit`]) cannot fail.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::{Config, OtlpConfig, TapConfig};
use crate::inbox::Inbox;
use crate::listen::fds::{self, Caps};
use crate::listen::server::ServerLimits;
use crate::otlp::metrics::OtlpStats;
use crate::serve::{self, Shared};
use crate::tap::TapMetrics;

/// One listening socket and the server on it now.
struct Socket {
    socket: Arc<TcpListener>,
    /// The address the config names (port 0 stays 0) and the one bound.
    configured: SocketAddr,
    addr: SocketAddr,
    /// Stops the server on it now (not the socket, which a successor may share).
    stop: watch::Sender<bool>,
}

struct Http {
    sock: Socket,
    limits: ServerLimits,
}

struct Otlp {
    sock: Socket,
    config: OtlpConfig,
    cap: usize,
    /// What the receiver maps spans with: each target's name and service name.
    routes: Vec<(String, String)>,
    handle: crate::otlp::Handle,
}

struct TapRun {
    sock: Socket,
    config: TapConfig,
    cap: usize,
    tap: crate::tap::Tap,
}

/// The running listeners.
pub struct Listeners {
    inbox: Inbox,
    shared: Shared,
    /// The daemon's stop: every server, current or retired, ends with it.
    global: watch::Receiver<bool>,
    /// Every server ever started, current or retired (finishing its requests), with the
    /// tasks that pass the daemon's stop on to them: shutdown waits for all of them.
    tasks: JoinSet<()>,
    http: Option<Http>,
    otlp: Option<Otlp>,
    taps: BTreeMap<String, TapRun>,
}

/// Sockets bound for a config, not yet served: new ones where an address is new, `None`
/// where the running listener's socket is kept.
pub struct Plan {
    http: Option<TcpListener>,
    otlp: Option<TcpListener>,
    taps: BTreeMap<String, TcpListener>,
    caps: Caps,
    /// The HTTP server's address under the new config.
    pub addr: SocketAddr,
}

/// The OTLP receiver's routes of `c`: every target's name and service name.
fn routes(c: &Config) -> Vec<(String, String)> {
    c.targets.iter().map(|t| (t.name.clone(), t.service_name().to_string())).collect()
}

/// The HTTP server's guards, with its connection cap fitted under the descriptor limit
/// (listen::fds). No endpoint takes a body, so one gets no longer than a header.
fn server_limits(config: &Config, max_connections: usize) -> ServerLimits {
    let s = config.server;
    ServerLimits {
        max_connections,
        header_read_timeout: s.header_read_timeout,
        idle_timeout: s.idle_timeout,
        body_read_timeout: s.header_read_timeout,
        date_header: true,
    }
}

fn bound(socket: &TcpListener) -> std::io::Result<SocketAddr> {
    socket.local_addr()
}

impl Listeners {
    pub fn new(shared: Shared, inbox: Inbox, global: watch::Receiver<bool>) -> Listeners {
        Listeners { inbox, shared, global, tasks: JoinSet::new(), http: None, otlp: None, taps: BTreeMap::new() }
    }

    /// The HTTP server's address (port 0 resolved).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(|h| h.sock.addr)
    }

    pub fn otlp(&self) -> Option<&crate::otlp::Handle> {
        self.otlp.as_ref().map(|o| &o.handle)
    }

    pub fn tap(&self, target: &str) -> Option<&crate::tap::Tap> {
        self.taps.get(target).map(|t| &t.tap)
    }

    /// Binds what `new` needs that `running` (the listeners as they are) does not have on
    /// the same address, without touching anything running. Fails, naming the key, when an
    /// address cannot be bound; the sockets bound before it are closed again.
    pub async fn plan(running: &Mutex<Listeners>, new: &Config) -> std::io::Result<Plan> {
        let (http, otlp, taps) = {
            let l = running.lock().unwrap_or_else(|e| e.into_inner());
            let taps: BTreeMap<String, SocketAddr> =
                l.taps.iter().map(|(n, t)| (n.clone(), t.sock.configured)).collect();
            (
                l.http.as_ref().map(|h| (h.sock.configured, h.sock.addr)),
                l.otlp.as_ref().map(|o| o.sock.configured),
                taps,
            )
        };
        let caps = fds::caps(new, fds::nofile_limit());
        let (http, addr) = match http {
            Some((configured, addr)) if configured == new.listen => (None, addr),
            _ => {
                let s = TcpListener::bind(new.listen)
                    .await
                    .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", new.listen)))?;
                let addr = bound(&s)?;
                (Some(s), addr)
            }
        };
        let otlp = match &new.otlp {
            Some(o) if otlp != Some(o.listen) => Some(crate::otlp::Receiver::socket(o).await?),
            _ => None,
        };
        let mut bound_taps = BTreeMap::new();
        for t in &new.targets {
            let Some(tap) = &t.tap else { continue };
            if taps.get(&t.name) != Some(&tap.listen) {
                bound_taps.insert(t.name.clone(), crate::tap::bind(&t.name, tap).await?);
            }
        }
        Ok(Plan { http, otlp, taps: bound_taps, caps, addr })
    }

    /// A stop for one server: set by [`Socket::stop`], or by the daemon's stop.
    fn stop_for(&mut self) -> (watch::Sender<bool>, watch::Receiver<bool>) {
        let (own, mut own_rx) = watch::channel(false);
        let (tx, rx) = watch::channel(false);
        let mut global = self.global.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                _ = global.wait_for(|s| *s) => {}
                _ = own_rx.wait_for(|s| *s) => {}
                // The server ended by itself (its task was dropped).
                _ = tx.closed() => return,
            }
            let _ = tx.send(true);
        });
        (own, rx)
    }

    /// Serves what `new` configures, on the sockets of `plan` or the running ones, starting
    /// each listener whose settings changed anew and stopping those `new` drops. The
    /// servers replaced let their requests in progress finish. `old` is the config the
    /// running listeners were started for; `None` at start.
    pub fn commit(&mut self, old: Option<&Config>, new: &Config, plan: Plan) {
        while self.tasks.try_join_next().is_some() {}
        for why in &plan.caps.lowered {
            if old.is_none_or(|o| !fds::caps(o, fds::nofile_limit()).lowered.contains(why)) {
                tracing::warn!("{why}");
            }
        }
        self.commit_http(new, plan.http, plan.caps.server);
        self.commit_otlp(old, new, plan.otlp, plan.caps.otlp);
        let mut fresh = plan.taps;
        let mut running = std::mem::take(&mut self.taps);
        for t in &new.targets {
            let Some(tap) = &t.tap else { continue };
            let cap = plan.caps.tap(&t.name);
            let was = match running.remove(&t.name) {
                Some(w) if w.config == *tap && w.cap == cap => {
                    self.taps.insert(t.name.clone(), w);
                    continue;
                }
                was => was,
            };
            let (socket, stats) = match (fresh.remove(&t.name), &was) {
                (Some(s), w) => (Arc::new(s), w.as_ref().map_or_else(Arc::default, |w| w.tap.stats.clone())),
                (None, Some(w)) => (w.sock.socket.clone(), w.tap.stats.clone()),
                (None, None) => continue, // plan binds a socket for every new tap
            };
            let (own, stop) = self.stop_for();
            let inbox = self.inbox.clone();
            match crate::tap::start_on(socket.clone(), &t.name, tap, cap, inbox, stats, stop, &mut self.tasks) {
                Ok(started) => {
                    if let Some(w) = was {
                        let _ = w.sock.stop.send(true);
                    }
                    let sock = Socket { addr: started.addr, socket, configured: tap.listen, stop: own };
                    self.taps.insert(t.name.clone(), TapRun { sock, config: tap.clone(), cap, tap: started });
                }
                Err(e) => {
                    tracing::error!(target_name = %t.name, "the tap cannot start: {e}");
                    if let Some(w) = was {
                        self.taps.insert(t.name.clone(), w);
                    }
                }
            }
        }
        for (name, gone) in running {
            tracing::info!(target_name = %name, "tap stopped; requests in progress finish");
            let _ = gone.sock.stop.send(true);
        }
        let metrics = self.taps.iter().map(|(n, t)| (n.clone(), t.tap.stats.clone())).collect();
        self.shared.taps.store(Arc::new(TapMetrics(metrics)));
    }

    fn commit_http(&mut self, new: &Config, socket: Option<TcpListener>, cap: usize) {
        let limits = server_limits(new, cap);
        let socket = match (socket, &self.http) {
            (None, Some(h)) if h.limits == limits => return,
            (Some(s), _) => Arc::new(s),
            (None, Some(h)) => h.sock.socket.clone(),
            (None, None) => return,
        };
        let Ok(addr) = bound(&socket) else { return };
        let (own, stop) = self.stop_for();
        let router = serve::router(self.shared.clone());
        self.tasks.spawn(crate::listen::server::serve(socket.clone(), router, limits, self.shared.http.clone(), stop));
        if let Some(old) = self.http.take() {
            let _ = old.sock.stop.send(true);
            if old.sock.addr != addr {
                tracing::info!(%addr, was = %old.sock.addr, "goodput is listening at its new address; requests in progress on the old one finish");
            }
        }
        self.http = Some(Http { sock: Socket { socket, configured: new.listen, addr, stop: own }, limits });
    }

    fn commit_otlp(&mut self, old: Option<&Config>, new: &Config, socket: Option<TcpListener>, cap: usize) {
        let Some(config) = new.otlp else {
            if let Some(o) = self.otlp.take() {
                tracing::info!("OTLP receiver stopped; exports in progress finish");
                let _ = o.sock.stop.send(true);
            }
            self.shared.otlp.store(Arc::new(None));
            return;
        };
        let routes = routes(new);
        if socket.is_none()
            && let Some(o) = &self.otlp
            && o.config == config
            && o.cap == cap
            && o.routes == routes
        {
            return;
        }
        let socket = match (socket, &self.otlp) {
            (Some(s), _) => Arc::new(s),
            (None, Some(o)) => o.sock.socket.clone(),
            (None, None) => return,
        };
        let names: Vec<String> = new.targets.iter().map(|t| t.name.clone()).collect();
        let same_targets = old.is_some_and(|o| o.targets.iter().map(|t| &t.name).eq(names.iter()));
        let stats = match &self.otlp {
            Some(o) if same_targets => o.handle.stats(),
            _ => Arc::new(OtlpStats::new(names)),
        };
        let receiver = crate::otlp::Receiver::on(socket.clone(), &config, &new.targets, self.inbox.clone(), stats);
        let (own, stop) = self.stop_for();
        match receiver.spawn(cap, stop, &mut self.tasks) {
            Ok(handle) => {
                if let Some(o) = self.otlp.take() {
                    let _ = o.sock.stop.send(true);
                }
                self.shared.otlp.store(Arc::new(Some(handle.stats())));
                let sock = Socket { socket, configured: config.listen, addr: handle.addr, stop: own };
                self.otlp = Some(Otlp { sock, config, cap, routes, handle });
            }
            Err(e) => tracing::error!("the OTLP receiver cannot start: {e}"),
        }
    }

    /// Waits, once the daemon stops, for every server to finish its requests (the caller
    /// bounds how long).
    pub async fn drain(listeners: Arc<Mutex<Listeners>>, mut global: watch::Receiver<bool>) {
        if global.wait_for(|s| *s).await.is_err() {
            return;
        }
        let mut tasks = std::mem::take(&mut listeners.lock().unwrap_or_else(|e| e.into_inner()).tasks);
        while tasks.join_next().await.is_some() {}
    }
}
