//! Fuzzes the exposition parser: it must never panic, errors must point inside the body,
//! and a successful parse must be internally consistent. What parses is also adapted, with
//! every engine table and a model limit: the adapter must not panic either.
#![no_main]

use goodput_core::adapt::{EngineHint, adapt_bounded};
use goodput_core::canonical::Engine;
use goodput_core::parse::{Limits, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lines = data.split(|&b| b == b'\n').count();
    let small = Limits { max_samples: 64, max_label_value_bytes: 32, max_labels_per_sample: 8, ..Limits::default() };
    for limits in [Limits::default(), small] {
        match parse(data, &limits) {
            Ok(e) => {
                assert_eq!(e.families.iter().map(|f| f.samples).sum::<usize>(), e.samples.len());
                for s in &e.samples {
                    assert!((s.family as usize) < e.families.len());
                    assert!(s.labels.end as usize <= e.labels.len());
                    assert!(s.line as usize >= 1 && s.line as usize <= lines);
                    let _ = e.series_string(s);
                }
                for hint in std::iter::once(EngineHint::Auto).chain(Engine::ALL.map(EngineHint::Is)) {
                    let _ = adapt_bounded(&e, hint, "m", 4);
                }
            }
            Err(err) => {
                assert!(err.line >= 1 && err.line <= lines, "{err}");
                let _ = err.to_string();
            }
        }
    }
});
