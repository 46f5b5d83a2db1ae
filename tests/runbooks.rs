//! Every alert's runbook link lands on a real section of docs/runbooks.md: the link the
//! daemon attaches (every rule made to fire once) and the one in `goodput rules` output both
//! end in an anchor that GitHub generates for a heading of that page, the heading is the
//! alert's name, and its section has the three parts an on-call engineer needs.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use goodput::alert::rule::DEFAULT_RUNBOOK_PAGE;
use goodput::alert::{
    AlertEngine, AlertInput, AlertName, AlertingConfig, Bounded, CapacityInput, Clause, DataSource, KvUsage, SloReport,
    WindowInput,
};
use goodput::duration::Window;
use goodput::slo::{Objective, Scope, Slo};

const PAGE: &str = include_str!("../docs/runbooks.md");
const PARTS: [&str; 3] = ["What it means", "How to confirm", "What to do"];

struct Heading {
    level: usize,
    text: String,
    anchor: String,
}

/// GitHub's anchor for a heading (github-slugger): lowercase, punctuation dropped, spaces
/// to `-`; inline markup such as backticks is punctuation too.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The page's headings (outside code fences), with anchors made unique as GitHub does:
/// the second `foo` becomes `foo-1`.
fn headings(page: &str) -> Vec<(Heading, String)> {
    let mut out: Vec<(Heading, String)> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fenced = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let level = line.chars().take_while(|c| *c == '#').count();
        if !fenced && (1..=6).contains(&level) && line[level..].starts_with(' ') {
            let text = line[level..].trim().to_string();
            let base = slug(&text);
            let n = seen.entry(base.clone()).or_insert(0);
            let anchor = if *n == 0 { base.clone() } else { format!("{base}-{n}") };
            *n += 1;
            out.push((Heading { level, text, anchor }, String::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push_str(line);
            last.1.push('\n');
        }
    }
    out
}

/// Checks that `url` points at the section of `name`, and that the section is complete.
fn check_link(url: &str, name: AlertName, source: &str) {
    let anchor = url
        .strip_prefix(DEFAULT_RUNBOOK_PAGE)
        .and_then(|rest| rest.strip_prefix('#'))
        .unwrap_or_else(|| panic!("{source}: {name:?} links to {url}, not to a section of {DEFAULT_RUNBOOK_PAGE}"));
    let hs = headings(PAGE);
    let i = hs
        .iter()
        .position(|(h, _)| h.anchor == anchor)
        .unwrap_or_else(|| panic!("{source}: {url}: docs/runbooks.md has no heading with anchor #{anchor}"));
    let (h, _) = &hs[i];
    assert_eq!((h.level, h.text.as_str()), (2, name.as_str()), "{source}: #{anchor} is not the section of {name:?}");
    let parts: Vec<(&str, &str)> = hs[i + 1..]
        .iter()
        .take_while(|(s, _)| s.level > 2)
        .filter(|(s, _)| s.level == 3)
        .map(|(s, body)| (s.text.as_str(), body.as_str()))
        .collect();
    assert_eq!(
        parts.iter().map(|p| p.0).collect::<Vec<_>>(),
        PARTS,
        "the section of {name:?} needs exactly these parts, in order"
    );
    for (part, body) in parts {
        assert!(body.trim().len() > 80, "{name:?}: part {part:?} is (almost) empty");
    }
}

fn win(s: u64) -> Window {
    Window::new(Duration::from_secs(s)).unwrap()
}

/// An overloaded target with every window the default rules read, so every rule fires.
fn overloaded() -> AlertInput {
    let mut attainment = BTreeMap::new();
    attainment.insert(Clause::Joint, Bounded::exact(0.5));
    let slo = SloReport {
        slo: "chat".into(),
        evaluable: true,
        attainment,
        burn_rate: Bounded::exact(50.0),
        goodput_requests_per_second: None,
        goodput_tokens_per_second: None,
        requests: 600.0,
    };
    let window = |s| WindowInput {
        window: win(s),
        coverage: 1.0,
        slo_source: DataSource::Metrics,
        slo_coverage: 1.0,
        output_tokens_per_second: Some(1500.0),
        preemptions_per_second: Some(2.0),
        ttft_p99: Some(10.0),
        tpot_p99: Some(1.0),
        waiting_at_start: Some(5.0),
        kv_usage: Some(KvUsage { last: 0.99, max: 0.99 }),
        slos: vec![slo.clone()],
    };
    AlertInput {
        target: "llama".into(),
        model: "llama-8b".into(),
        up: true,
        waiting_now: Some(50.0),
        slos: vec![Slo {
            name: "chat".into(),
            ttft: Some(Duration::from_millis(500)),
            tpot: Some(Duration::from_millis(50)),
            e2e: None,
            objective: Objective::new(0.99).unwrap(),
            scope: Scope::default(),
        }],
        windows: [300, 1800, 3600, 6 * 3600].into_iter().map(window).collect(),
        capacity: vec![CapacityInput {
            slo: "chat".into(),
            headroom: 0.8,
            capacity: 4.0,
            arrival_rate: 5.0,
            censored: false,
            rising: true,
            method: "empirical",
        }],
    }
}

fn down() -> AlertInput {
    AlertInput {
        target: "gone".into(),
        model: String::new(),
        up: false,
        waiting_now: None,
        slos: Vec::new(),
        windows: Vec::new(),
        capacity: Vec::new(),
    }
}

/// The `runbook_url` of every alert the daemon's engine raises with the default config.
fn daemon_links() -> BTreeMap<AlertName, BTreeSet<String>> {
    let cfg = AlertingConfig::default();
    assert_eq!(cfg.runbook_base_url, None);
    let mut engine = AlertEngine::new(cfg.rule_set(), cfg.runbook_base_url.clone(), cfg.resend_interval);
    engine.evaluate(1_000, &[overloaded(), down()]);
    let mut out: BTreeMap<AlertName, BTreeSet<String>> = BTreeMap::new();
    for a in engine.active() {
        let url = a.annotations.get("runbook_url").unwrap_or_else(|| panic!("{:?} has no runbook_url", a.name));
        out.entry(a.name).or_default().insert(url.clone());
    }
    out
}

/// The `runbook_url` of every alert rule in `goodput rules` output for a config without
/// `runbook_base_url`.
fn generated_links() -> BTreeMap<String, BTreeSet<String>> {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("goodput.yml");
    std::fs::write(
        &cfg,
        "targets: [{name: llama, url: \"http://127.0.0.1:8000/metrics\"}]\n\
         slos: [{name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99}]\n\
         alerting: {alertmanager: {url: \"http://127.0.0.1:9093\"}}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["rules", "--format", "prometheus", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "goodput rules failed: {}", String::from_utf8_lossy(&out.stderr));
    let file: serde_json::Value = serde_saphyr::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let mut links: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rule in file["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()) {
        if let Some(alert) = rule["alert"].as_str() {
            let url = rule["annotations"]["runbook_url"].as_str().unwrap_or_else(|| panic!("{alert}: no runbook_url"));
            links.entry(alert.to_string()).or_default().insert(url.to_string());
        }
    }
    links
}

#[test]
fn the_default_page_is_this_repositorys_runbooks_md() {
    assert!(DEFAULT_RUNBOOK_PAGE.starts_with("https://"), "{DEFAULT_RUNBOOK_PAGE}");
    assert!(DEFAULT_RUNBOOK_PAGE.ends_with("/docs/runbooks.md"), "{DEFAULT_RUNBOOK_PAGE}");
}

#[test]
fn every_daemon_alert_links_to_its_section() {
    let links = daemon_links();
    assert_eq!(links.keys().copied().collect::<Vec<_>>(), AlertName::ALL, "every rule fired once");
    for (name, urls) in links {
        for url in urls {
            check_link(&url, name, "daemon");
        }
    }
}

#[test]
fn every_generated_alert_links_to_its_section() {
    let links = generated_links();
    let twins: Vec<AlertName> = AlertName::ALL.into_iter().filter(|n| n.has_promql_twin()).collect();
    for name in twins.iter().copied() {
        let urls = links.get(name.as_str()).unwrap_or_else(|| panic!("goodput rules has no {name:?}"));
        for url in urls {
            check_link(url, name, "goodput rules");
        }
    }
    assert_eq!(links.len(), twins.len(), "goodput rules raised alerts this test does not know");
}

#[test]
fn the_slug_follows_github() {
    assert_eq!(slug("LLMKVCacheSaturated"), "llmkvcachesaturated");
    assert_eq!(slug("What it means"), "what-it-means");
    assert_eq!(slug("The `for` clause, (again)!"), "the-for-clause-again");
    let hs = headings("# A\n## What to do\n## What to do\n```\n# not a heading\n```\n");
    let anchors: Vec<&str> = hs.iter().map(|(h, _)| h.anchor.as_str()).collect();
    assert_eq!(anchors, ["a", "what-to-do", "what-to-do-1"]);
}
