//! Ground truth for the request path: requests sent through the tap to the
//! simulator, which writes the engine's own latencies for each one. Paired by the response
//! id, every request the tap measured matches the engine's truth up to the client-side time
//! the engine cannot see (loopback, the simulator's frontend, the tap itself): the same
//! output tokens, the same ending, TTFT and E2E never below the truth and at most a bounded
//! delay above it, TPOT within that delay over the request's tokens. The daemon's exact
//! counters equal the daemon's own judgement of those records, and the engine's truth judged
//! by the same code differs only by requests that lie within that delay of a limit.

use crate::tap_truth_support;

use std::time::Duration;

use goodput::request::Status;
use goodput_sim::SimConfig;
use goodput_sim::config::Profile;
use tap_truth_support::compare::{self, Pairs, borderline, delta, good, pair, spread, truth_record, truth_status};
use tap_truth_support::{Outcome, TARGET, run, sample};

/// Wall seconds of load.
const SECS: f64 = 20.0;

/// How long the requests in flight when the load stops may take to end.
const GRACE: Duration = Duration::from_secs(15);

/// The most client-side time one request may gain over the engine's truth. On loopback it is
/// a few milliseconds; the bound leaves room for a loaded 2-core CI machine, where every
/// process of the run (simulator, tap, client) shares the cores.
const SLACK: f64 = 0.25;

/// A small engine overloaded in bursts: 8 sequences at most, ~30 ms steps, short outputs,
/// a burst of 10 req/s for 3 s every 10 s over a base of 1.5 req/s, and one client in ten
/// giving up within 3 s.
fn load() -> SimConfig {
    let mut c = SimConfig::profile(Profile::Burst);
    c.name = TARGET.into();
    c.seed = 7;
    c.arrivals.rate = 1.5;
    c.arrivals.burst_rate = 10.0;
    c.arrivals.period_s = 10.0;
    c.arrivals.burst_length_s = 3.0;
    c.workload.output_median = 40.0;
    c.workload.max_tokens = 200;
    c.workload.abort_fraction = 0.1;
    c.workload.abort_after_min_s = 0.2;
    c.workload.abort_after_max_s = 3.0;
    c.engine.max_num_seqs = 8;
    c.engine.step_base_s = 0.03;
    c
}

/// Limits inside the run's distributions (TTFT from ~0.1 s to ~3.6 s as the bursts queue,
/// TPOT 37–51 ms, E2E up to ~10 s), so that each SLO has good and bad requests.
const SLOS: &str = "[{name: interactive, ttft: 1s, tpot: 40ms, objective: 0.9},
        {name: batch, ttft: 3s, e2e: 6s, objective: 0.9}]";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tap_exact_values_equal_the_simulators_truth() {
    let dir = tempfile::tempdir().unwrap();
    let load = load();
    let out = run(&load, SECS, GRACE, "[1m]", SLOS, Duration::from_secs(5), dir.path()).await;
    let p = pair(&out.tap, &out.truth);
    println!("{:?}, drained: {}", out.sent, out.drained);

    // Every request sent is measured once and finished once, and the two name each other.
    let sent = out.sent;
    assert!(out.drained, "requests were still in flight {GRACE:?} after the load stopped");
    assert_eq!((sent.failed, sent.dropped), (0, 0), "{sent:?}");
    assert!(sent.sent >= 60 && sent.gave_up >= 2, "too little traffic to judge by: {sent:?}");
    assert_eq!(out.tap.len() as u64, sent.sent, "one tap record per request sent");
    assert_eq!(out.truth.len() as u64, sent.sent, "one truth line per request sent");
    assert_eq!((p.tap_unknown.len(), p.duplicates), (0, 0), "every id the tap read is the engine's, once");
    // A client that gave up before its first token never saw an id; the engine aborted it.
    assert_eq!(p.tap_without_id.len(), p.truth_unpaired.len());
    assert!(p.tap_without_id.iter().all(|r| r.status == Status::ClientAbort && r.ttft_s.is_none()));
    assert!(p.truth_unpaired.iter().all(|t| t.finish_reason == "abort"), "{:?}", p.truth_unpaired);

    let races = statuses(&p);
    let slack = deltas(&p);
    judged_alike(&out, &p, slack, races);
    windows(&out, &p, &load.model);
}

