//! A target's scrapes ingested with `scrape::ingest_reusing` (the daemon's path, which skips
//! the adapter when the series are the previous scrape's) leave the window store and the
//! target's health exactly as `scrape::ingest` and a snapshot per scrape do: every stored
//! point's time, layout (and which consecutive points share one), values bit for bit, the
//! errors and warnings. Fed the simulator's scrapes over time and every real fixture with
//! its values moving, plus the changes the reuse has to notice: a process restart, a
//! `_created` change, NaN buckets and gauges, a reordered label, a new series, duplicates.

use crate::tools;

use std::sync::Arc;
use std::time::Duration;

use goodput::adapt::EngineHint;
use goodput::config::Cardinality;
use goodput::parse::Limits;
use goodput::scrape::{Reuse, ingest, ingest_reusing};
use goodput::target::{ScrapeFailure, Scraped, TargetState};
use goodput_sim::{Profile, Sim, SimConfig};

const INTERVAL_MS: i64 = 5_000;

/// Feeds `bodies` both ways; returns which scrapes were reused.
fn check_same(what: &str, bodies: &[String]) -> Vec<bool> {
    let limits = Limits::default();
    let card = Cardinality { max_models: 50, max_series: 100_000 };
    let (hint, model) = (EngineHint::Auto, "m");
    let mut plain = TargetState::new(Duration::from_secs(3600));
    let mut reusing = TargetState::new(Duration::from_secs(3600));
    let mut reuse = Reuse::default();
    let mut reused = Vec::new();
    let fail =
        |e: goodput::scrape::ScrapeError| ScrapeFailure { reason: e.reason().into(), message: e.message().into() };
    for (i, body) in bodies.iter().enumerate() {
        let t = (i as i64 + 1) * INTERVAL_MS;
        let a = ingest(body.as_bytes(), &limits, card, hint, model).map(Arc::new).map_err(fail);
        let b = ingest_reusing(body.as_bytes(), &limits, card, hint, model, &mut reuse).map_err(fail);
        reused.push(matches!(b, Ok(Scraped::Values(_))));
        let (ta, tb) = (plain.observe(t, None, a), reusing.observe_scraped(t, None, b));
        assert_eq!(ta, tb, "{what}, scrape {i}: transition");
        if reuse.wants_layout() {
            let w = &reusing.windows;
            let (_, layout) = w.point_at(w.seq_range().end - 1).expect("a scrape was just stored");
            reuse.adopt(layout);
        }
        let (ha, hb) = (&plain.health, &reusing.health);
        assert_eq!(
            (ha.up, &ha.last_error, &ha.errors_total, &ha.warnings_total),
            (hb.up, &hb.last_error, &hb.errors_total, &hb.warnings_total),
            "{what}, scrape {i}: health"
        );
        assert_eq!(ha.process_start_s.map(f64::to_bits), hb.process_start_s.map(f64::to_bits), "{what}, scrape {i}");
        assert_eq!(plain.windows.engine(), reusing.windows.engine(), "{what}, scrape {i}: engine");
        same_points(&format!("{what}, scrape {i}"), &plain, &reusing);
    }
    reused
}

fn same_points(what: &str, a: &TargetState, b: &TargetState) {
    let pa: Vec<_> = a.windows.stored_points().collect();
    let pb: Vec<_> = b.windows.stored_points().collect();
    assert_eq!(pa.len(), pb.len(), "{what}: points stored");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let created = |l: &goodput::window::Layout| l.created.iter().map(|c| c.map(f64::to_bits)).collect::<Vec<_>>();
    for (k, ((ta, la, va), (tb, lb, vb))) in pa.iter().zip(&pb).enumerate() {
        assert_eq!(ta, tb, "{what}: point {k} time");
        assert_eq!(la.keys, lb.keys, "{what}: point {k} series");
        assert_eq!(created(la), created(lb), "{what}: point {k} _created");
        assert_eq!(la.process_start.map(f64::to_bits), lb.process_start.map(f64::to_bits), "{what}: point {k}");
        assert_eq!(bits(va), bits(vb), "{what}: point {k} values");
        if k > 0 {
            let shared = |p: &[(i64, Arc<goodput::window::Layout>, Vec<f64>)]| Arc::ptr_eq(&p[k - 1].1, &p[k].1);
            assert_eq!(shared(&pa), shared(&pb), "{what}: point {k} shares the previous layout");
        }
    }
}

/// `body` with every sample's value passed through `f(name, labels, value)`.
fn map_values(body: &str, mut f: impl FnMut(&str, &str, &str) -> String) -> String {
    let mut out = String::with_capacity(body.len() + 64);
    for line in body.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            out.push_str(line);
        } else {
            let split = match line.rfind('}') {
                Some(i) => i + 1,
                None => line.find([' ', '\t']).unwrap_or(line.len()),
            };
            let (series, rest) = line.split_at(split);
            let rest = rest.trim_start();
            let (value, ts) = rest.split_once([' ', '\t']).map_or((rest, None), |(v, t)| (v, Some(t)));
            let name = series.split('{').next().unwrap_or(series).trim();
            out.push_str(series);
            out.push(' ');
            out.push_str(&f(name, series, value));
            if let Some(ts) = ts {
                out.push(' ');
                out.push_str(ts);
            }
        }
        out.push('\n');
    }
    out
}

