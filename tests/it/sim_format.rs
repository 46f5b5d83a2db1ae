//! The simulated exposition looks exactly like the real engines': compared family by
//! family with a real vLLM 0.13 scrape (HELP, TYPE, label names, bucket bounds), and
//! linted by the real `promtool check metrics`.

use crate::tools;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use goodput::parse::{Limits, MetricType, parse};
use goodput_sim::Sim;
use goodput_sim::config::{Format, Profile, SimConfig};
use tools::require_tool;

/// Family name → (type, help, sample name → label names, sample name → le list).
type Shape = BTreeMap<String, (MetricType, String, BTreeMap<String, BTreeSet<String>>, BTreeMap<String, Vec<String>>)>;

fn shape(body: &str) -> Shape {
    let exp = parse(body.as_bytes(), &Limits::default()).expect("parses");
    let mut out: Shape = BTreeMap::new();
    for s in &exp.samples {
        let fam = exp.family_of(s);
        let e = out.entry(fam.name.to_string()).or_insert_with(|| {
            (fam.kind, fam.help.as_deref().unwrap_or("").to_string(), BTreeMap::new(), BTreeMap::new())
        });
        let names: BTreeSet<String> =
            exp.labels_of(s).iter().map(|l| l.name.to_string()).filter(|n| n != "le").collect();
        e.2.entry(s.name.to_string()).or_default().extend(names);
        if let Some(le) = exp.label(s, "le") {
            let les = e.3.entry(s.name.to_string()).or_default();
            if !les.iter().any(|l| l == le) {
                les.push(le.to_string());
            }
        }
    }
    out
}

