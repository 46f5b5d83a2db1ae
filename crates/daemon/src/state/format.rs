//! The snapshot file: a header, then independent sections, each framed with its length and
//! a CRC-32 of its bytes (docs/architecture.md#state-that-survives-restarts).
//!
//! ```text
//! "GPSTATE\0"  version: u32 LE  saved_at_ms: i64 LE
//! { length: u32 LE  crc32: u32 LE  postcard(Section) } …
//! ```
//!
//! One section is one part (windows, budgets, request series, alerts) of one target, so a
//! bad byte costs that part of that target only. A length that runs past the end (a
//! truncated file) or a checksum that does not match makes the section corrupt; after a
//! bad length the rest of the file cannot be framed and is corrupt too. A file of another
//! version is not read at all.

use serde::{Deserialize, Serialize};

use crate::alert::saved::SavedAlert;
use crate::budget::SavedBudgets;
use crate::request::SavedRequests;
use crate::window::saved::SavedWindows;

pub const MAGIC: &[u8; 8] = b"GPSTATE\0";
/// Bumped whenever a saved type changes shape: postcard is not self-describing, so an old
/// file read as a new shape would be garbage, and is refused instead.
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 8 + 4 + 8;
const FRAME_LEN: usize = 8;

/// One part of one target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Section {
    pub target: String,
    /// A checksum of the target's URL and engine (not the URL itself, which may carry
    /// credentials): a target of the same name that now points elsewhere starts empty.
    pub identity: u32,
    pub part: Part,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Part {
    Windows(SavedWindows),
    Budgets(SavedBudgets),
    Requests(SavedRequests),
    Alerts(Vec<SavedAlert>),
}

impl Part {
    pub fn name(&self) -> &'static str {
        match self {
            Part::Windows(_) => "windows",
            Part::Budgets(_) => "budgets",
            Part::Requests(_) => "requests",
            Part::Alerts(_) => "alerts",
        }
    }
}

pub fn header(saved_at_ms: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&saved_at_ms.to_le_bytes());
    out
}

/// A section with its frame; `None` if it cannot be encoded (a section over 4 GiB).
pub fn frame(section: &Section) -> Option<Vec<u8>> {
    let body = postcard::to_allocvec(section).ok()?;
    let len = u32::try_from(body.len()).ok()?;
    let mut out = Vec::with_capacity(FRAME_LEN + body.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Some(out)
}

/// Why a whole file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileError {
    /// Not a snapshot, or cut inside its header.
    NotASnapshot,
    /// Written by a version of goodput with another format.
    Version(u32),
}

/// Why one section cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Corrupt {
    /// Its length runs past the end of the file.
    Truncated,
    Checksum,
    /// The checksum matches but the bytes do not decode.
    Decode,
}

/// A file's sections, in order, each read or corrupt, and when it was saved.
///
/// The sections are decoded one at a time as the iterator is advanced, so that a restore
/// holds one decoded section beside the file's bytes, not all of them at once.
pub fn decode(bytes: &[u8]) -> Result<(i64, Sections<'_>), FileError> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(FileError::NotASnapshot);
    }
    let version = word(bytes, 8);
    if version != VERSION {
        return Err(FileError::Version(version));
    }
    let mut at_bytes = [0u8; 8];
    at_bytes.copy_from_slice(&bytes[12..20]);
    let saved_at_ms = i64::from_le_bytes(at_bytes);
    Ok((saved_at_ms, Sections { bytes, pos: HEADER_LEN }))
}

fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The sections of a snapshot, each read or corrupt ([`decode`]).
#[derive(Debug)]
pub struct Sections<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Iterator for Sections<'_> {
    type Item = Result<Section, Corrupt>;

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.bytes;
        if self.pos >= bytes.len() {
            return None;
        }
        if bytes.len() - self.pos < FRAME_LEN {
            self.pos = bytes.len();
            return Some(Err(Corrupt::Truncated));
        }
        let (len, crc) = (word(bytes, self.pos) as usize, word(bytes, self.pos + 4));
        let start = self.pos + FRAME_LEN;
        let Some(body) = bytes.get(start..start.saturating_add(len)) else {
            // After a bad length nothing further can be framed.
            self.pos = bytes.len();
            return Some(Err(Corrupt::Truncated));
        };
        self.pos = start + len;
        if crc32fast::hash(body) != crc {
            return Some(Err(Corrupt::Checksum));
        }
        Some(postcard::from_bytes::<Section>(body).map_err(|_| Corrupt::Decode))
    }
}
