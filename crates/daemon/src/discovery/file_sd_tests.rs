//! A `file_sd` source's polls against real files: a file or directory that cannot be read
//! keeps the targets it gave, only a file that is gone takes its targets with it, and each
//! error is logged once until it or the file changes.

use std::path::Path;

use super::Poller;

fn group(name: &str) -> String {
    format!(r#"[{{"targets": ["10.0.0.1:8000"], "labels": {{"target": "{name}"}}}}]"#)
}

/// Replaces `path` atomically (a new inode, so the poll sees a new version).
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn names(p: &mut Poller, full: bool) -> Vec<String> {
    p.poll(full).found.into_iter().map(|f| f.name).collect()
}

#[test]
fn a_directory_that_cannot_be_listed_keeps_what_its_files_gave() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("targets");
    std::fs::create_dir(&dir).unwrap();
    write(&dir.join("a.json"), &group("a"));
    write(&dir.join("b.json"), &group("b"));
    let mut p = Poller::new(vec![format!("{}/*.json", dir.display())]);
    assert_eq!(names(&mut p, true), ["a", "b"]);

    // The directory becomes a symlink to itself: listing it fails (ELOOP), as it would
    // with no descriptor left (EMFILE) or without permission.
    std::fs::rename(&dir, root.path().join("real")).unwrap();
    std::os::unix::fs::symlink(&dir, &dir).unwrap();
    for _ in 0..5 {
        let polled = p.poll(true);
        let got: Vec<_> = polled.found.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(got, ["a", "b"], "the targets must not vanish while the directory cannot be listed");
        assert!(polled.failures >= 1, "a failed expansion is counted");
    }
    assert_eq!(p.logged(), 1, "the same failure is logged once, not every poll");

    // Readable again, without b.json: now b is really gone.
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(root.path().join("real"), &dir).unwrap();
    std::fs::remove_file(dir.join("b.json")).unwrap();
    assert_eq!(names(&mut p, false), ["a"]);
    assert_eq!(p.poll(true).failures, 0);
}

#[test]
fn a_file_that_cannot_be_read_keeps_its_targets_and_is_logged_once() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    write(&a, &group("a"));
    let mut p = Poller::new(vec![format!("{}/*.json", dir.path().display())]);
    assert_eq!(names(&mut p, true), ["a"]);
    // A symlink to itself: its metadata cannot be read (ELOOP).
    std::fs::remove_file(&a).unwrap();
    std::os::unix::fs::symlink(&a, &a).unwrap();
    for _ in 0..4 {
        assert_eq!(names(&mut p, true), ["a"], "an unreadable file keeps its targets");
    }
    assert_eq!(p.logged(), 1);
    // Removed: gone, with its targets.
    std::fs::remove_file(&a).unwrap();
    assert!(names(&mut p, true).is_empty());
}

#[test]
fn a_broken_file_is_logged_once_per_version_and_its_targets_kept() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    write(&a, &group("a"));
    let mut p = Poller::new(vec![format!("{}/*.json", dir.path().display())]);
    assert_eq!(names(&mut p, true), ["a"]);
    write(&a, "[{\"targets\": [\"oops\"");
    // Read again at every refresh (full) and in between: one line for this version.
    let mut failures = 0;
    for i in 0..6 {
        let polled = p.poll(i % 2 == 0);
        assert_eq!(polled.found.len(), 1, "a broken file keeps what it gave");
        failures += polled.failures;
    }
    assert_eq!(p.logged(), 1, "re-reading the same broken version logs nothing more");
    assert_eq!(failures, 3, "every failed read is counted");
    // Another broken version: logged again, once.
    write(&a, "[{\"targets\": [\"oops\"], \"labels\": 1}]");
    p.poll(true);
    p.poll(true);
    assert_eq!(p.logged(), 2);
    // Fixed.
    write(&a, &group("a2"));
    assert_eq!(names(&mut p, false), ["a2"]);
    assert_eq!(p.poll(true).failures, 0);
}
