//! The snapshot on disk: written whole or not at all (a write given up, past its deadline or
//! superseded, leaves the previous file and no temporary one), read a section at a time, a
//! file that did not read whole kept aside, and what is not a regular file refused without
//! blocking.

use std::io::{self, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::file::{self, Attempt, WriteError};
use super::super::format;
use super::super::metrics::{RestorePart, RestoreResult, StateStats};
use super::super::restore::restore;
use super::{CONFIG, T0, fill, snapshot, state_of, world};

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut n: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    n.sort();
    n
}

fn write(dir: &std::path::Path, header: &[u8], sections: Vec<Vec<u8>>, max: u64) -> Result<file::Written, WriteError> {
    file::write_atomic(dir, header, sections, max, &Attempt::new(None))
}

/// A maker frames its section into the buffer the section before it was written from, and
/// the file holds the same bytes as with a buffer for each.
#[test]
fn makers_share_the_buffer_the_writer_lends() {
    let dir = tempfile::tempdir().unwrap();
    let capacities = std::sync::Mutex::new(Vec::new());
    let make = |byte: u8, len: usize| {
        let capacities = &capacities;
        file::Frame::Make(Box::new(move |mut buf: Vec<u8>| {
            capacities.lock().unwrap().push(buf.capacity());
            buf.clear();
            buf.resize(len, byte);
            buf
        }))
    };
    let sections = vec![make(1, 1 << 20), file::Frame::Bytes(vec![2; 3]), make(3, 1 << 10), make(4, 1 << 16)];
    let written = file::write_atomic(dir.path(), b"HEAD", sections, 1 << 30, &Attempt::new(None)).unwrap();
    let mut want = b"HEAD".to_vec();
    for (byte, len) in [(1u8, 1usize << 20), (2, 3), (3, 1 << 10), (4, 1 << 16)] {
        want.extend(std::iter::repeat_n(byte, len));
    }
    assert_eq!(std::fs::read(file::path(dir.path())).unwrap(), want);
    assert_eq!(written.bytes, want.len() as u64);
    // The first maker gets an empty buffer; the one after the 3 bytes of its own gets
    // those 3 bytes' buffer; the last gets the one the 1 KiB was made in.
    assert_eq!(*capacities.lock().unwrap(), [0, 3, 1 << 10]);
}

#[test]
fn writes_replace_the_file_whole_and_an_unwritable_dir_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let w = write(&state, b"HEAD", vec![vec![1u8; 10], vec![2u8; 30], vec![3u8; 5]], 30).unwrap();
    // The 30-byte section would pass the bound: an empty frame keeps its place; the 5-byte
    // one still fits.
    assert_eq!(w, file::Written { bytes: 27, left_out: 1 });
    let first = file::read(&state).unwrap().unwrap();
    assert_eq!(first[14..22], format::LEFT_OUT);
    write(&state, b"NEW!", vec![vec![9u8; 3]], 1 << 20).unwrap();
    assert_eq!(file::read(&state).unwrap().unwrap(), b"NEW!\x09\x09\x09");
    assert_eq!(names(&state), [file::FILE_NAME], "no temporary file is left behind");
    assert_eq!(file::read(&dir.path().join("none")).unwrap(), None);
    // A directory that cannot be made (its parent is a file): an error, never a panic.
    let blocked = state.join(file::FILE_NAME).join("sub");
    assert!(matches!(write(&blocked, b"HEAD", vec![vec![1u8]], 1 << 20), Err(WriteError::Io(_))));
}

