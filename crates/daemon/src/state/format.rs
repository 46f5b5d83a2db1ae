//! The snapshot file: a header, then independent sections, each framed with its length and
//! a CRC-32 of its bytes (docs/architecture.md#state-that-survives-restarts).
//!
//! ```text
//! "GPSTATE\0"  version: u32 LE  saved_at_ms: i64 LE
//! { length: u32 LE  crc32: u32 LE  postcard(Section) } …
//! ```
//!
//! One section is one part (windows, the windows' incremental state, budgets, request
//! series, alerts, capacity histories) of one target, so a
//! bad byte costs that part of that target only. The first section lists the sections that
//! follow ([`Part::Contents`]), so that a restore can name what a truncated file lost even
//! where its bytes are gone; a section left out when written (past `state_max_size`) keeps
//! its place as an empty frame. A length that runs past the end (a truncated file) or a
//! checksum that does not match makes the section corrupt; after a bad length the rest of
//! the file cannot be framed and is lost too. A file of another version is not read at all.
//!
//! Files written before the list and the empty frames existed read the same, without the
//! names of what they lost; a goodput of that time reads this one's list and empty frames as
//! corrupt sections and restores the rest.

use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::alert::saved::SavedAlert;
use crate::budget::saved::SavedBudgets;
use crate::capacity::saved::SavedCapacity;
use crate::evaluate::incremental::saved::SavedEvaluation;
use crate::request::{LegacySavedRequests, SavedRequests, SavedRequestsRef};
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
    /// The request series of one target as goodput wrote them before their records were
    /// packed: read, never written ([`Part::RequestRecords`] is).
    Requests(LegacySavedRequests),
    Alerts(Vec<SavedAlert>),
    /// What the sections after this one are, in order: written first, so that it survives
    /// whatever cuts the file short. Its own section has no target.
    Contents(Vec<Listed>),
    /// The capacity book's series of one target: after the others, so that the parts
    /// before it keep their tags (a goodput without it reads it as a corrupt section).
    Capacity(SavedCapacity),
    /// The incremental state of one target's windows, saved with its window store and
    /// written after it, so that a restore needs no first pass over the store (a goodput
    /// without it reads it as a corrupt section and makes that pass).
    /// Written for a target evaluated at least once; `None` if its state could not be
    /// saved with the store after all (the list of sections is written before them).
    Evaluation(Option<SavedEvaluation>),
    /// The request series of one target, their records packed
    /// (`goodput_core::request::compact::packed`): encoded straight from the store by
    /// [`frame_requests`].
    RequestRecords(SavedRequests),
}

/// One section as [`Part::Contents`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    pub target: String,
    /// [`Part::name`]: a name, not an index, so that a later part reads as unknown.
    pub part: String,
}

impl Part {
    pub fn name(&self) -> &'static str {
        match self {
            Part::Windows(_) => "windows",
            Part::Budgets(_) => "budgets",
            Part::Requests(_) | Part::RequestRecords(_) => "requests",
            Part::Alerts(_) => "alerts",
            Part::Contents(_) => "contents",
            Part::Capacity(_) => "capacity",
            Part::Evaluation(_) => "evaluation",
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

/// A section with its frame, in `buf` (emptied first; its capacity is reused); `None` if it
/// cannot be encoded (a section over 4 GiB).
pub fn frame(section: &Section, buf: Vec<u8>) -> Option<Vec<u8>> {
    frame_into(section, 0, buf)
}

/// The frame of `target`'s [`Part::RequestRecords`], encoded from the store as it stands:
/// the bytes [`frame`] writes for a copy of them, without the copy (up to 3 MiB of records
/// a series, every snapshot), in `buf` as [`frame`] does.
pub fn frame_requests(target: &str, identity: u32, saved: &SavedRequestsRef<'_>, buf: Vec<u8>) -> Option<Vec<u8>> {
    /// [`Section`] with its part borrowed.
    #[derive(Serialize)]
    struct Borrowed<'a> {
        target: &'a str,
        identity: u32,
        part: RequestRecords<'a>,
    }
    struct RequestRecords<'a>(&'a SavedRequestsRef<'a>);
    impl Serialize for RequestRecords<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_newtype_variant("Part", REQUEST_RECORDS, "RequestRecords", self.0)
        }
    }
    frame_into(&Borrowed { target, identity, part: RequestRecords(saved) }, saved.encoded_len_hint(), buf)
}

/// [`Part::RequestRecords`]'s index, which postcard writes for the variant
/// (`tests::requests::a_request_section_encoded_from_the_store_is_the_bytes_of_its_copy`
/// checks it).
const REQUEST_RECORDS: u32 = 7;

/// `section` framed, encoded into `out` (emptied first) with room for `hint` bytes of it.
fn frame_into(section: &impl Serialize, hint: usize, mut out: Vec<u8>) -> Option<Vec<u8>> {
    // Encoded after room for the frame, which is filled in once the body's length and
    // checksum are known: a window store's section is most of the snapshot, not copied twice.
    out.clear();
    out.reserve(FRAME_LEN + hint);
    out.extend_from_slice(&[0u8; FRAME_LEN]);
    let mut out = postcard::to_extend(section, out).ok()?;
    let body = &out[FRAME_LEN..];
    let len = u32::try_from(body.len()).ok()?;
    let crc = crc32fast::hash(body);
    out[..4].copy_from_slice(&len.to_le_bytes());
    out[4..FRAME_LEN].copy_from_slice(&crc.to_le_bytes());
    Some(out)
}

