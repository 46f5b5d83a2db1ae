//! Writing the snapshot so that a crash at any instant leaves either the previous file or
//! the new one, never half of one: written to a temporary file in the same directory,
//! synced, renamed over the old one, and the directory synced so the rename itself is
//! durable.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The snapshot's name in `state_dir`.
pub const FILE_NAME: &str = "goodput.state";
const TEMP_NAME: &str = "goodput.state.tmp";

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

/// Writes `header` and each framed section, in order, leaving out any section that would
/// take the file past `max_bytes`.
pub fn write_atomic(
    dir: &Path,
    header: &[u8],
    sections: impl IntoIterator<Item = Vec<u8>>,
    max_bytes: u64,
) -> io::Result<Written> {
    fs::create_dir_all(dir)?;
    let temp = dir.join(TEMP_NAME);
    let result = write_temp(&temp, header, sections, max_bytes).and_then(|w| {
        fs::rename(&temp, path(dir))?;
        // The rename is in the directory: without this a power cut may forget it.
        File::open(dir)?.sync_all()?;
        Ok(w)
    });
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

fn write_temp(
    temp: &Path,
    header: &[u8],
    sections: impl IntoIterator<Item = Vec<u8>>,
    max_bytes: u64,
) -> io::Result<Written> {
    let file = File::create(temp)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(header)?;
    let mut w = Written { bytes: header.len() as u64, left_out: 0 };
    for s in sections {
        if w.bytes + s.len() as u64 > max_bytes {
            w.left_out += 1;
            continue;
        }
        out.write_all(&s)?;
        w.bytes += s.len() as u64;
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(w)
}

/// The snapshot in `dir`, buffered, and its length; `None` when there is none yet.
pub fn open(dir: &Path) -> io::Result<Option<(BufReader<File>, u64)>> {
    match File::open(path(dir)) {
        Ok(f) => {
            let len = f.metadata()?.len();
            Ok(Some((BufReader::with_capacity(1 << 20, f), len)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
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
