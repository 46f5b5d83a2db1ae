//! The request series through a snapshot: written straight from the store, with their
//! records packed, and read back also from a snapshot written before the packing.

use super::{CONFIG, RestoreResult, T0, fill, format, identity, restore_into, world};
use crate::request::{LegacySavedRequests, SavedRequests};

#[test]
fn a_request_section_encoded_from_the_store_is_the_bytes_of_its_copy() {
    let mut w = world(CONFIG);
    fill(&mut w);
    let id = identity(&w.config.targets[0]);
    let store = w.sources.store.lock().unwrap();
    let borrowed = format::frame_requests("a", id, &store.saved_ref("a"), Vec::new()).unwrap();
    let copied =
        format::Section { target: "a".into(), identity: id, part: format::Part::RequestRecords(store.saved("a")) };
    assert_eq!(borrowed, format::frame(&copied, Vec::new()).unwrap());
    let back: format::Section = postcard::from_bytes(&borrowed[8..]).unwrap();
    assert!(matches!(back.part, format::Part::RequestRecords(ref r) if !r.is_empty()), "{:?}", back.part.name());
}

/// The request series of a store with windows [1m, 5m] and this SLO, as goodput wrote them
/// before the packing (at 5c248f0): `goodput_core`'s test data, from which its own tests
/// check every field.
const BEFORE_PACKING: &[u8] = include_bytes!("../../../../core/testdata/requests-before-packing.postcard");
const BEFORE_PACKING_CONFIG: &str = "
targets:
  - {name: t, url: 'http://127.0.0.1:1/metrics', engine: vllm}
windows: [1m, 5m]
slos:
  - {name: chat, ttft: 200ms, tpot: 50ms, objective: 0.99}
alerting:
  rules: {LLMErrorBudgetBurnFast: {enabled: false}, LLMErrorBudgetBurnSlow: {enabled: false}}
";

#[test]
fn a_request_section_from_before_the_packing_restores() {
    let legacy: LegacySavedRequests = postcard::from_bytes(BEFORE_PACKING).unwrap();
    let w = world(BEFORE_PACKING_CONFIG);
    let id = identity(&w.config.targets[0]);
    let mut bytes = format::header(T0);
    bytes.extend(
        format::frame(
            &format::Section { target: "t".into(), identity: id, part: format::Part::Requests(legacy.clone()) },
            Vec::new(),
        )
        .unwrap(),
    );
    let (fresh, o) = restore_into(BEFORE_PACKING_CONFIG, &bytes);
    assert_eq!((o.n(RestoreResult::Restored), &o.lost, &o.refused), (1, &Vec::new(), &None), "{o:?}");
    let store = fresh.sources.store.lock().unwrap();
    let want = SavedRequests::from(legacy);
    assert!(!want.is_empty());
    assert_eq!(postcard::to_allocvec(&store.saved_ref("t")).unwrap(), postcard::to_allocvec(&want).unwrap());
    assert_eq!(store.records_held(), 82, "both series' records");
}