fn fixture(name: &str) -> String {
    let path = tools::real_fixture(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn vllm_exposition_matches_a_real_vllm_scrape() {
    let real = fixture("vllm-v1-0.13ish-dynamo-vllm-only.prom");
    // Same model and max_model_len as the real engine, so even the 1-2-5 token buckets agree.
    let mut cfg = SimConfig::profile(Profile::Steady);
    cfg.model = "Qwen/Qwen3-0.6B".into();
    cfg.engine.max_model_len = 40960;
    cfg.engine.num_gpu_blocks = 5943;
    let mut sim = Sim::new(&cfg, false).expect("sim");
    sim.advance_to(30.0);
    let ours = shape(&sim.render());
    let theirs = shape(&real);
    // Families vLLM has that the simulator does not model (no multimodal, no KV connector).
    let unmodelled = ["external_prefix_cache", "mm_cache"];
    let mut compared = 0;
    for (name, t) in &theirs {
        if unmodelled.iter().any(|u| name.contains(u)) {
            continue;
        }
        let o = ours.get(name).unwrap_or_else(|| panic!("simulator lacks real family {name}"));
        assert_eq!((o.0, &o.1), (t.0, &t.1), "{name}: TYPE/HELP");
        assert_eq!(o.2.keys().collect::<Vec<_>>(), t.2.keys().collect::<Vec<_>>(), "{name}: sample names");
        for (sample, labels) in &t.2 {
            if name == "vllm:cache_config_info" {
                assert!(o.2[sample].is_subset(labels), "cache_config_info labels are real ones");
                assert!(o.2[sample].contains("num_gpu_blocks") && o.2[sample].contains("block_size"));
            } else {
                assert_eq!(&o.2[sample], labels, "{sample}: label names");
            }
        }
        assert_eq!(o.3, t.3, "{name}: bucket bounds, as printed");
        compared += 1;
    }
    assert!(compared >= 30, "compared {compared} families");

    // The default collectors' families, as in a real single-process vLLM scrape.
    let v0 = fixture("vllm-v0-0.4.x-datadog-fixture-v0part.prom");
    let theirs = shape(&v0);
    let runtime: Vec<&String> =
        theirs.keys().filter(|n| n.starts_with("python_") || n.starts_with("process_")).collect();
    assert_eq!(runtime.len(), 10);
    for name in runtime {
        let (o, t) = (&ours[name], &theirs[name]);
        assert_eq!((o.0, &o.1, &o.2), (t.0, &t.1, &t.2), "{name}");
    }
}

#[test]
fn promtool_accepts_every_format() {
    let promtool = require_tool!("promtool");
    for format in [Format::Vllm, Format::Sglang, Format::Tgi] {
        let mut cfg = SimConfig::profile(Profile::Spec);
        cfg.format = format;
        cfg.engines = 2;
        let mut sim = Sim::new(&cfg, false).expect("sim");
        sim.advance_to(20.0);
        let body = sim.render();
        let mut child = Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn promtool");
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(body.as_bytes()).expect("write");
        let out = child.wait_with_output().expect("promtool");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // Exit 3 = lint findings only; the only findings allowed are the real engines' own
        // naming habits (':' in names, vLLM's histogram named `_total`, TGI counters
        // without `_total` or HELP).
        let code = out.status.code();
        assert!(code == Some(0) || code == Some(3), "{format:?}: promtool failed: {text}");
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let known = line.contains("should not contain ':'")
                || line.starts_with("vllm:iteration_tokens_total non-counter")
                || (format == Format::Tgi
                    && (line.contains("should have \"_total\" suffix")
                        || line.contains("should not have \"_count\" suffix")
                        || line.contains("no help text")));
            assert!(known, "{format:?}: unexpected promtool finding: {line}");
        }
    }
}

#[test]
fn sglang_exposition_matches_a_real_sglang_scrape() {
    let real = fixture("sglang-0.5.x-dynamo-sglang-only.prom");
    let mut cfg = SimConfig::profile(Profile::Steady);
    cfg.format = Format::Sglang;
    cfg.model = "Qwen/Qwen3-0.6B".into();
    let mut sim = Sim::new(&cfg, false).expect("sim");
    sim.advance_to(30.0);
    let ours = shape(&sim.render());
    let theirs = shape(&real);
    let mut compared = 0;
    for (name, o) in &ours {
        let Some(t) = theirs.get(name) else { continue };
        assert_eq!((o.0, &o.1), (t.0, &t.1), "{name}: TYPE/HELP");
        for (sample, labels) in &t.2 {
            // `pid` is a process id some SGLang gauges carry; the simulator has no process.
            let real_names: BTreeSet<&String> = labels.iter().filter(|l| *l != "pid").collect();
            let our_names: BTreeSet<&String> = o.2[sample].iter().collect();
            assert_eq!(our_names, real_names, "{sample}: label names");
        }
        assert_eq!(o.3, t.3, "{name}: bucket bounds, as printed");
        compared += 1;
    }
    eprintln!("compared {compared} of {} families", ours.len());
    assert!(compared >= 12, "compared {compared} families");
}

#[test]
fn tgi_exposition_matches_a_real_tgi_scrape() {
    let real = fixture("tgi-3.3.5-datadog-hugging_face_tgi.prom");
    let mut cfg = SimConfig::profile(Profile::Steady);
    cfg.format = Format::Tgi;
    let mut sim = Sim::new(&cfg, false).expect("sim");
    sim.advance_to(30.0);
    let ours = shape(&sim.render());
    let theirs = shape(&real);
    let mut compared = 0;
    for (name, o) in &ours {
        // Set at warm-up by TGI's v3 backend, absent from this particular scrape.
        if name == "tgi_batch_max_total_tokens" {
            continue;
        }
        let t = theirs.get(name).unwrap_or_else(|| panic!("{name} is not a real TGI family"));
        assert_eq!((o.0, &o.1), (t.0, &t.1), "{name}: TYPE/HELP");
        assert_eq!(o.2, t.2, "{name}: sample and label names");
        if name.ends_with("duration") {
            // Only the duration buckets are fixed; token buckets scale with the server's limits.
            assert_eq!(o.3, t.3, "{name}: bucket bounds, as printed");
        }
        compared += 1;
    }
    assert!(compared >= 12, "compared {compared} families");
}
