//! The library side of `goodput replay`: recorded scrapes evaluated in virtual time.
//!
//! [`VirtualDaemon`] is the daemon's state without I/O: it takes scrape outcomes with
//! their timestamps and answers a [`Report`](crate::report::Report) for any instant.
//! [`replay`] feeds it a recording (docs/replay.md layout, see [`recording`]) and yields
//! one [`Frame`] per evaluation instant: the multiples of `step` on the Unix epoch from
//! the first to the last scrape. `goodput replay` prints [`Frame::json_line`].

pub mod recording;
#[cfg(test)]
mod tests;
mod virtual_daemon;

pub use crate::target::ScrapeFailure;
pub use recording::{Recording, ReplayError, replay, replay_with, replay_with_requests};
pub use virtual_daemon::{Frame, ReplayTarget, VirtualDaemon, instants};
