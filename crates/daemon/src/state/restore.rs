//! Reading the snapshot back at start, section by section: a section is restored when its
//! target is still configured with the same URL and engine and its part still fits the
//! config (the core checks SLO, rule and window definitions); anything else starts empty,
//! and the one log line of the restore names each target and part that did, and why.
//!
//! A file that is not a snapshot, or that did not read whole, is moved aside
//! (`goodput.state.corrupt`) rather than written over by the next snapshot. Only a file
//! that cannot be opened as one (a FIFO, a directory at its path) stops the start.

use std::io::Read;
use std::path::Path;

use super::file;
use super::format::{self, Corrupt, Damaged, FileError, Listed, Part, Section};
use super::metrics::{RestorePart, RestoreResult, StateStats};
use super::sources::{Sources, identity};
use crate::alert::AlertEngine;
use crate::config::Config;
use crate::evaluate::incremental::Incremental;

/// How far past the daemon's clock a restored scrape may be: clock jitter, not a clock set back.
const FUTURE_SLACK_MS: i64 = 10_000;

/// Targets named in the restore's log line; the rest are counted.
const NAMED: usize = 20;

/// Why a section (or the whole file) was not restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The file ends inside this section, which starts at byte `at`.
    Cut {
        at: u64,
    },
    /// The file ends before this section.
    AfterCut,
    Checksum {
        at: u64,
    },
    Decode {
        at: u64,
    },
    Unreadable {
        at: u64,
        error: String,
    },
    /// The snapshot was written without it (`state_max_size`).
    LeftOut,
    TargetGone,
    /// Another URL or engine.
    TargetChanged,
    /// Its newest scrape is this far past the daemon's clock.
    FromTheFuture {
        ahead_ms: i64,
    },
    /// Of `of` entries (series, ledgers, alerts), `dropped` no longer fit the config.
    ConfigChanged {
        dropped: usize,
        of: usize,
    },
    /// A window store that does not rebuild.
    Unrestorable(String),
    /// A part written in another format of its own (the capacity histories'), which this
    /// build does not read.
    OtherFormat {
        format: u32,
    },
    /// The windows' incremental state does not fit the config or the restored store (the
    /// windows changed, or the store was not restored whole): the first tick reads the
    /// store instead.
    StateDoesNotFit,
    /// The snapshot names the windows' incremental state but could not save it with the
    /// store: the first tick reads the store.
    StateNotSaved,
}

impl Why {
    pub fn result(&self) -> RestoreResult {
        match self {
            Why::Cut { .. } | Why::AfterCut => RestoreResult::Truncated,
            Why::Checksum { .. } | Why::Decode { .. } | Why::Unreadable { .. } | Why::Unrestorable(_) => {
                RestoreResult::Corrupt
            }
            Why::LeftOut => RestoreResult::LeftOut,
            Why::TargetGone
            | Why::TargetChanged
            | Why::FromTheFuture { .. }
            | Why::ConfigChanged { .. }
            | Why::OtherFormat { .. }
            | Why::StateDoesNotFit
            | Why::StateNotSaved => RestoreResult::Mismatch,
        }
    }

    /// Whether the file itself is damaged here (rather than the config having moved on).
    fn damaged(&self) -> bool {
        matches!(self.result(), RestoreResult::Truncated | RestoreResult::Corrupt)
            && !matches!(self, Why::Unrestorable(_))
    }

    fn describe(&self, file_len: u64) -> String {
        match self {
            Why::Cut { at } => {
                format!("truncated: the file ends at byte {file_len}, inside this section, which starts at byte {at}")
            }
            Why::AfterCut => format!("truncated: the file ends at byte {file_len}, before any of it"),
            Why::Checksum { at } => format!("checksum mismatch in the section at byte {at}"),
            Why::Decode { at } => format!("the section at byte {at} does not decode"),
            Why::Unreadable { at, error } => format!("cannot read the file at byte {at}: {error}"),
            Why::LeftOut => "left out when the snapshot was written, to stay under state_max_size".into(),
            Why::TargetGone => "the target is no longer configured".into(),
            Why::TargetChanged => "the target's URL or engine changed".into(),
            Why::FromTheFuture { ahead_ms } => format!(
                "from the future: its newest scrape is {:.0} s past this start's clock (was the clock set back?)",
                *ahead_ms as f64 / 1000.0
            ),
            Why::ConfigChanged { dropped, of } => {
                format!("{dropped} of {of} no longer match the config (an SLO, an alert rule or the windows changed)")
            }
            Why::Unrestorable(e) => format!("the window store does not rebuild: {e}"),
            Why::StateDoesNotFit => "the windows' saved evaluation state does not fit the config or the restored store: the first evaluation reads the whole store instead".into(),
            Why::StateNotSaved => "the windows' evaluation state could not be saved with their store: the first evaluation reads the whole store instead".into(),
            Why::OtherFormat { format } => format!(
                "written in another format ({format:#x}, this build reads {:#x}) by an earlier goodput: starts empty",
                crate::capacity::saved::FORMAT
            ),
        }
    }
}

