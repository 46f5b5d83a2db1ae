//! What every listener of the daemon shares: the HTTP server with its timeouts and connection
//! cap ([`server`]), request bodies read at a pace ([`paced`]), and the descriptor budget the
//! caps are fitted to ([`fds`]). The /metrics server (crate::serve), the tap (crate::tap) and
//! the OTLP receiver (crate::otlp) each serve through them; none of them imports another.

mod activity;
pub mod fds;
pub mod paced;
pub mod server;
