//! Every family /metrics can carry, registered in the order it writes them: the report's
//! (export::catalog), the build info, then the live families of each subsystem, each declared
//! beside the code that counts it. docs/metrics.md's family index is generated from this
//! registry, and a test keeps the file in step with it.

use goodput_core::export::{Registry, markdown_table};

use crate::{daemon, deliver, discovery, otlp, state, tap};

/// Every family, a group per part of /metrics.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    goodput_core::export::catalog::register_report(&mut r);
    r.register("Build", super::BUILD_INFO)
        .register("Alert delivery", deliver::metrics::FAMILIES)
        .register("HTTP server", super::HTTP_FAMILIES)
        .register("OTLP receiver", otlp::metrics::FAMILIES)
        .register("Process", super::process::FAMILIES)
        .register("Taps", tap::metrics::FAMILIES)
        .register("State snapshots", state::metrics::FAMILIES)
        .register("Config reload", super::reload::FAMILIES)
        .register("Clock", daemon::clock::FAMILIES)
        .register("Discovery", discovery::limits::FAMILIES);
    r
}

/// Where the generated index sits in docs/metrics.md.
pub const START: &str = "<!-- family-index:start (generated from the registry; do not edit) -->";
pub const END: &str = "<!-- family-index:end -->";

/// The command that regenerates the index.
pub const REGENERATE: &str = "GOODPUT_UPDATE_DOCS=1 cargo test -p goodput --lib serve::catalog";

/// `doc` with the text between [`START`] and [`END`] replaced by the registry's tables;
/// `None` when the markers are missing.
pub fn with_index(doc: &str, registry: &Registry) -> Option<String> {
    let start = doc.find(START)? + START.len();
    let end = start + doc[start..].find(END)?;
    Some(format!("{}\n{}\n{}", &doc[..start], markdown_table(registry).trim(), &doc[end..]))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use goodput_core::export::{Collect, Collector};

    use super::*;
    use crate::listen::server::ConnStats;
    use crate::serve::HttpServer;

    fn doc_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md")
    }

    #[test]
    fn the_family_index_in_docs_metrics_md_is_the_registrys() {
        let path = doc_path();
        let doc = std::fs::read_to_string(&path).unwrap();
        let want = with_index(&doc, &registry()).expect("docs/metrics.md has the family-index markers");
        if std::env::var_os("GOODPUT_UPDATE_DOCS").is_some() && want != doc {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        assert!(
            want == doc,
            "docs/metrics.md's family index differs from the registry's families; regenerate it with `{REGENERATE}`"
        );
    }

    #[test]
    fn every_family_is_registered_once_with_help_and_the_prefix() {
        // `registry()` panics on a name registered twice.
        let r = registry();
        assert!(r.len() > 120, "{} families", r.len());
        for f in r.iter() {
            assert!(f.name.starts_with("llm_slo_") || f.name.starts_with("process_"), "{}", f.name);
            assert!(!f.help.is_empty(), "{}", f.name);
            assert_eq!(f.kind == goodput_core::export::Kind::Counter, f.name.ends_with("_total"), "{}", f.name);
        }
    }

    /// Each live collector writes only the families it declares, with only the labels they
    /// declare, and every family it declares is registered.
    #[test]
    fn live_collectors_write_what_they_declare() {
        let conns = ConnStats::default();
        let taps = tap::metrics::TapMetrics(vec![("llama".into(), Arc::default())]);
        let otlp = otlp::metrics::OtlpStats::new(vec!["llama".into()]);
        let state = state::metrics::StateStats::default();
        let reload = super::super::reload::ReloadStats::default();
        let clock = daemon::clock::ClockStats::default();
        let discovery = discovery::limits::DiscoveryStats::default();
        let collectors: [&dyn Collector; 9] = [
            &HttpServer(&conns),
            &otlp,
            &super::super::process::Process,
            &taps,
            &state,
            &reload,
            &clock,
            &discovery,
            &super::super::BuildInfo,
        ];
        let r = registry();
        for c in collectors {
            let mut out = Collect::new(|_| None);
            c.collect(&mut out);
            let samples = out.finish();
            assert!(!samples.is_empty());
            for s in &samples {
                let f =
                    c.families().iter().find(|f| f.name == s.name).unwrap_or_else(|| panic!("{} undeclared", s.name));
                assert!(s.labels.iter().all(|(k, _)| f.has_label(k)), "{} {:?}", s.name, s.labels);
                for l in f.labels {
                    if let (Some(values), Some((_, v))) = (l.values(), s.labels.iter().find(|(k, _)| *k == l.name)) {
                        assert!(values.contains(&v.as_str()), "{} {}={v} not among {values:?}", s.name, l.name);
                    }
                }
            }
            assert!(c.families().iter().all(|f| r.get(f.name).is_some()));
        }
    }
}