#[test]
fn a_write_given_up_keeps_the_previous_snapshot_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    write(&state, b"OLD!", vec![vec![7u8; 4]], 1 << 20).unwrap();

    // Past its deadline between two sections: it stops there.
    let attempt = Attempt::new(Some(Instant::now() + Duration::from_millis(50)));
    let slow = (0..3).map(|_| {
        std::thread::sleep(Duration::from_millis(40));
        vec![1u8; 2 << 20]
    });
    let r = file::write_atomic(&state, b"NEW!", slow, 1 << 30, &attempt);
    assert!(matches!(r, Err(WriteError::Abandoned)), "{r:?}");
    assert_eq!(file::read(&state).unwrap().unwrap(), b"OLD!\x07\x07\x07\x07");
    assert_eq!(names(&state), [file::FILE_NAME]);

    // Given up from outside while its thread is stuck (here: producing a section); once it
    // moves again it never renames, nor removes the temporary file of the write after it.
    let stuck = Arc::new(Attempt::new(None));
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (entered, started) = std::sync::mpsc::channel::<()>();
    let (d, a) = (state.clone(), stuck.clone());
    let writer = std::thread::spawn(move || {
        let sections = std::iter::once(()).map(move |_| {
            entered.send(()).unwrap();
            wait.recv().unwrap();
            vec![5u8; 8]
        });
        file::write_atomic(&d, b"STUK", sections, 1 << 20, &a)
    });
    started.recv().unwrap();
    assert_eq!(names(&state), [file::FILE_NAME, "goodput.state.tmp"], "the stuck write has its temporary file");
    assert!(stuck.abandon(&state), "stopped before it renamed");
    assert_eq!(names(&state), [file::FILE_NAME]);
    // The next write starts, and is half-way, when the stuck one wakes.
    let next = Attempt::new(None);
    let t = file::temp_path(&state);
    std::fs::write(&t, b"the next write's").unwrap();
    go.send(()).unwrap();
    assert!(matches!(writer.join().unwrap(), Err(WriteError::Abandoned)));
    assert_eq!(std::fs::read(&t).unwrap(), b"the next write's", "the woken write left it alone");
    assert!(!stuck.abandon(&state), "already given up");
    file::write_atomic(&state, b"NEXT", vec![vec![4u8; 2]], 1 << 20, &next).unwrap();
    assert_eq!(file::read(&state).unwrap().unwrap(), b"NEXT\x04\x04");
    assert_eq!(names(&state), [file::FILE_NAME]);
}

#[test]
fn what_is_not_a_regular_file_at_the_snapshot_path_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = file::path(dir.path());
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path the test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Opened without a writer, a FIFO would block forever.
    let e = file::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("a FIFO") && e.to_string().contains(fifo.to_str().unwrap()), "{e}");
    let e = file::prepare(dir.path()).unwrap_err();
    assert!(e.to_string().contains("remove it"), "{e}");
    // Through the restore: an error (the start fails), nothing read.
    let mut w = world(CONFIG);
    let r = restore(dir.path(), &w.config, &w.sources, &mut w.alerts, &StateStats::default(), T0);
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);

    std::fs::remove_file(&fifo).unwrap();
    std::fs::create_dir(&fifo).unwrap();
    assert!(file::prepare(dir.path()).unwrap_err().to_string().contains("a directory"));
    std::fs::remove_dir(&fifo).unwrap();

    // A temporary file an interrupted write left (here a FIFO, which would block its
    // open) is removed at start; the next write makes its own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::rename(&fifo, file::temp_path(dir.path())).unwrap();
    file::prepare(dir.path()).unwrap();
    assert!(names(dir.path()).is_empty());
}

