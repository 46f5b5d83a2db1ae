//! Writing the snapshot so that a crash at any instant leaves either the previous file or
//! the new one, never half of one: written to a temporary file in the same directory,
//! synced, renamed over the old one, and the directory synced so the rename itself is
//! durable. A write given up (past its deadline, or superseded by the one at shutdown)
//! removes its temporary file and never renames it: the previous snapshot stays whole.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// The snapshot's name in `state_dir`.
pub const FILE_NAME: &str = "goodput.state";
const TEMP_NAME: &str = "goodput.state.tmp";
/// Where a file that did not read whole is kept aside (one, the latest).
const CORRUPT_NAME: &str = "goodput.state.corrupt";
/// How much of a section is written between two checks of the deadline.
const CHUNK: usize = 1 << 20;

/// What one write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub bytes: u64,
    /// Sections left out because they would have taken the file past its bound.
    pub left_out: usize,
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

pub fn temp_path(dir: &Path) -> PathBuf {
    dir.join(TEMP_NAME)
}

pub fn corrupt_path(dir: &Path) -> PathBuf {
    dir.join(CORRUPT_NAME)
}

/// Why a write did not replace the snapshot.
#[derive(Debug)]
pub enum WriteError {
    Io(io::Error),
    /// Given up: past its deadline, or abandoned by [`Attempt::abandon`].
    Abandoned,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Io(e) => e.fmt(f),
            WriteError::Abandoned => f.write_str("given up before it was complete"),
        }
    }
}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Writing,
    Renamed,
    /// Given up or failed: its temporary file is gone and it will not rename.
    Over,
}

/// One write of the snapshot, shared by the thread writing it and whoever may give it up.
///
/// The temporary file is created, renamed and removed only under the phase's lock and only
/// while the write is [`Phase::Writing`], so a write given up while its thread is stuck
/// (a target's lock held by a long evaluation, a disk that does not answer) can never
/// rename later, nor remove the temporary file of the write that follows it.
#[derive(Debug)]
pub struct Attempt {
    phase: Mutex<Phase>,
    deadline: Option<Instant>,
}

impl Attempt {
    /// A write that gives up by itself at `deadline`.
    pub fn new(deadline: Option<Instant>) -> Attempt {
        Attempt { phase: Mutex::new(Phase::Writing), deadline }
    }

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether the write should stop where it is.
    pub fn should_stop(&self) -> bool {
        *self.phase() != Phase::Writing || self.past_deadline()
    }

    /// Gives the write up unless it has already renamed its file: its temporary file in
    /// `dir` is removed. True if this stopped it.
    pub fn abandon(&self, dir: &Path) -> bool {
        let mut phase = self.phase();
        if *phase != Phase::Writing {
            return false;
        }
        *phase = Phase::Over;
        let _ = fs::remove_file(temp_path(dir));
        true
    }
}

/// A framed section as [`write_atomic`] takes it: its bytes, or a maker that frames it into
/// the buffer it is lent and hands that back. The writer lends every maker the buffer it
/// wrote the section before from, so a snapshot's sections of megabytes (a tapped target's
/// request series, a window store) share one allocation rather than each mapping its own
/// pages afresh.
pub enum Frame<'a> {
    Bytes(Vec<u8>),
    Make(Box<dyn FnOnce(Vec<u8>) -> Vec<u8> + 'a>),
}

impl Frame<'_> {
    /// The framed bytes, in a buffer of their own.
    pub fn into_bytes(self) -> Vec<u8> {
        match self {
            Frame::Bytes(b) => b,
            Frame::Make(make) => make(Vec::new()),
        }
    }
}

impl From<Vec<u8>> for Frame<'_> {
    fn from(bytes: Vec<u8>) -> Self {
        Frame::Bytes(bytes)
    }
}

/// Writes `header` and each framed section, in order, leaving out any section that would
/// take the file past `max_bytes`, and renames the result over the snapshot unless
/// `attempt` is given up first.
pub fn write_atomic<'a>(
    dir: &Path,
    header: &[u8],
    sections: impl IntoIterator<Item = impl Into<Frame<'a>>>,
    max_bytes: u64,
    attempt: &Attempt,
) -> Result<Written, WriteError> {
    fs::create_dir_all(dir)?;
    let temp = temp_path(dir);
    let result = write_temp(&temp, header, sections, max_bytes, attempt);
    let result = result.and_then(|w| {
        {
            let mut phase = attempt.phase();
            if *phase != Phase::Writing || attempt.past_deadline() {
                return Err(WriteError::Abandoned);
            }
            fs::rename(&temp, path(dir))?;
            *phase = Phase::Renamed;
        }
        // The rename is in the directory: without this a power cut may forget it.
        File::open(dir)?.sync_all()?;
        Ok(w)
    });
    if result.is_err() {
        attempt.abandon(dir);
    }
    result
}

