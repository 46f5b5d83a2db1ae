//! Where the request path's records meet the evaluation loop.
//!
//! The tap and the OTLP receiver push [`RequestRecord`]s into one bounded [`Inbox`]; the
//! evaluator drains it once per tick into the pure request store. A flood cannot grow the
//! inbox without limit: past its capacity records are dropped and counted, and the count is
//! exported, so a gap in the exact numbers is visible rather than silent.

mod inbox;

pub use goodput_core::request::RequestRecord;
pub use inbox::{DEFAULT_MAX_BYTES, Inbox, InboxStats, record_bytes};
