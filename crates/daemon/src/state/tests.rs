//! The snapshot format end to end, without a file system: a daemon's state saved, framed
//! and restored into a fresh one; and what a damaged, truncated, foreign or outdated
//! snapshot restores (per target and part, never more than matches).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod capacity;
mod evaluation;
mod files;
mod requests;

use super::format;
use super::metrics::{RestorePart, RestoreResult, RestoreResult::*};
use super::restore::{Lost, Outcome, Why, apply};
use super::{Sources, capture, identity};
use crate::alert::{AlertEngine, AlertInput};
use crate::budget::BudgetBook;
use crate::config::{self, Config};
use crate::daemon::target::TargetRuntime;
use crate::request::{RequestRecord, RequestStore, Source, Status, StoreConfig, TokenCount};

const T0: i64 = 1_700_000_100_000;

const CONFIG: &str = "
targets:
  - {name: a, url: 'http://127.0.0.1:1/metrics', engine: vllm}
  - {name: b, url: 'http://127.0.0.1:2/metrics', engine: vllm}
windows: [1m, 5m]
slos:
  - {name: chat, ttft: 500ms, objective: 0.99}
";

struct World {
    config: Config,
    sources: Sources,
    alerts: AlertEngine,
}

fn world(yaml: &str) -> World {
    let config = config::from_str(yaml, "t.yaml").unwrap().config;
    let targets: Vec<_> =
        config.targets.iter().map(|t| Arc::new(TargetRuntime::new(t.clone(), config.max_window()))).collect();
    let names: Vec<String> = config.targets.iter().map(|t| t.name.clone()).collect();
    let book = BudgetBook::new(config.budget_specs(), names.clone());
    let store = RequestStore::new(StoreConfig {
        targets: names,
        windows: config.eval_windows(),
        alert_only: Vec::new(),
        quantiles: config.eval_quantiles(),
        slos: config.slos.clone(),
        max_records_per_series: 1000,
        max_series_per_target: 8,
    });
    let alerts = AlertEngine::new(config.alerting.rule_set(), None, config.alerting.resend_interval);
    let sources = Sources {
        targets,
        book: Arc::new(Mutex::new(book)),
        store: Arc::new(Mutex::new(store)),
        capacity: Arc::new(Mutex::new(crate::capacity::CapacityBook::new(config.slos.clone(), Default::default()))),
    };
    World { config, sources, alerts }
}

