//! Per-target window store: a bounded ring of scrapes, kept as compact number columns.
//!
//! Each scrape is reduced to the canonical numbers evaluation reads ([`STORED_HISTOGRAMS`]
//! buckets, [`STORED_COUNTERS`], [`STORED_GAUGES`]), one value per source series. The
//! series identities (model, quantity, shard, `le`) and the restart markers (`_created`,
//! process start) live in a shared [`Layout`] that consecutive scrapes reuse through an
//! `Arc`. Values are a keyframe (packed against zeros) at least every [`KEYFRAME_EVERY`]
//! scrapes, packed differences from the previous scrape in between (bit-exact; see
//! `column`), in segments of one layout (`full`).
//!
//! Memory bound (docs/memory.md): a vLLM V1 rank exposes ~85 latency buckets plus 5
//! counters and 1 gauge, ~156 bytes per scrape; one hour at a 1 s interval is ~0.56 MB
//! per rank (measured by `window::tests::one_hour_at_one_second_stays_small`). Points
//! older than the longest window are dropped on every push, and the ring never holds
//! more than [`MAX_POINTS`] scrapes whatever the interval.
//!
//! Beyond the longest configured window only the alert-only windows read a scrape, and
//! only a few of its series: the evaluation has the store re-encode such scrapes thin
//! ([`TargetWindows::thin_before`], `thin`), in blocks that cost a few bytes per scrape.
//!
//! Points carry sequence numbers ([`TargetWindows::seq_range`]) so that the incremental
//! evaluation (`evaluate::incremental`) reads each one once as it enters a window and
//! again as it leaves; the points a push drops wait for it ([`TargetWindows::keep_dropped`]).
//! [`TargetWindows::stored_points`] takes a store apart, decoded, and
//! [`TargetWindows::push_values`] rebuilds one point by point (a snapshot restored from disk,
//! `saved`, which saves the store in its own encoding).

mod column;
mod full;
mod layout;
pub mod saved;
mod store;
#[cfg(test)]
pub(crate) mod tests;
mod thin;

pub use column::Column;
pub use full::KEYFRAME_EVERY;
pub use layout::{
    LATENCY_HISTOGRAMS, Layout, Quantity, STORED_COUNTERS, STORED_GAUGES, STORED_HISTOGRAMS, SeriesKey, stored_series,
};
pub use store::{MAX_DROPPED, MAX_POINTS, TargetWindows};
pub use thin::{BLOCK, Buckets, Kept};