/// One section not restored: whose, which part (when the file says), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    pub target: Option<String>,
    pub part: RestorePart,
    pub why: Why,
}

/// What one restore found, for the log line, the counters and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Sections restored, by part.
    pub restored: Vec<RestorePart>,
    pub lost: Vec<Lost>,
    /// The whole file was refused.
    pub refused: Option<FileError>,
    /// The file's length.
    pub len: u64,
}

impl Outcome {
    /// Sections counted as `r`.
    pub fn n(&self, r: RestoreResult) -> usize {
        match r {
            RestoreResult::Restored => self.restored.len(),
            _ => self.lost.iter().filter(|l| l.why.result() == r).count(),
        }
    }

    /// Whether the file did not read whole: it is kept aside.
    pub fn damaged(&self) -> bool {
        matches!(self.refused, Some(FileError::NotASnapshot | FileError::CutHeader(_)))
            || self.lost.iter().any(|l| l.why.damaged())
    }

    /// The targets with a part that starts empty, in the order the file had them.
    pub fn affected(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for t in self.lost.iter().filter_map(|l| l.target.as_deref()) {
            if !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }

    fn count(&self, stats: &StateStats) {
        for p in &self.restored {
            stats.restored(*p, RestoreResult::Restored, 1);
        }
        for l in &self.lost {
            stats.restored(l.part, l.why.result(), 1);
        }
        match &self.refused {
            Some(FileError::NotASnapshot) => stats.restored(RestorePart::File, RestoreResult::NotASnapshot, 1),
            Some(FileError::CutHeader(_)) => stats.restored(RestorePart::File, RestoreResult::Truncated, 1),
            Some(FileError::Version(_)) => stats.restored(RestorePart::File, RestoreResult::Version, 1),
            None => {}
        }
    }

    /// What was lost: `alpha: windows, alerts (why); bravo, charlie: windows (why)`, the
    /// parts a target lost for one reason together, and targets that lost the same parts
    /// for the same reason together; at most [`NAMED`] targets.
    pub fn summary(&self) -> String {
        // Each target's parts lost for each reason, then the targets of equal entries.
        let mut by_target: Vec<(Option<&str>, String, Vec<&str>)> = Vec::new();
        for l in &self.lost {
            let why = l.why.describe(self.len);
            let target = l.target.as_deref();
            match by_target.iter_mut().find(|(t, w, _)| *t == target && *w == why) {
                Some(g) => g.2.push(l.part.as_str()),
                None => by_target.push((target, why, vec![l.part.as_str()])),
            }
        }
        let mut groups: Vec<(String, String, Vec<&str>, usize)> = Vec::new();
        for (target, why, parts) in by_target {
            let parts = parts.join(", ");
            match groups.iter_mut().find(|(p, w, _, _)| *p == parts && *w == why) {
                Some(g) => match target {
                    Some(t) => g.2.push(t),
                    None => g.3 += 1,
                },
                None => groups.push((parts, why, target.into_iter().collect(), usize::from(target.is_none()))),
            }
        }
        let mut out: Vec<String> = Vec::new();
        let mut named: Vec<&str> = Vec::new();
        for (parts, why, targets, unnamed) in &groups {
            let mut shown: Vec<&str> = Vec::new();
            for &t in targets {
                if named.contains(&t) || named.len() < NAMED {
                    if !named.contains(&t) {
                        named.push(t);
                    }
                    shown.push(t);
                }
            }
            if !shown.is_empty() {
                out.push(format!("{}: {parts} ({why})", shown.join(", ")));
            }
            match unnamed {
                0 => {}
                1 => out.push(format!("a section the file does not name ({why})")),
                n => out.push(format!("{n} sections the file does not name ({why})")),
            }
        }
        let more = self.affected().len().saturating_sub(NAMED);
        let mut s = out.join("; ");
        if more > 0 {
            s.push_str(&format!("; and {more} more targets (llm_slo_state_restore_total counts every section)"));
        }
        s
    }
}

/// Restores what `dir`'s snapshot holds into the daemon's state, before any task starts.
/// Errors only when the snapshot's path holds something that is not a regular file.
pub fn restore(
    dir: &Path,
    config: &Config,
    sources: &Sources,
    alerts: &mut AlertEngine,
    stats: &StateStats,
    now_ms: i64,
) -> std::io::Result<()> {
    file::prepare(dir)?;
    let path = file::path(dir);
    let (reader, len) = match file::open(dir) {
        Ok(Some(r)) => r,
        Ok(None) => {
            tracing::info!(dir = %dir.display(), "no state snapshot yet; starting with empty windows");
            return Ok(());
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return Err(e),
        Err(e) => {
            stats.restored(RestorePart::File, RestoreResult::Corrupt, 1);
            tracing::warn!("cannot read the state snapshot: {e}; starting with empty windows");
            return Ok(());
        }
    };
    let o = apply_from(reader, len, config, sources, alerts, now_ms);
    release_freed_memory();
    o.count(stats);
    let aside = if o.damaged() {
        match file::keep_aside(dir) {
            Ok(to) => format!("; the file is kept as {}", to.display()),
            Err(e) => format!("; it could not be kept aside ({e}): the next snapshot replaces it"),
        }
    } else {
        String::new()
    };
    let path = path.display();
    match &o.refused {
        Some(FileError::NotASnapshot) => tracing::warn!(
            "{path} is not a goodput snapshot ({}): nothing restored, starting with empty windows{aside}",
            if len == 0 {
                "it is empty".to_string()
            } else {
                format!("its {len} bytes do not start with a snapshot's header")
            }
        ),
        Some(FileError::CutHeader(at)) => tracing::warn!(
            "{path} is a truncated goodput snapshot: the file ends at byte {at}, inside its header; nothing restored, starting with empty windows{aside}"
        ),
        Some(FileError::Version(v)) => tracing::warn!(
            "{path} is a snapshot of format {v}, written by {} goodput; this one reads format {}: starting with empty windows (the file is replaced at the next snapshot)",
            if *v > format::VERSION { "a newer" } else { "an older" },
            format::VERSION
        ),
        None if o.lost.is_empty() => {
            tracing::info!(sections = o.restored.len(), "state restored from {path}")
        }
        None => tracing::warn!(
            restored = o.restored.len(),
            discarded = o.lost.len(),
            "state snapshot {path} partly restored; what was not starts empty: {}{aside}",
            o.summary()
        ),
    }
    Ok(())
}

/// Hands the memory a restore or a snapshot freed back to the system. A restore's sections
/// (bytes and decoded form) lie on the heap below the stores rebuilt from them; a
/// snapshot's copies of the budget ledgers and its framed sections are freed once written.
/// With glibc's malloc and one arena, as a small fleet has (docs/footprint.md#memory),
/// freed memory goes back only from the top of the heap unless asked, and the daemon would
/// keep each peak in its RSS. Under mimalloc this trims glibc's own small heap only.
pub(super) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages to the system; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Restores each section of `bytes`.
pub fn apply(bytes: &[u8], config: &Config, sources: &Sources, alerts: &mut AlertEngine, now_ms: i64) -> Outcome {
    apply_from(bytes, bytes.len() as u64, config, sources, alerts, now_ms)
}

/// Restores each section of the `len` bytes `r` yields, one section at a time.
fn apply_from(
    r: impl Read,
    len: u64,
    config: &Config,
    sources: &Sources,
    alerts: &mut AlertEngine,
    now_ms: i64,
) -> Outcome {
    let mut o = Outcome { len, ..Outcome::default() };
    let sections = match format::read(r, len) {
        Ok((_, s)) => s,
        Err(e) => {
            o.refused = Some(e);
            return o;
        }
    };
    // What the file lists (from its first section), and how many of those have been read.
    let mut listed: Option<Vec<Listed>> = None;
    let mut seen = 0usize;
    let mut first = true;
    for s in sections {
        let s = match s {
            Ok(Section { part: Part::Contents(list), .. }) if first => {
                first = false;
                listed = Some(list);
                continue;
            }
            Ok(s) => s,
            Err(Damaged { at, why }) => {
                first = false;
                let named = listed.as_ref().and_then(|l| l.get(seen));
                seen += 1;
                let why = match why {
                    Corrupt::Truncated => Why::Cut { at },
                    Corrupt::Checksum => Why::Checksum { at },
                    Corrupt::Decode => Why::Decode { at },
                    Corrupt::Unreadable(error) => Why::Unreadable { at, error },
                    Corrupt::LeftOut => Why::LeftOut,
                };
                o.lost.push(Lost {
                    target: named.map(|l| l.target.clone()),
                    part: named.map_or(RestorePart::Unknown, |l| RestorePart::named(&l.part)),
                    why,
                });
                continue;
            }
        };
        first = false;
        seen += 1;
        let part = RestorePart::named(s.part.name());
        let target = config.targets.iter().find(|t| t.name == s.target);
        let result = match target {
            None => Err(Why::TargetGone),
            Some(t) if identity(t) != s.identity => Err(Why::TargetChanged),
            Some(_) => restore_part(&s.target, s.part, config, sources, alerts, now_ms),
        };
        match result {
            Ok(()) => o.restored.push(part),
            Err(why) => o.lost.push(Lost { target: Some(s.target), part, why }),
        }
    }
    // Listed sections the file ends before: a cut inside a section, or exactly between two.
    for l in listed.iter().flatten().skip(seen) {
        o.lost.push(Lost { target: Some(l.target.clone()), part: RestorePart::named(&l.part), why: Why::AfterCut });
    }
    o
}

fn restore_part(
    target: &str,
    part: Part,
    config: &Config,
    sources: &Sources,
    alerts: &mut AlertEngine,
    now_ms: i64,
) -> Result<(), Why> {
    let partial = |(taken, dropped): (usize, usize)| {
        if dropped == 0 { Ok(()) } else { Err(Why::ConfigChanged { dropped, of: taken + dropped }) }
    };
    match part {
        Part::Windows(w) => {
            let Some(rt) = sources.targets.iter().find(|rt| rt.config.name == target) else {
                return Err(Why::TargetGone);
            };
            // Scrapes from the future (the wall clock was set back since): the store would
            // ignore every new scrape until the clock caught up with them.
            if let Some(t) = w.newest_ms().filter(|&t| t > now_ms.saturating_add(FUTURE_SLACK_MS)) {
                return Err(Why::FromTheFuture { ahead_ms: t - now_ms });
            }
            let store = w.restore(config.max_window()).map_err(|e| Why::Unrestorable(e.0))?;
            let mut st = rt.lock();
            if st.windows.is_empty() {
                st.windows = store;
            }
            Ok(())
        }
        Part::Budgets(b) => partial(sources.book.lock().unwrap_or_else(|e| e.into_inner()).restore(target, b)),
        Part::Requests(r) => partial(sources.store.lock().unwrap_or_else(|e| e.into_inner()).restore(target, r.into())),
        Part::RequestRecords(r) => partial(sources.store.lock().unwrap_or_else(|e| e.into_inner()).restore(target, r)),
        Part::Alerts(a) => {
            // Only alerts of this target: a section cannot speak for another.
            let own = a.into_iter().filter(|a| a.labels.get("target").is_some_and(|t| t == target));
            partial(alerts.restore(own))
        }
        Part::Capacity(c) => {
            if let Some(format) = c.other_format() {
                return Err(Why::OtherFormat { format });
            }
            let of = c.len();
            let taken = sources.capacity.lock().unwrap_or_else(|e| e.into_inner()).restore(target, c);
            partial((taken, of - taken))
        }
        Part::Evaluation(e) => {
            let Some(rt) = sources.targets.iter().find(|rt| rt.config.name == target) else {
                return Err(Why::TargetGone);
            };
            let Some(e) = e else { return Err(Why::StateNotSaved) };
            let cfg = config.eval_config().for_target(target);
            let mut evaluation = rt.evaluation();
            let mut st = rt.lock();
            match Incremental::restored(&e, &cfg, &mut st.windows) {
                Some(state) => {
                    *evaluation = Some(state);
                    Ok(())
                }
                None => Err(Why::StateDoesNotFit),
            }
        }
        // Only the first section lists the others.
        Part::Contents(_) => Err(Why::Unrestorable("a list of sections out of place".into())),
    }
}