fn body(i: u64) -> String {
    let (a, b, c) = (3 * i, 5 * i, 6 * i);
    format!(
        "# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{model_name=\"m\",le=\"0.1\"}} {a}
vllm:time_to_first_token_seconds_bucket{{model_name=\"m\",le=\"0.5\"}} {b}
vllm:time_to_first_token_seconds_bucket{{model_name=\"m\",le=\"+Inf\"}} {c}
vllm:time_to_first_token_seconds_sum{{model_name=\"m\"}} {}
vllm:time_to_first_token_seconds_count{{model_name=\"m\"}} {c}
# TYPE vllm:request_success_total counter
vllm:request_success_total{{model_name=\"m\",finished_reason=\"stop\"}} {c}
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{{model_name=\"m\"}} 0.{}
",
        0.25 * c as f64,
        i % 10
    )
}

fn record(target: &str, t_ms: i64, ttft: f64) -> RequestRecord {
    RequestRecord {
        source: Source::Tap,
        target: target.into(),
        model: "m".into(),
        status: Status::Ok,
        finished_unix: t_ms as f64 / 1000.0,
        e2e_s: 1.0,
        ttft_s: Some(ttft),
        tpot_s: Some(0.01),
        prompt_tokens: None,
        output_tokens: Some(TokenCount { value: 50, exact: true }),
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

/// Every target's scrape of `body(i)` at `t_ms`.
fn scrape(w: &World, i: u64, t_ms: i64) {
    for rt in &w.sources.targets {
        let snap = crate::scrape::ingest(
            body(i).as_bytes(),
            &crate::parse::Limits::default(),
            rt.config.cardinality,
            rt.config.engine,
            &rt.config.model,
        )
        .unwrap();
        rt.record(t_ms, Duration::from_millis(3), Ok(snap));
    }
}

/// Scrapes every 5 s for two minutes, requests through the tap, budgets fed twice, and a
/// firing TargetDown alert for `b`.
fn fill(w: &mut World) {
    for i in 0..24u64 {
        scrape(w, i + 1, T0 + i as i64 * 5_000);
    }
    let now = T0 + 120_000;
    let records: Vec<RequestRecord> = (0..40).map(|k| record("a", now - 1_000 * k, 0.1 + 0.02 * k as f64)).collect();
    {
        let mut book = w.sources.book.lock().unwrap();
        for rt in &w.sources.targets {
            let st = rt.lock();
            book.feed_metrics(&rt.config.name, &st.windows, now - 61_000);
            book.feed_metrics(&rt.config.name, &st.windows, now);
        }
        book.add_records(&records);
    }
    w.sources.store.lock().unwrap().ingest(records, now);
    let down = AlertInput {
        target: "b".into(),
        model: String::new(),
        up: false,
        waiting_now: None,
        slos: Vec::new(),
        windows: Vec::new(),
        capacity: Vec::new(),
    };
    w.alerts.evaluate(now - 90_000, std::slice::from_ref(&down));
    let sent = w.alerts.evaluate(now, &[down]);
    assert_eq!(sent.len(), 1, "the alert fires");
}

fn snapshot(w: &World) -> Vec<u8> {
    let ids: BTreeMap<String, u32> = w.config.targets.iter().map(|t| (t.name.clone(), identity(t))).collect();
    let mut out = format::header(T0);
    for f in capture(&w.sources, &ids, w.alerts.saved(|_| true), Duration::ZERO) {
        out.extend(f.into_bytes());
    }
    out
}

/// Everything `w` holds for `target`, as comparable text.
fn state_of(w: &World, target: &str) -> [String; 4] {
    let rt = w.sources.targets.iter().find(|rt| rt.config.name == target).unwrap();
    let points: Vec<_> = rt
        .lock()
        .windows
        .stored_points()
        .map(|(t, l, v)| (t, l.keys.clone(), v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()))
        .collect();
    let alerts: Vec<_> = w.alerts.saved(|t| t == target);
    [
        format!("{points:?}"),
        format!("{:?}", w.sources.book.lock().unwrap().saved(target)),
        format!("{:?}", w.sources.store.lock().unwrap().saved(target)),
        format!("{alerts:?}"),
    ]
}

fn restore_into(yaml: &str, bytes: &[u8]) -> (World, Outcome) {
    let mut fresh = world(yaml);
    let o = apply(bytes, &fresh.config, &fresh.sources, &mut fresh.alerts, T0 + 130_000);
    (fresh, o)
}

#[test]
fn a_snapshot_restores_every_part_of_every_target() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let bytes = snapshot(&w);
    let (fresh, o) = restore_into(CONFIG, &bytes);
    // a: windows, budgets, requests; b: windows, budgets, alerts.
    assert_eq!((o.n(Restored), &o.lost, &o.refused), (6, &Vec::new(), &None));
    // Each part has something to save: a's requests, b's alert, both targets' windows and
    // budgets.
    let (a, b) = (state_of(&w, "a"), state_of(&w, "b"));
    let held = |s: &String| s.len() > 40;
    assert!(held(&a[0]) && held(&a[1]) && held(&a[2]) && held(&b[0]) && held(&b[1]) && held(&b[3]));
    for t in ["a", "b"] {
        assert!(state_of(&w, t) == state_of(&fresh, t), "target {t} differs after the restore");
    }
    // The restored engine judges on: the firing alert is not sent again before the resend
    // interval, and keeps its start.
    let mut alerts = fresh.alerts;
    let down = AlertInput {
        target: "b".into(),
        model: String::new(),
        up: false,
        waiting_now: None,
        slos: Vec::new(),
        windows: Vec::new(),
        capacity: Vec::new(),
    };
    assert!(alerts.evaluate(T0 + 125_000, &[down]).is_empty(), "not re-sent as new");
    assert_eq!(alerts.active().next().map(|a| a.active_at_ms), Some(T0 + 30_000));
}

#[test]
fn a_damaged_section_costs_that_part_of_that_target_only() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let bytes = snapshot(&w);
    let (_, sections) = format::decode(&bytes).unwrap();
    let parts: Vec<(String, &str)> = sections.map(|s| s.unwrap()).map(|s| (s.target.clone(), s.part.name())).collect();
    // The first section lists the others; the last is b's windows: flip a byte in its body.
    assert_eq!(parts.first().unwrap(), &(String::new(), "contents"));
    assert_eq!(parts.last().unwrap(), &("b".to_string(), "windows"));
    let lost = |target: &str, part: RestorePart, why: Why| Lost { target: Some(target.into()), part, why };
    let mut bad = bytes.clone();
    let at = bad.len() - 40;
    bad[at] ^= 0x5a;
    let (fresh, o) = restore_into(CONFIG, &bad);
    assert_eq!(o.n(Restored), 5, "{o:?}");
    let b_at = last_frame(&bytes);
    assert_eq!(o.lost, [lost("b", RestorePart::Windows, Why::Checksum { at: b_at })]);
    assert!(fresh.sources.targets[1].lock().windows.is_empty(), "b's windows start empty");
    assert!(state_of(&fresh, "a") == state_of(&w, "a"), "a is whole");
    assert!(state_of(&fresh, "b")[3] == state_of(&w, "b")[3], "b's alert survives");

    // Truncated inside the last section (a crash mid-write of a non-atomic copy).
    let (_, o) = restore_into(CONFIG, &bytes[..bytes.len() - 7]);
    assert_eq!(o.n(Restored), 5, "{o:?}");
    assert_eq!(o.lost, [lost("b", RestorePart::Windows, Why::Cut { at: b_at })]);
    assert!(o.summary().contains(&format!("b: windows (truncated: the file ends at byte {}", bytes.len() - 7)));
    // Cut exactly where b's windows start: nothing of them is in the file, and the list
    // still names them.
    let (_, o) = restore_into(CONFIG, &bytes[..b_at as usize]);
    assert_eq!((o.n(Restored), &o.lost[..]), (5, &[lost("b", RestorePart::Windows, Why::AfterCut)][..]), "{o:?}");
    // Cut inside the header: nothing to read, nothing restored, no panic.
    let (fresh, o) = restore_into(CONFIG, &bytes[..10]);
    assert_eq!((o.n(Restored), o.refused), (0, Some(format::FileError::CutHeader(10))));
    assert!(fresh.sources.targets.iter().all(|rt| rt.lock().windows.is_empty()));
    // A corrupt length in the list itself: nothing after it is framed or named.
    let mut bad = bytes.clone();
    bad[format::HEADER_LEN..format::HEADER_LEN + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let (_, o) = restore_into(CONFIG, &bad);
    let at = format::HEADER_LEN as u64;
    assert_eq!(
        (o.n(Restored), &o.lost[..]),
        (0, &[Lost { target: None, part: RestorePart::Unknown, why: Why::Cut { at } }][..])
    );
    assert!(o.damaged());
}

/// Where each section's frame starts in a snapshot, and whose part it is.
fn frames(bytes: &[u8]) -> Vec<(u64, String, &'static str)> {
    let mut at = format::HEADER_LEN;
    let mut out = Vec::new();
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let s: format::Section = postcard::from_bytes(&bytes[at + 8..at + 8 + len]).unwrap();
        out.push((at as u64, s.target, s.part.name()));
        at += 8 + len;
    }
    out
}

fn last_frame(bytes: &[u8]) -> u64 {
    frames(bytes).last().unwrap().0
}

#[test]
fn a_truncated_snapshot_names_every_section_it_lost() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let bytes = snapshot(&w);
    // Cut a few bytes into a's windows, the first window store: both stores are lost.
    let a_at = frames(&bytes).into_iter().find(|f| f.1 == "a" && f.2 == "windows").unwrap().0 as usize;
    let cut = &bytes[..a_at + 30];
    let (fresh, o) = restore_into(CONFIG, cut);
    assert!(fresh.sources.targets.iter().all(|rt| rt.lock().windows.is_empty()));
    let windows: Vec<_> = o.lost.iter().filter(|l| l.part == RestorePart::Windows).collect();
    assert_eq!(windows.len(), 2, "{o:?}");
    assert_eq!((windows[0].target.as_deref(), windows[1].target.as_deref()), (Some("a"), Some("b")));
    assert_eq!((windows[0].why.clone(), windows[1].why.clone()), (Why::Cut { at: a_at as u64 }, Why::AfterCut));
    assert_eq!((o.n(Restored), o.n(Truncated)), (4, 2), "the parts before the cut are whole");
    let line = o.summary();
    assert!(line.starts_with("a: windows (truncated") && line.contains("; b: windows (truncated"), "{line}");
}

#[test]
fn the_summary_groups_targets_and_names_at_most_twenty() {
    let lost = |t: usize, part: RestorePart, why: Why| Lost { target: Some(format!("t{t}")), part, why };
    let mut o = Outcome { len: 900, ..Outcome::default() };
    o.lost.push(lost(0, RestorePart::Budgets, Why::TargetChanged));
    o.lost.push(lost(0, RestorePart::Alerts, Why::TargetChanged));
    o.lost.push(lost(1, RestorePart::Windows, Why::Cut { at: 700 }));
    o.lost.extend((2..25).map(|t| lost(t, RestorePart::Windows, Why::AfterCut)));
    o.lost.push(Lost { target: None, part: RestorePart::Unknown, why: Why::Checksum { at: 40 } });
    let line = o.summary();
    let after: Vec<String> = (2..20).map(|t| format!("t{t}")).collect();
    let expected = format!(
        "t0: budgets, alerts (the target's URL or engine changed); \
         t1: windows (truncated: the file ends at byte 900, inside this section, which starts at byte 700); \
         {}: windows (truncated: the file ends at byte 900, before any of it); \
         a section the file does not name (checksum mismatch in the section at byte 40); \
         and 5 more targets (llm_slo_state_restore_total counts every section)",
        after.join(", ")
    );
    assert_eq!(line, expected);
}

#[test]
fn windows_from_the_future_are_not_restored() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let bytes = snapshot(&w);
    // The clock was set back an hour since the snapshot.
    let mut fresh = world(CONFIG);
    let o = apply(&bytes, &fresh.config, &fresh.sources, &mut fresh.alerts, T0 - 3_600_000);
    assert_eq!((o.n(Restored), o.n(Mismatch)), (4, 2), "{o:?}");
    assert!(o.lost.iter().all(|l| matches!(l.why, Why::FromTheFuture { ahead_ms } if ahead_ms > 3_600_000)));
    assert!(o.summary().contains("from the future"), "{}", o.summary());
    assert!(fresh.sources.targets.iter().all(|rt| rt.lock().windows.is_empty()));
}

#[test]
fn a_snapshot_of_another_version_restores_nothing() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let mut bytes = snapshot(&w);
    bytes[8..12].copy_from_slice(&(format::VERSION + 1).to_le_bytes());
    let (fresh, o) = restore_into(CONFIG, &bytes);
    assert_eq!(
        o,
        Outcome { refused: Some(format::FileError::Version(format::VERSION + 1)), len: o.len, ..Outcome::default() }
    );
    assert!(!o.damaged(), "a file of another version is not kept aside");
    assert!(fresh.sources.targets.iter().all(|rt| rt.lock().windows.is_empty()));
    assert!(fresh.alerts.active().next().is_none());
}

#[test]
fn a_changed_target_or_slo_starts_what_no_longer_matches_empty() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let bytes = snapshot(&w);
    // b now scrapes another URL; c is new, with an SLO of its own; chat is unchanged.
    let moved = CONFIG.replace("127.0.0.1:2/metrics", "127.0.0.1:3/metrics")
        + "  - {name: other, ttft: 1s, objective: 0.9, targets: [c]}\n";
    let moved = moved.replacen("targets:\n", "targets:\n  - {name: c, url: 'http://127.0.0.1:4/metrics'}\n", 1);
    let (fresh, o) = restore_into(&moved, &bytes);
    assert_eq!((o.n(Restored), o.n(Mismatch), o.lost.len()), (3, 3, 3), "{o:?}");
    assert_eq!(o.affected(), ["b"]);
    assert!(o.lost.iter().all(|l| l.why == Why::TargetChanged));
    let (now, then) = (state_of(&fresh, "a"), state_of(&w, "a"));
    assert!(now[0] == then[0] && now[2] == then[2], "a's windows and requests still match");
    assert!(fresh.sources.targets.iter().all(|rt| rt.config.name == "a" || rt.lock().windows.is_empty()));
    assert!(fresh.alerts.active().next().is_none(), "b's alert is for the old b");

    // The SLO's objective changes: its budgets and request series start empty, windows stay.
    let stricter = CONFIG.replace("objective: 0.99", "objective: 0.999");
    let (fresh, o) = restore_into(&stricter, &bytes);
    assert_eq!((o.n(Restored), o.n(Mismatch)), (3, 3), "{o:?}");
    assert!(o.summary().contains("no longer match the config"), "{}", o.summary());
    let [windows, budgets, requests, alerts] = state_of(&fresh, "a");
    assert!(windows == state_of(&w, "a")[0]);
    assert!(!budgets.contains("ledger: Ledger") && !requests.contains("raw"), "budgets and requests start empty");
    assert_eq!(alerts, "[]");
    assert!(!fresh.sources.targets[1].lock().windows.is_empty());
}

#[test]
fn a_thinned_window_store_restores_point_for_point_and_evaluates_the_same() {
    use crate::evaluate::RateMode;
    use crate::evaluate::incremental::Incremental;
    // Twelve and a half minutes at 5 s, evaluated as the daemon does at every scrape: beyond
    // the longest configured window (5m) the store keeps only what the alert-only windows read.
    let w = world(CONFIG);
    let limits = crate::parse::Limits::default();
    let cfg = w.config.eval_config().for_target("a");
    let rt = w.sources.targets[0].clone();
    let mut live = Incremental::new(&cfg);
    let mut now = T0;
    for i in 0..150u64 {
        now = T0 + i as i64 * 5_000;
        let body = body(i + 1);
        let snap =
            crate::scrape::ingest(body.as_bytes(), &limits, rt.config.cardinality, rt.config.engine, &rt.config.model)
                .unwrap();
        rt.record(now, Duration::from_millis(3), Ok(snap));
        live.advance(&mut rt.lock().windows, now);
    }
    let thin = rt.lock().windows.thin_points();
    assert!(thin > 80, "{thin} thin points");
    let bytes = snapshot(&w);
    let mut fresh = world(CONFIG);
    let o = apply(&bytes, &fresh.config, &fresh.sources, &mut fresh.alerts, now + 1_000);
    assert!(o.n(Restored) >= 1 && o.lost.is_empty(), "{o:?}");
    assert!(state_of(&w, "a")[0] == state_of(&fresh, "a")[0], "the points differ after the restore");
    // The restored store evaluates as the live one, and goes on thinning as it did.
    let restored = fresh.sources.targets[0].clone();
    let mut again = Incremental::new(&cfg);
    again.advance(&mut restored.lock().windows, now);
    let reports = |inc: &Incremental| format!("{:?}", inc.reports(now, &cfg, RateMode::Prometheus));
    assert_eq!(reports(&again), reports(&live));
    assert_eq!(restored.lock().windows.thin_points(), thin);
}

#[test]
fn byte_strings_are_written_as_the_sequence_they_were_and_read_back_either_way() {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Seq(Vec<u8>);
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Bytes(#[serde(with = "crate::window::saved::as_bytes")] Vec<u8>);
    // Past 127 bytes the length takes two bytes of varint.
    for v in [Vec::new(), vec![0, 1, 255], (0..300u32).map(|i| (i * 7) as u8).collect()] {
        let (seq, bytes) =
            (postcard::to_allocvec(&Seq(v.clone())).unwrap(), postcard::to_allocvec(&Bytes(v.clone())).unwrap());
        assert_eq!(seq, bytes, "{} bytes", v.len());
        assert_eq!(postcard::from_bytes::<Bytes>(&seq).unwrap(), Bytes(v.clone()));
        assert_eq!(postcard::from_bytes::<Seq>(&bytes).unwrap(), Seq(v));
    }
    // A length that runs past the end is an error, not a short read.
    assert!(postcard::from_bytes::<Bytes>(&[5, 1, 2]).is_err());
}