/// Statuses: the client's abort is the engine's abort. A client may give up just as the
/// engine finishes, before `[DONE]` reaches it: the tap then says `client_abort` and the
/// engine `length`, within the client-side delay. Returns how many such races there were.
fn statuses(p: &Pairs<'_>) -> usize {
    let mut races = 0;
    for (r, t) in &p.pairs {
        let truth = truth_status(t);
        match (r.status, truth) {
            (a, b) if a == b => {}
            (Status::ClientAbort, Status::Ok) if (t.finish_s - r.finished_unix).abs() <= SLACK => races += 1,
            (a, b) => panic!("tap says {a:?}, the engine {b:?} ({}): {r:?}\n{t:?}", t.finish_reason),
        }
        if r.status == Status::Ok {
            let n = r.output_tokens.expect("a complete stream has a token count");
            assert_eq!((n.value, n.exact), (t.output_tokens, true), "usage gives N exactly: {r:?}\n{t:?}");
        } else if let Some(n) = r.output_tokens {
            assert!(n.value <= t.output_tokens, "an aborted stream shows at most what the engine made: {r:?}\n{t:?}");
        }
    }
    let aborts = p.pairs.iter().filter(|(r, _)| r.status == Status::ClientAbort).count();
    println!("client aborts: {aborts} paired, {} before any token, {races} races", p.tap_without_id.len());
    assert!(aborts >= 1, "some client gave up mid-stream");
    races
}

/// The client-side time: the tap's TTFT and E2E never below the engine's, and above it by
/// at most `SLACK`; the first-to-last-token span equal within `SLACK`. Returns the largest
/// delay seen (TTFT or E2E) and the largest span difference.
fn deltas(p: &Pairs<'_>) -> (f64, f64) {
    let d: Vec<_> = p.pairs.iter().filter_map(|(r, t)| delta(r, t)).collect();
    let ok = p.pairs.iter().filter(|(r, t)| r.status == Status::Ok && truth_status(t) == Status::Ok).count();
    assert_eq!(d.len(), ok, "every complete request has a TTFT on both sides");
    let col = |f: fn(&compare::Delta) -> f64| d.iter().map(f).collect::<Vec<f64>>();
    let (ttft, e2e, decode, tpot) = (col(|d| d.ttft), col(|d| d.e2e), col(|d| d.decode.abs()), col(|d| d.tpot.abs()));
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "tap − truth over {} requests (p50, p99, max), ms: TTFT {:?} (min {:.3}), E2E {:?} (min {:.3}), |decode span| {:?}, |TPOT| {:?}",
        d.len(),
        ms(spread(&ttft)),
        min(&ttft) * 1e3,
        ms(spread(&e2e)),
        min(&e2e) * 1e3,
        ms(spread(&decode)),
        ms(spread(&tpot)),
    );
    // The engine's clock starts when the request reaches it and its tokens leave no earlier
    // than the model says: the tap, in front, can only see more.
    assert!(min(&ttft) >= -1e-6 && min(&e2e) >= -1e-6, "the tap saw less than the engine");
    let delay = spread(&ttft).2.max(spread(&e2e).2);
    let span = spread(&decode).2;
    assert!(delay <= SLACK, "client-side delay {delay:.4} s > {SLACK} s");
    assert!(span <= SLACK, "first-to-last-token span differs by {span:.4} s > {SLACK} s");
    (delay, span)
}

