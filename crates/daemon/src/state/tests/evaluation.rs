//! The windows' incremental state through a snapshot: it comes back with the windows, and
//! the restored daemon evaluates on from it as the one that never stopped.

use super::{CONFIG, RestorePart, T0, Why, World, fill, restore_into, scrape, snapshot, world};
use crate::evaluate::RateMode;
use crate::evaluate::incremental::Incremental;
use crate::report::ModelReport;

/// Every target evaluated at `now_ms`, as the evaluator does it.
fn evaluate(w: &World, now_ms: i64) -> Vec<Vec<ModelReport>> {
    let eval = w.config.eval_config();
    w.sources
        .targets
        .iter()
        .map(|rt| {
            let cfg = eval.for_target(&rt.config.name);
            let mut evaluation = rt.evaluation();
            let state = evaluation.get_or_insert_with(|| Incremental::new(&cfg));
            state.advance(&mut rt.lock().windows, now_ms);
            state.reports(now_ms, &cfg, RateMode::Prometheus)
        })
        .collect()
}

#[test]
fn the_evaluation_state_comes_back_with_the_windows_and_goes_on() {
    let mut w = world(CONFIG);
    fill(&mut w);
    evaluate(&w, T0 + 115_000);
    // A scrape after the tick: the snapshot holds it, the state has not read it yet.
    scrape(&w, 25, T0 + 120_000);
    let bytes = snapshot(&w);
    let (fresh, o) = restore_into(CONFIG, &bytes);
    assert!(o.lost.is_empty(), "{o:?}");
    assert_eq!(o.restored.iter().filter(|p| **p == RestorePart::Evaluation).count(), 2, "{o:?}");
    assert!(fresh.sources.targets.iter().all(|rt| rt.evaluation().as_ref().is_some_and(|e| e.has_evaluated())));
    for (i, t) in [(26, T0 + 125_000), (27, T0 + 130_000)] {
        scrape(&w, i, t);
        scrape(&fresh, i, t);
        let (live, restored) = (evaluate(&w, t), evaluate(&fresh, t));
        assert!(!live[0].is_empty());
        assert_eq!(format!("{restored:?}"), format!("{live:?}"), "at {t}");
    }
    // Other windows: the state does not fit and the first tick reads the store; the store
    // itself comes back.
    let (other, o) = restore_into(&CONFIG.replace("windows: [1m, 5m]", "windows: [1m, 10m]"), &bytes);
    let lost: Vec<_> = o.lost.iter().filter(|l| l.part == RestorePart::Evaluation).map(|l| &l.why).collect();
    assert_eq!(lost, [&Why::StateDoesNotFit, &Why::StateDoesNotFit], "{o:?}");
    assert!(o.restored.contains(&RestorePart::Windows));
    assert!(other.sources.targets.iter().all(|rt| rt.evaluation().is_none()));
    assert!(o.summary().contains("evaluation state does not fit"), "{}", o.summary());
}

#[test]
fn a_target_not_yet_evaluated_saves_no_state() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let bytes = snapshot(&w);
    let (fresh, o) = restore_into(CONFIG, &bytes);
    assert!(o.lost.is_empty() && !o.restored.contains(&RestorePart::Evaluation), "{o:?}");
    assert!(fresh.sources.targets.iter().all(|rt| rt.evaluation().is_none()));
}
