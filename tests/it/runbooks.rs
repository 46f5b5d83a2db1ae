//! Every alert's runbook link lands on a real section of the runbooks: docs/runbooks.md has a
//! complete section per alert, headed by the alert's name, whose anchor (GitHub's, and the
//! daemon's `/runbooks/` page's) is the one the links end in; the daemon's default link is
//! its own page, which a GET against a running daemon finds with every alert's anchor; and
//! `goodput rules` links into `alerting.runbook_url`, or, without one, leaves the link out
//! rather than point at an address nobody serves.

use crate::common;
use crate::support::PATIENCE;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use goodput::alert::{
    AlertEngine, AlertInput, AlertName, AlertingConfig, Bounded, CapacityInput, Clause, DataSource, KvUsage, SloReport,
    WindowInput,
};
use goodput::duration::Window;
use goodput::serve::runbooks::with_default_page;
use goodput::slo::{Objective, Scope, Slo};

const PAGE: &str = include_str!("../../docs/runbooks.md");
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

/// Checks that `url` is `page#<anchor>`, the anchor of `name`'s section, and that the
/// section is complete.
fn check_link(url: &str, page: &str, name: AlertName, source: &str) {
    let anchor = url
        .strip_prefix(page)
        .and_then(|rest| rest.strip_prefix('#'))
        .unwrap_or_else(|| panic!("{source}: {name:?} links to {url}, not to a section of {page}"));
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
        sources: Default::default(),
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

/// The daemon's default page when it listens on 127.0.0.1:9464.
const DAEMON_PAGE: &str = "http://127.0.0.1:9464/runbooks/";

/// The `runbook_url` of every alert the daemon's engine raises with the default config,
/// listening on 127.0.0.1:9464.
fn daemon_links() -> BTreeMap<AlertName, BTreeSet<String>> {
    let cfg = with_default_page(&AlertingConfig::default(), "127.0.0.1:9464".parse().unwrap());
    assert_eq!(cfg.runbook_url.as_deref(), Some(DAEMON_PAGE));
    let mut engine = AlertEngine::new(cfg.rule_set(), cfg.runbook_page(), cfg.resend_interval);
    engine.evaluate(1_000, &[overloaded(), down()]);
    let mut out: BTreeMap<AlertName, BTreeSet<String>> = BTreeMap::new();
    for a in engine.active() {
        let url = a.annotations.get("runbook_url").unwrap_or_else(|| panic!("{:?} has no runbook_url", a.name));
        out.entry(a.name).or_default().insert(url.clone());
    }
    out
}

/// `goodput rules` for a config with `alerting` as given: the `runbook_url` of every alert
/// rule (`None` for a rule without one), and what it printed on stderr.
fn generated_links(alerting: &str) -> (BTreeMap<String, BTreeSet<Option<String>>>, String) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("goodput.yml");
    std::fs::write(
        &cfg,
        format!(
            "targets: [{{name: llama, url: \"http://127.0.0.1:8000/metrics\"}}]\n\
             slos: [{{name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99}}]\n\
             alerting: {{alertmanager: {{url: \"http://127.0.0.1:9093\"}}{alerting}}}\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["rules", "--format", "prometheus", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "goodput rules failed: {stderr}");
    let file: serde_json::Value = serde_saphyr::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let mut links: BTreeMap<String, BTreeSet<Option<String>>> = BTreeMap::new();
    for rule in file["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()) {
        if let Some(alert) = rule["alert"].as_str() {
            let url = rule["annotations"]["runbook_url"].as_str().map(str::to_string);
            links.entry(alert.to_string()).or_default().insert(url);
        }
    }
    (links, stderr)
}

#[test]
fn every_daemon_alert_links_to_its_section_of_the_daemons_own_page() {
    let links = daemon_links();
    assert_eq!(links.keys().copied().collect::<Vec<_>>(), AlertName::ALL, "every rule fired once");
    for (name, urls) in links {
        for url in urls {
            check_link(&url, DAEMON_PAGE, name, "daemon");
        }
    }
}

#[test]
fn every_generated_alert_links_to_its_section_of_runbook_url() {
    let page = "https://goodput.example.com/runbooks/";
    let (links, _) = generated_links(&format!(", runbook_url: \"{page}\""));
    let twins: Vec<AlertName> = AlertName::ALL.into_iter().filter(|n| n.has_promql_twin()).collect();
    for name in twins.iter().copied() {
        let urls = links.get(name.as_str()).unwrap_or_else(|| panic!("goodput rules has no {name:?}"));
        for url in urls {
            let url = url.as_deref().unwrap_or_else(|| panic!("{name:?} has no runbook_url"));
            check_link(url, page, name, "goodput rules");
        }
    }
    assert_eq!(links.len(), twins.len(), "goodput rules raised alerts this test does not know");
}

#[test]
fn without_runbook_url_generated_alerts_carry_no_link_and_rules_says_so() {
    let (links, stderr) = generated_links("");
    assert!(!links.is_empty());
    for (alert, urls) in &links {
        assert_eq!(urls, &BTreeSet::from([None]), "{alert} links to an address nobody serves");
    }
    assert!(stderr.contains("sets no alerting.runbook_url") && stderr.contains("/runbooks/"), "{stderr}");
}

#[test]
fn the_deprecated_base_still_links_each_alert_to_its_page_with_a_warning() {
    let (links, stderr) = generated_links(", runbook_base_url: \"https://wiki.example.com/llm\"");
    let urls = &links["LLMTargetDown"];
    assert_eq!(urls, &BTreeSet::from([Some("https://wiki.example.com/llm/LLMTargetDown".to_string())]));
    assert!(
        stderr.contains(
            "alerting.runbook_base_url is deprecated; write `runbook_url: \"https://wiki.example.com/llm/{alertname}\"`"
        ),
        "{stderr}"
    );
}

#[test]
fn the_slug_follows_github() {
    assert_eq!(slug("LLMKVCacheSaturated"), "llmkvcachesaturated");
    assert_eq!(slug("What it means"), "what-it-means");
    assert_eq!(slug("The `for` clause, (again)!"), "the-for-clause-again");
    let hs = headings("# A\n## What to do\n## What to do\n```\n# not a heading\n```\n");
    let anchors: Vec<&str> = hs.iter().map(|(h, _)| h.anchor.as_str()).collect();
    assert_eq!(anchors, ["a", "what-to-do", "what-to-do-1"]);
    for (h, _) in headings(PAGE) {
        assert_eq!(goodput::serve::runbooks::slug(&h.text), slug(&h.text), "the daemon's anchor for {:?}", h.text);
    }
}

/// The `(id, heading)` of every `<hN id="…">…</hN>` of an HTML page.
fn html_headings(html: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for piece in html.split("<h").skip(1) {
        let Some(rest) = piece.strip_prefix(|c: char| ('1'..='6').contains(&c)) else { continue };
        let Some(rest) = rest.strip_prefix(" id=\"") else { continue };
        let (id, rest) = rest.split_once('"').unwrap();
        let text = rest.trim_start_matches('>').split("</h").next().unwrap();
        out.push((id.to_string(), text.to_string()));
    }
    out
}

/// A running daemon whose only target is down: LLMTargetDown fires, and the link it carries
/// opens, on that same daemon, a page with a section for every alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_serves_the_page_its_alerts_link_to() {
    let down = common::Fixture::refused_addr().await;
    let cfg = goodput::config::from_str(
        &format!(
            "listen: 127.0.0.1:0\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\n\
             targets: [{{name: gone, url: 'http://{down}/metrics', engine: vllm}}]\n"
        ),
        "runbooks.yaml",
    )
    .expect("valid config")
    .config;
    // 60× time: LLMTargetDown's `for: 1m` passes in a second.
    let clock = Arc::new(common::FastClock::start(1_700_000_000_000, 60.0));
    let d = goodput::daemon::start(cfg, clock).await.expect("daemon starts");
    let base = format!("http://{}", d.local_addr());
    let mut link = None;
    let began = std::time::Instant::now();
    while began.elapsed() < PATIENCE {
        let (_, body) = common::get(&format!("{base}/api/v1/alerts")).await;
        let alerts: serde_json::Value = serde_json::from_str(&body).unwrap();
        link = alerts["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["labels"]["alertname"] == "LLMTargetDown")
            .and_then(|a| a["annotations"]["runbook_url"].as_str().map(str::to_string));
        if link.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let link = link.unwrap_or_else(|| panic!("no LLMTargetDown with a runbook_url within {PATIENCE:?}"));
    assert_eq!(link, format!("{base}/runbooks/#llmtargetdown"), "the link is this daemon's own page");

    let client = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = client.get(link.split('#').next().unwrap()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    assert!(h["content-security-policy"].to_str().unwrap().starts_with("default-src 'none'; style-src 'self'"));
    let html = r.text().await.unwrap();
    assert!(html.contains("<title>goodput runbooks</title>") && !html.contains("<script"), "{html}");
    let found = html_headings(&html);
    for name in AlertName::ALL {
        let section = (name.runbook_anchor(), name.as_str().to_string());
        assert!(found.contains(&section), "no <h2 id=\"{}\">{}</h2> on /runbooks/", section.0, section.1);
    }
    // Every heading of the markdown, with the anchor GitHub gives it, in order.
    let expected: Vec<(String, String)> = headings(PAGE).into_iter().map(|(h, _)| (h.anchor, h.text)).collect();
    let plain: Vec<(String, String)> =
        found.iter().map(|(id, t)| (id.clone(), t.replace("<code>", "`").replace("</code>", "`"))).collect();
    assert_eq!(plain, expected);

    let css = client.get(format!("{base}/runbooks/runbooks.css")).send().await.unwrap();
    assert_eq!(
        (css.status().as_u16(), css.headers()["content-type"].to_str().unwrap()),
        (200, "text/css; charset=utf-8")
    );
    let bare = client.get(format!("{base}/runbooks")).send().await.unwrap();
    assert_eq!((bare.status().as_u16(), bare.headers()["location"].to_str().unwrap()), (301, "runbooks/"));
    d.shutdown().await;
}