/// The frame of a section left out when the snapshot was written: no bytes, whose CRC-32
/// is 0.
pub const LEFT_OUT: [u8; FRAME_LEN] = [0; FRAME_LEN];

/// Why a whole file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileError {
    /// Does not start with a snapshot's header: some other file.
    NotASnapshot,
    /// Starts as a snapshot does but ends inside its header, at this byte.
    CutHeader(u64),
    /// Written by a version of goodput with another format.
    Version(u32),
}

/// Why one section cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Corrupt {
    /// Its length runs past the end of the file: the file was cut inside it (or the length
    /// itself is damaged). Nothing after it can be framed.
    Truncated,
    Checksum,
    /// The checksum matches but the bytes do not decode.
    Decode,
    /// Reading the file failed here (an I/O error); the rest is not read.
    Unreadable(String),
    /// Left out when the snapshot was written, to keep it under `state_max_size`.
    LeftOut,
}

/// A section that cannot be read, and where its frame starts in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damaged {
    pub at: u64,
    pub why: Corrupt,
}

/// A snapshot's sections, in order, each read or corrupt, and when it was saved: the
/// `len` bytes `r` yields.
///
/// The file is read one section at a time as the iterator is advanced, so that a restore
/// holds one section's bytes and one decoded section beside the stores it rebuilds, not the
/// whole file (at thousands of targets a snapshot is hundreds of megabytes).
pub fn read<R: Read>(mut r: R, len: u64) -> Result<(i64, Sections<R>), FileError> {
    let mut header = [0u8; HEADER_LEN];
    let have = (len as usize).min(HEADER_LEN);
    if r.read_exact(&mut header[..have]).is_err() {
        return Err(FileError::NotASnapshot);
    }
    let magic = have.min(MAGIC.len());
    if have == 0 || header[..magic] != MAGIC[..magic] {
        return Err(FileError::NotASnapshot);
    }
    if have < HEADER_LEN {
        return Err(FileError::CutHeader(len));
    }
    let version = word(&header[8..12]);
    if version != VERSION {
        return Err(FileError::Version(version));
    }
    let mut at_bytes = [0u8; 8];
    at_bytes.copy_from_slice(&header[12..20]);
    let saved_at_ms = i64::from_le_bytes(at_bytes);
    Ok((saved_at_ms, Sections { r, at: HEADER_LEN as u64, left: len - HEADER_LEN as u64, body: Vec::new() }))
}

/// [`read`] of a snapshot held in memory.
pub fn decode(bytes: &[u8]) -> Result<(i64, Sections<&[u8]>), FileError> {
    read(bytes, bytes.len() as u64)
}

fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The sections of a snapshot, each read or corrupt ([`read`]).
#[derive(Debug)]
pub struct Sections<R> {
    r: R,
    /// Where the next frame starts in the file.
    at: u64,
    /// Bytes of the file not read yet: a length that runs past them is a truncated file,
    /// found without reading (or allocating) that far.
    left: u64,
    /// The current section's bytes, reused from one section to the next.
    body: Vec<u8>,
}

impl<R: Read> Sections<R> {
    /// Where the file stops being read: its end, or where a frame could not be read.
    pub fn offset(&self) -> u64 {
        self.at
    }

    /// The section starting at `at` is `why`.
    fn damaged(at: u64, why: Corrupt) -> Option<Result<Section, Damaged>> {
        Some(Err(Damaged { at, why }))
    }

    /// Nothing after this can be framed.
    fn stop(&mut self, at: u64, why: Corrupt) -> Option<Result<Section, Damaged>> {
        self.left = 0;
        Self::damaged(at, why)
    }
}

impl<R: Read> Iterator for Sections<R> {
    type Item = Result<Section, Damaged>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let at = self.at;
        let mut frame = [0u8; FRAME_LEN];
        if self.left < FRAME_LEN as u64 {
            return self.stop(at, Corrupt::Truncated);
        }
        if let Err(e) = self.r.read_exact(&mut frame) {
            return self.stop(at, Corrupt::Unreadable(e.to_string()));
        }
        self.left -= FRAME_LEN as u64;
        self.at += FRAME_LEN as u64;
        let (len, crc) = (word(&frame[..4]), word(&frame[4..]));
        if u64::from(len) > self.left {
            return self.stop(at, Corrupt::Truncated);
        }
        self.body.resize(len as usize, 0);
        if let Err(e) = self.r.read_exact(&mut self.body) {
            return self.stop(at, Corrupt::Unreadable(e.to_string()));
        }
        self.left -= u64::from(len);
        self.at += u64::from(len);
        if frame == LEFT_OUT {
            return Self::damaged(at, Corrupt::LeftOut);
        }
        if crc32fast::hash(&self.body) != crc {
            return Self::damaged(at, Corrupt::Checksum);
        }
        Some(postcard::from_bytes::<Section>(&self.body).map_err(|_| Damaged { at, why: Corrupt::Decode }))
    }
}