/// The daemon's counters equal its own judgement of the tap's records, exactly; the
/// engine's truth, judged by the same code, differs only where a request lies within the
/// observed client-side delay of a limit (or raced its client's give-up).
fn judged_alike(out: &Outcome, p: &Pairs<'_>, (delay, span): (f64, f64), races: usize) {
    let count = |st: &str| sample(&out.metrics, "llm_slo_requests_total", &[("source", "tap"), ("status", st)]);
    let tap_count = |st: Status| out.tap.iter().filter(|r| r.status == st).count() as f64;
    assert_eq!(count("ok"), Some(tap_count(Status::Ok)), "{}", out.metrics);
    assert_eq!(count("client_abort"), Some(tap_count(Status::ClientAbort)));
    assert_eq!(count("ok").unwrap() + count("client_abort").unwrap(), out.tap.len() as f64);
    for slo in &out.config.slos {
        let metric = sample(&out.metrics, "llm_slo_good_requests_total", &[("source", "tap"), ("slo", &slo.name)]);
        let tap_good = out.tap.iter().filter(|r| good(r, slo)).count();
        assert_eq!(metric, Some(tap_good as f64), "the counter is the daemon's judgement of the tap's records");
        let truth_good = out.truth.iter().filter(|t| good(&truth_record(t), slo)).count();
        let near = |t: &&tap_truth_support::TruthLine| borderline_by(t, slo, delay, span);
        let borderline = out.truth.iter().filter(near).count();
        let mut flips = 0;
        for (r, t) in &p.pairs {
            if good(r, slo) != good(&truth_record(t), slo) {
                flips += 1;
                assert!(
                    near(t) || r.status != truth_status(t),
                    "{}: verdicts differ on a request {delay:.4} s / {span:.4} s cannot flip:\n{r:?}\n{t:?}",
                    slo.name
                );
            }
        }
        println!(
            "{}: good by the tap {tap_good} (counter {metric:?}), by the engine {truth_good}, \
             {flips} verdicts differ, {borderline} requests within the delay of a limit",
            slo.name
        );
        assert!(tap_good.abs_diff(truth_good) <= borderline + races, "{}", slo.name);
        assert!(tap_good > 0 && tap_good < out.tap.len(), "{}: the limits sit inside the distribution", slo.name);
    }
}

/// Within the delay of a limit: TTFT or E2E at most `delay` under theirs, TPOT within
/// `span` spread over the request's gaps.
fn borderline_by(t: &tap_truth_support::TruthLine, slo: &goodput::slo::Slo, delay: f64, span: f64) -> bool {
    let no_tpot = goodput::slo::Slo { tpot: None, ..slo.clone() };
    let only_tpot = goodput::slo::Slo { ttft: None, e2e: None, ..slo.clone() };
    borderline(t, &no_tpot, delay) || (slo.tpot.is_some() && borderline(t, &only_tpot, span))
}

/// Per evaluation, the tap's exact window value is the daemon's judgement of the records in
/// its span. At the end, when the window holds the whole run on both sides, it lies in the
/// histogram bracket up to the requests whose verdict the client-side delay changed.
fn windows(out: &Outcome, p: &Pairs<'_>, model: &str) {
    let rows = compare::window_rows(out, p, "1m", model);
    assert!(!rows.is_empty(), "no evaluated tap window");
    for r in &rows {
        let inside = r.bracket.is_some_and(|(lo, hi)| r.exact.0 >= lo - 1e-9 && r.exact.0 <= hi + 1e-9);
        println!(
            "t={} {}: {} requests, exact {:.4}, engine truth {:.4}, histogram bracket {:?} over {:?} requests{}",
            r.t_ms,
            r.slo,
            r.requests,
            r.exact.0,
            r.truth,
            r.bracket,
            r.hist_requests,
            if inside { "" } else { " (outside: the histograms' scrape-to-scrape population is not the tap's)" }
        );
        assert_eq!(r.exact.0, r.exact.1, "usage makes every TPOT exact");
        assert!((r.exact.0 - r.recomputed).abs() < 1e-12, "{r:?}");
    }
    let t_end = out.last_report().t_ms;
    for r in rows.iter().filter(|r| r.t_ms == t_end) {
        assert_eq!(r.requests, out.tap.len() as u64, "the last window holds every request");
        assert_eq!(r.hist_requests, Some(r.requests as f64), "and so do the histograms: {r:?}");
        let flips = p.pairs.iter().filter(|(a, b)| {
            let slo = out.config.slos.iter().find(|s| s.name == r.slo).unwrap();
            good(a, slo) != good(&truth_record(b), slo)
        });
        let tolerance = flips.count() as f64 / r.requests as f64 + 1e-9;
        assert!((r.exact.0 - r.truth).abs() <= tolerance, "{r:?}");
        let (lo, hi) = r.bracket.expect("the histograms evaluate the last window");
        assert!(r.exact.0 >= lo - tolerance && r.exact.0 <= hi + tolerance, "{r:?}");
    }
}

fn ms((a, b, c): (f64, f64, f64)) -> (f64, f64, f64) {
    let r = |v: f64| (v * 1e4).round() / 10.0;
    (r(a), r(b), r(c))
}