/// Moves every value but the restart markers by `k`.
fn moved(body: &str, k: f64) -> String {
    map_values(body, |name, _, v| match v.parse::<f64>() {
        Ok(x) if x.is_finite() && name != "process_start_time_seconds" && !name.ends_with("_created") => {
            format!("{}", x + k)
        }
        _ => v.to_string(),
    })
}

/// The scrapes a fixture is fed as: values moving, then each change the reuse must notice,
/// with unchanged scrapes in between so that the structure is learnt again.
fn variants(body: &str) -> Vec<String> {
    let mut out: Vec<String> = (0..4).map(|k| moved(body, k as f64)).collect();
    let first = |pred: &dyn Fn(&str) -> bool, to: &str| {
        let mut done = false;
        map_values(body, |name, _, v| {
            if !done && pred(name) {
                done = true;
                return to.to_string();
            }
            v.to_string()
        })
    };
    // A restart, then a `_created` change, then NaNs where the adapter drops a histogram
    // (bucket) and where it keeps the value (any other sample).
    out.push(first(&|n| n == "process_start_time_seconds", "1234567.5"));
    out.push(moved(body, 5.0));
    out.push(first(&|n| n.ends_with("_created"), "99.25"));
    out.push(moved(body, 6.0));
    out.push(first(&|n| n.ends_with("_bucket"), "NaN"));
    out.push(moved(body, 7.0));
    out.push(first(&|n| !n.ends_with("_bucket") && !n.ends_with("_created"), "NaN"));
    out.extend((8..10).map(|k| moved(body, k as f64)));
    // The same series with two labels swapped (a different shard key), then a new series.
    let swapped = body
        .lines()
        .map(|l| match (l.find('{'), l.rfind('}')) {
            (Some(a), Some(b)) if !l.starts_with('#') && l[a + 1..b].matches("\",").count() >= 1 => {
                let inner = &l[a + 1..b];
                let cut = inner.find("\",").unwrap() + 1;
                format!("{}{{{},{}}}{}", &l[..a], &inner[cut + 1..], &inner[..cut], &l[b + 1..])
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.extend([swapped.clone(), swapped]);
    out.extend((10..12).map(|k| moved(body, k as f64)));
    let extra = format!("{body}\nsome_other_metric{{a=\"b\"}} 1\n");
    out.extend([extra.clone(), moved(&extra, 1.0), moved(&extra, 2.0)]);
    // A duplicate series: a warning, so never reused.
    let dup = body.lines().find(|l| !l.starts_with('#') && !l.trim().is_empty()).unwrap_or("").to_string();
    let with_dup = format!("{body}\n{dup}\n");
    out.extend([with_dup.clone(), with_dup, moved(body, 12.0), moved(body, 13.0)]);
    out
}

#[test]
fn the_simulators_scrapes_are_stored_as_without_reuse() {
    let mut sim = Sim::new(&SimConfig::profile(Profile::Steady), false).expect("the steady profile is valid");
    let bodies: Vec<String> = (1..=40)
        .map(|i| {
            sim.advance_to(f64::from(i) * 5.0);
            sim.render()
        })
        .collect();
    let reused = check_same("sim", &bodies).into_iter().filter(|&r| r).count();
    // The series settle once traffic has reached every bucket; from then on most scrapes
    // are reused.
    assert!(reused >= 10, "only {reused} of 40 simulator scrapes reused");
}

#[test]
fn every_real_fixture_is_stored_as_without_reuse() {
    let dir = tools::real_fixtures();
    let mut total = 0;
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the fixtures folder reads")
        .map(|e| e.expect("a fixture entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "prom"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "expected the real fixtures in {}", dir.display());
    for path in files {
        let body = std::fs::read_to_string(&path).expect("a fixture reads");
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let n = check_same(&name, &variants(&body)).into_iter().filter(|&r| r).count();
        total += n;
    }
    assert!(total >= 50, "only {total} fixture scrapes reused");
}

/// After an engine restart (a new process start time from then on) or a counter created
/// anew, scrapes are reused again from the second one on: the structure is learnt afresh.
#[test]
fn reuse_resumes_after_a_restart_and_a_new_created_time() {
    let body = tools::real_fixture("vllm-v1-0.13ish-dynamo-worker-full.prom");
    let body = std::fs::read_to_string(body).expect("the fixture reads");
    let body = format!("{body}\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1000\n");
    let restarted = map_values(&body, |name, _, v| match name {
        "process_start_time_seconds" => "2000".into(),
        n if n.ends_with("_created") => "3000".into(),
        _ => v.into(),
    });
    let bodies: Vec<String> =
        (0..6).map(|k| moved(&body, k as f64)).chain((0..6).map(|k| moved(&restarted, k as f64))).collect();
    let reused = check_same("restart", &bodies);
    assert_eq!(reused, [false, false, true, true, true, true, false, true, true, true, true, true], "{reused:?}");
}