#[test]
fn a_snapshot_file_is_read_a_section_at_a_time() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let bytes = snapshot(&w);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(file::path(dir.path()), &bytes).unwrap();
    let mut fresh = world(CONFIG);
    let stats = StateStats::default();
    restore(dir.path(), &fresh.config, &fresh.sources, &mut fresh.alerts, &stats, T0 + 130_000).unwrap();
    for t in ["a", "b"] {
        assert!(state_of(&w, t) == state_of(&fresh, t), "target {t} differs after the restore from the file");
    }
    assert_eq!(stats.restore_count(RestorePart::Windows, RestoreResult::Restored), 2);
    assert_eq!(names(dir.path()), [file::FILE_NAME], "a whole file stays where it is");

    // The disk fails part-way: the sections before the failure read, the rest is not read.
    struct FailsAfter<'a>(&'a [u8]);
    impl Read for FailsAfter<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("I/O error"));
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let whole = format::decode(&bytes).unwrap().1.count();
    let (_, sections) = format::read(FailsAfter(&bytes[..bytes.len() - 40]), bytes.len() as u64).unwrap();
    let read: Vec<_> = sections.collect();
    assert_eq!(read.len(), whole);
    assert!(read[..whole - 1].iter().all(Result::is_ok));
    assert!(matches!(&read[whole - 1], Err(format::Damaged { why: format::Corrupt::Unreadable(_), .. })));
}

#[test]
fn a_file_that_did_not_read_whole_is_kept_aside() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let bytes = snapshot(&w);
    let dir = tempfile::tempdir().unwrap();
    let restore_from = |content: &[u8]| {
        std::fs::write(file::path(dir.path()), content).unwrap();
        let mut fresh = world(CONFIG);
        let stats = StateStats::default();
        restore(dir.path(), &fresh.config, &fresh.sources, &mut fresh.alerts, &stats, T0 + 130_000).unwrap();
        let aside = std::fs::read(file::corrupt_path(dir.path())).ok();
        (stats, aside)
    };
    for noise in [&b"#!/bin/sh\necho not a snapshot\n"[..], &[][..], &format::MAGIC[..3]] {
        let (stats, aside) = restore_from(noise);
        let (result, n) =
            if noise.len() == 3 { (RestoreResult::Truncated, 1) } else { (RestoreResult::NotASnapshot, 1) };
        assert_eq!(stats.restore_count(RestorePart::File, result), n, "{noise:?}");
        assert_eq!(aside.as_deref(), Some(noise), "kept aside as it was");
        assert!(!file::path(dir.path()).exists());
    }
    let (stats, aside) = restore_from(&bytes[..bytes.len() - 5]);
    assert_eq!(stats.restore_count(RestorePart::Windows, RestoreResult::Truncated), 1);
    assert_eq!(stats.restore_count(RestorePart::Windows, RestoreResult::Restored), 1);
    assert_eq!(aside.as_deref(), Some(&bytes[..bytes.len() - 5]), "the latest damaged file replaces the one before");
}

#[test]
fn sections_left_out_for_size_are_named_at_the_restore() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let ids = w.config.targets.iter().map(|t| (t.name.clone(), super::super::identity(t))).collect();
    let frames: Vec<Vec<u8>> = super::super::capture(&w.sources, &ids, w.alerts.saved(|_| true), Duration::ZERO)
        .map(file::Frame::into_bytes)
        .collect();
    let (small, last) =
        (frames[..frames.len() - 1].iter().map(Vec::len).sum::<usize>(), frames[frames.len() - 1].len());
    // Room for everything but b's window store, written last.
    let max = (format::HEADER_LEN + small + last / 2) as u64;
    let dir = tempfile::tempdir().unwrap();
    let written = file::write_atomic(dir.path(), &format::header(T0), frames, max, &Attempt::new(None)).unwrap();
    assert_eq!(written.left_out, 1);
    let mut fresh = world(CONFIG);
    let stats = StateStats::default();
    restore(dir.path(), &fresh.config, &fresh.sources, &mut fresh.alerts, &stats, T0 + 130_000).unwrap();
    assert_eq!(stats.restore_count(RestorePart::Windows, RestoreResult::LeftOut), 1);
    assert_eq!(stats.restore_count(RestorePart::Windows, RestoreResult::Restored), 1);
    assert!(fresh.sources.targets[1].lock().windows.is_empty());
    assert_eq!(names(dir.path()), [file::FILE_NAME], "a file left short on purpose is not damaged");
}