fn write_temp<'a>(
    temp: &Path,
    header: &[u8],
    sections: impl IntoIterator<Item = impl Into<Frame<'a>>>,
    max_bytes: u64,
    attempt: &Attempt,
) -> Result<Written, WriteError> {
    let file = {
        let phase = attempt.phase();
        if *phase != Phase::Writing {
            return Err(WriteError::Abandoned);
        }
        // Whatever is at the temporary path is an earlier write that a kill interrupted
        // (or something else entirely): a file made afresh here is the only one trusted,
        // and a FIFO there cannot block the open.
        match fs::symlink_metadata(temp) {
            Ok(m) if m.is_dir() => {
                return Err(io::Error::other(format!(
                    "{} is a directory, where goodput writes its snapshot before renaming it: remove it",
                    temp.display()
                ))
                .into());
            }
            Ok(_) => fs::remove_file(temp)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NONBLOCK).open(temp)?
    };
    let mut out = BufWriter::with_capacity(CHUNK, file);
    out.write_all(header)?;
    let mut w = Written { bytes: header.len() as u64, left_out: 0 };
    let mut lent = Vec::new();
    for s in sections {
        if attempt.should_stop() {
            return Err(WriteError::Abandoned);
        }
        let s = match s.into() {
            Frame::Bytes(b) => b,
            Frame::Make(make) => make(std::mem::take(&mut lent)),
        };
        if w.bytes + s.len() as u64 > max_bytes {
            // Its place is kept, so that the restore can say what was left out.
            out.write_all(&super::format::LEFT_OUT)?;
            w.bytes += super::format::LEFT_OUT.len() as u64;
            w.left_out += 1;
        } else {
            for chunk in s.chunks(CHUNK) {
                if attempt.should_stop() {
                    return Err(WriteError::Abandoned);
                }
                out.write_all(chunk)?;
            }
            w.bytes += s.len() as u64;
        }
        lent = s;
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(w)
}

/// What sits at a path that should hold a regular file, when it is something else.
fn odd_kind(t: fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_block_device() || t.is_char_device() {
        Some("a device")
    } else {
        Some("not a regular file")
    }
}

/// An error for `path`, which is `kind` where a snapshot file belongs.
fn not_a_file(path: &Path, kind: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "state_dir: {} is {kind}, not a regular file: goodput can neither read its snapshot there nor replace it; remove it (or set state_dir to another directory)",
            path.display()
        ),
    )
}

/// Checks `dir` before anything reads it: the snapshot is a regular file or absent
/// (anything else, a FIFO above all, would hang the open or fail every write), no directory
/// stands where the temporary file goes, and whatever an interrupted write left there is
/// removed.
pub fn prepare(dir: &Path) -> io::Result<()> {
    let p = path(dir);
    if let Ok(m) = fs::metadata(&p)
        && let Some(kind) = odd_kind(m.file_type())
    {
        return Err(not_a_file(&p, kind));
    }
    let temp = temp_path(dir);
    match fs::symlink_metadata(&temp) {
        Ok(m) if m.is_dir() => Err(not_a_file(&temp, "a directory")),
        Ok(_) => {
            match fs::remove_file(&temp) {
                Ok(()) => {
                    tracing::info!(path = %temp.display(), "removed the temporary file of a snapshot whose write was interrupted")
                }
                Err(e) => {
                    tracing::warn!(path = %temp.display(), "cannot remove the temporary file of an interrupted snapshot: {e}")
                }
            }
            Ok(())
        }
        Err(_) => Ok(()),
    }
}

/// The snapshot in `dir`, buffered, and its length; `None` when there is none yet. Opened
/// without blocking, and refused unless it is a regular file.
pub fn open(dir: &Path) -> io::Result<Option<(BufReader<File>, u64)>> {
    let p = path(dir);
    match OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&p) {
        Ok(f) => {
            let m = f.metadata()?;
            if let Some(kind) = odd_kind(m.file_type()) {
                return Err(not_a_file(&p, kind));
            }
            Ok(Some((BufReader::with_capacity(1 << 20, f), m.len())))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        // A directory cannot be opened for reading on some systems: the same error.
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => Err(not_a_file(&p, "a directory")),
        Err(e) => Err(io::Error::new(e.kind(), format!("cannot open {}: {e}", p.display()))),
    }
}

/// Moves the snapshot in `dir` aside as [`CORRUPT_NAME`], replacing an earlier one, so that
/// the next snapshot does not write over a file someone may want to look at.
pub fn keep_aside(dir: &Path) -> io::Result<PathBuf> {
    let to = corrupt_path(dir);
    fs::rename(path(dir), &to)?;
    Ok(to)
}

/// The snapshot in `dir`, whole, or `None` when there is none yet.
#[cfg(test)]
pub fn read(dir: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path(dir)) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
