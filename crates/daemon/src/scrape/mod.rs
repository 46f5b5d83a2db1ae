//! Scraping one target: an HTTP fetch with every guard a hostile or broken endpoint
//! needs (timeout, streaming size limit, gzip, auth), then parse and adapt.
//!
//! [`Fetcher`] is the I/O shell, going through the [`HttpClient`] a daemon's targets
//! share; [`ingest`] is pure, and [`ingest_reusing`] skips the adapter for a scrape whose
//! series are the previous scrape's ([`Reuse`]). Every failure is a [`ScrapeError`] whose
//! [`reason`](ScrapeError::reason) becomes the `reason` label of
//! `llm_slo_scrape_errors_total`.

mod client;
mod error;
mod fetch;
mod ingest;
mod reuse;

pub use client::{ClientError, HttpClient, READ_BUFFER, install_crypto_provider};
pub use error::ScrapeError;
pub use fetch::{ACCEPT, FetchSpec, Fetcher};
pub use ingest::{ingest, ingest_reusing};
pub use reuse::Reuse;
