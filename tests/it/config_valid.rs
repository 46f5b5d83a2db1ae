//! Valid configs: every key read into the typed config, defaults filled in, warnings for
//! legal but doubtful settings, and the semantic errors that need a whole config around them.

use std::time::Duration;

use goodput::adapt::EngineHint;
use goodput::alert::rule::Severity;
use goodput::canonical::Engine;
use goodput::config;

const FULL: &str = r#"
listen: 0.0.0.0:9000
evaluation_interval: 2s
scrape: {interval: 10s, timeout: 4s, body_limit: 1048576, gzip: false, max_models: 50, max_series: 20000}
server: {max_connections: 32, header_read_timeout: 5s, idle_timeout: 2m}
targets:
  - name: llama
    url: http://10.0.0.1:8000/metrics
  - name: tgi
    url: https://tgi.internal:3000/metrics
    engine: tgi
    model: mistral-7b
    bearer_token_file: /run/secrets/token
    headers: {X-Tenant: infra}
    interval: 20s
    timeout: 15s
    follow_redirects: false
    max_models: 2000
windows: [1h, 1m]
quantiles: [0.99, 0.5]
slos:
  - {name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99, targets: [llama], models: [m]}
  - {name: batch, e2e: 30s, objective: 0.95}
kv_cache: {underloaded: 0.6, critical: 0.95}
alerting:
  alertmanagers: [{url: http://am-0:9093}, {url: http://am-1:9093}]
  resend_interval: 30s
  runbook_url: https://runbooks.example.com/
  webhook: {url: http://127.0.0.1:8080/hook}
  rules:
    LLMKVCacheSaturated: {for: 2m, threshold: 0.92, severity: ticket}
    LLMQueueGrowing: {enabled: false}
"#;

#[test]
fn every_key_is_read() {
    let loaded = config::from_str(FULL, "full.yaml").unwrap_or_else(|e| panic!("{e}"));
    let c = loaded.config;
    assert_eq!(c.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(c.evaluation_interval, Duration::from_secs(2));
    assert_eq!(c.scrape.interval, Duration::from_secs(10));
    assert_eq!(c.scrape.timeout, Duration::from_secs(4));
    assert_eq!(c.scrape.body_limit, 1_048_576);
    assert!(!c.scrape.gzip);
    assert_eq!(c.server.max_connections, 32);
    assert_eq!(
        (c.server.header_read_timeout, c.server.idle_timeout),
        (Duration::from_secs(5), Duration::from_secs(120))
    );
    assert_eq!((c.scrape.cardinality.max_models, c.scrape.cardinality.max_series), (50, 20_000));

    let (llama, tgi) = (&c.targets[0], &c.targets[1]);
    assert_eq!(llama.engine, EngineHint::Auto);
    assert_eq!(llama.model, "llama", "model defaults to the target name");
    assert_eq!((llama.interval, llama.timeout), (Duration::from_secs(10), Duration::from_secs(4)));
    assert_eq!(tgi.engine, EngineHint::Is(Engine::Tgi));
    assert_eq!(tgi.model, "mistral-7b");
    // A target's own limit overrides the global one; the other falls back to it.
    assert_eq!(llama.cardinality, c.scrape.cardinality);
    assert_eq!((tgi.cardinality.max_models, tgi.cardinality.max_series), (2000, 20_000));
    assert_eq!(tgi.url.as_str(), "https://tgi.internal:3000/metrics");
    assert_eq!(tgi.bearer_token_file.as_deref(), Some(std::path::Path::new("/run/secrets/token")));
    let headers: Vec<(&str, &str)> = tgi.headers.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
    assert_eq!(headers, [("X-Tenant", "infra")]);
    // Header values are secrets: a Debug of the config never shows them.
    assert!(!format!("{c:?}").contains("infra"), "{c:?}");
    assert_eq!((tgi.interval, tgi.timeout), (Duration::from_secs(20), Duration::from_secs(15)));
    assert!(c.scrape.follow_redirects && llama.follow_redirects, "on by default, as in Prometheus");
    assert!(!tgi.follow_redirects);

    let windows: Vec<String> = c.windows.iter().map(|w| w.label()).collect();
    assert_eq!(windows, ["1m", "1h"], "sorted shortest first");
    assert_eq!(c.quantiles, [0.5, 0.99]);

    assert_eq!(c.slos.len(), 2);
    assert_eq!(c.slos[0].ttft, Some(Duration::from_millis(500)));
    assert_eq!(c.slos[0].tpot, Some(Duration::from_millis(50)));
    assert_eq!(c.slos[0].scope.targets, ["llama"]);
    assert_eq!(c.slos[0].scope.models, ["m"]);
    assert_eq!((c.slos[1].e2e, c.slos[1].objective.get()), (Some(Duration::from_secs(30)), 0.95));
    assert!(c.slos[1].scope.applies_to("any", "model"), "no scope keys: every target and model");

    assert_eq!((c.kv_cache.underloaded, c.kv_cache.target_low), (0.6, 0.75));
    assert_eq!((c.kv_cache.target_high, c.kv_cache.critical), (0.85, 0.95));

    let a = &c.alerting;
    assert_eq!(a.alertmanager_urls().len(), 2);
    assert_eq!(a.resend_interval, Duration::from_secs(30));
    assert_eq!(a.webhook.as_ref().unwrap().url, "http://127.0.0.1:8080/hook");
    let kv = &a.rules.kv_cache_saturated;
    assert_eq!(
        (kv.for_, kv.threshold, kv.severity),
        (Some(Duration::from_secs(120)), Some(0.92), Some(Severity::Ticket))
    );
    assert_eq!(a.rules.queue_growing.enabled, Some(false));
    assert_eq!(a.runbook_url.as_deref(), Some("https://runbooks.example.com/"));

    // The shortest window (1m) holds three scrapes at the slowest interval (20s): no warning.
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn defaults() {
    let c = config::from_str("targets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]", "d.yaml").unwrap().config;
    assert_eq!(c.listen.to_string(), "127.0.0.1:9464");
    assert_eq!((c.scrape.interval, c.scrape.timeout), (Duration::from_secs(5), Duration::from_secs(3)));
    assert_eq!(c.evaluation_interval, c.scrape.interval);
    assert_eq!(c.scrape.body_limit, 16 << 20);
    assert!(c.scrape.gzip);
    assert_eq!(c.server, config::ServerConfig::default());
    assert_eq!(c.server.max_connections, 256);
    assert_eq!(
        (c.server.header_read_timeout, c.server.idle_timeout),
        (Duration::from_secs(10), Duration::from_secs(60))
    );
    assert_eq!((c.scrape.cardinality.max_models, c.scrape.cardinality.max_series), (1_000, 100_000));
    assert_eq!(c.targets[0].cardinality, c.scrape.cardinality);
    let windows: Vec<String> = c.windows.iter().map(|w| w.label()).collect();
    assert_eq!(windows, ["1m", "5m", "15m", "1h"]);
    assert_eq!(c.quantiles, [0.5, 0.9, 0.95, 0.99]);
    assert_eq!(c.kv_cache, goodput::evaluate::KvThresholds::default());
    assert!(c.alerting.alertmanager_urls().is_empty() && c.slos.is_empty());
    // The default burn-rate alerts read 6h windows, so the store keeps 6 hours.
    assert_eq!(c.max_window(), Duration::from_secs(6 * 3600));
}

#[test]
fn the_latency_alerts_add_p99_to_the_configured_quantiles() {
    let base = "targets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]\nquantiles: [0.5, 0.9]\n";
    let c = config::from_str(base, "q.yaml").unwrap().config;
    assert_eq!(c.quantiles, [0.5, 0.9], "the config is kept as written");
    assert_eq!(c.eval_quantiles(), [0.5, 0.9, 0.99]);
    assert_eq!(c.eval_config().quantiles, [0.5, 0.9, 0.99]);
    let off = format!(
        "{base}alerting: {{rules: {{LLMTTFTAboveSLO: {{enabled: false}}, LLMTPOTAboveSLO: {{enabled: false}}}}}}\n"
    );
    let c = config::from_str(&off, "q.yaml").unwrap().config;
    assert_eq!(c.eval_quantiles(), [0.5, 0.9], "no latency alert, no extra quantile");
}

#[test]
fn windows_only_the_rules_read_are_evaluated_for_them_alone() {
    let base = "targets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]\n";
    let c = config::from_str(base, "w.yaml").unwrap().config;
    let only: Vec<(String, Vec<f64>)> =
        c.eval_config().alert_only.iter().map(|a| (a.window.label(), a.quantiles.clone())).collect();
    // The slow burn pair's windows; 5m and 1h are configured, and no latency rule reads 30m or 6h.
    assert_eq!(only, [("30m".to_string(), vec![]), ("6h".to_string(), vec![])]);
    // A latency rule moved onto a window nobody configured asks for its p99 there.
    let moved = format!("{base}windows: [1m]\nalerting: {{rules: {{LLMTTFTAboveSLO: {{window: 5m}}}}}}\n");
    let c = config::from_str(&moved, "w.yaml").unwrap().config;
    let five = c.eval_config().alert_only.into_iter().find(|a| a.window.label() == "5m").expect("5m is alert-only");
    assert_eq!(five.quantiles, [0.99]);
    // Listing a window makes it a full one.
    let listed = format!("{base}windows: [1m, 30m, 6h]\n");
    let c = config::from_str(&listed, "w.yaml").unwrap().config;
    let only: Vec<String> = c.eval_config().alert_only.iter().map(|a| a.window.label()).collect();
    assert_eq!(only, ["5m", "1h"]);
}

#[test]
fn a_short_interval_pulls_the_default_timeout_down() {
    let yaml = "scrape: {interval: 1s}\ntargets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]";
    let c = config::from_str(yaml, "s.yaml").unwrap().config;
    assert_eq!(c.scrape.timeout, Duration::from_secs(1));
    assert_eq!(c.targets[0].timeout, Duration::from_secs(1));
    // Scraping every second does not make the daemon evaluate every second by default.
    assert_eq!(c.evaluation_interval, Duration::from_secs(5));
}

#[test]
fn short_window_is_a_warning_with_position() {
    let yaml =
        "scrape: {interval: 10s}\ntargets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]\nwindows: [15s, 1m]\n";
    let loaded = config::from_str(yaml, "w.yaml").unwrap();
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    let w = loaded.warnings[0].to_string();
    assert!(w.starts_with("w.yaml:3:11: window 15s holds fewer than two scrapes"), "{w}");
}

#[test]
fn header_problems_point_at_the_value() {
    let yaml = "targets:\n  - name: a\n    url: http://127.0.0.1:8000/metrics\n    bearer_token_file: /t\n    headers:\n      Authorization: Basic x\n      Bad Name: v\n";
    let errs = config::from_str(yaml, "h.yaml").unwrap_err().0;
    let shown: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert_eq!(shown.len(), 2, "{shown:#?}");
    assert!(shown[0].starts_with("h.yaml:6:22: headers.Authorization and bearer_token_file"), "{}", shown[0]);
    assert!(shown[1].starts_with("h.yaml:7:17: invalid HTTP header name \"Bad Name\""), "{}", shown[1]);
}

#[test]
fn both_alertmanager_forms_is_an_error() {
    let yaml = "targets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]\nalerting:\n  alertmanager: {url: 'http://a:9093'}\n  alertmanagers: [{url: 'http://b:9093'}]\n";
    let errs = config::from_str(yaml, "a.yaml").unwrap_err().0;
    assert_eq!(errs.len(), 1);
    assert_eq!((errs[0].pos.line, errs[0].pos.column), (3, 3));
    assert!(errs[0].message.contains("use alertmanagers: [{url: ...}, ...] for several"));
}

#[test]
fn empty_file_says_what_to_add() {
    let errs = config::from_str("  \n", "e.yaml").unwrap_err().0;
    assert_eq!(
        errs[0].to_string(),
        "e.yaml: the config file is empty; it needs at least `targets:` (see config/example.yaml)"
    );
}

/// The commented-out blocks of config/example.yaml: each starts after a comment line that
/// says "uncomment to use" and runs over the comment lines that follow, up to a line that is
/// not a comment (a blank one included) or the next such line. Each block is returned as its
/// lead's line number, its own line numbers, and the whole file with that block, and only it,
/// uncommented in place.
fn example_with_each_block_uncommented(text: &str) -> Vec<(usize, Vec<usize>, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let is_comment = |l: &str| l.trim_start().starts_with('#');
    let is_lead = |l: &str| is_comment(l) && l.to_ascii_lowercase().contains("uncomment to use");
    let mut out = Vec::new();
    for (lead, _) in lines.iter().enumerate().filter(|(_, l)| is_lead(l)) {
        let block: Vec<usize> =
            (lead + 1..lines.len()).take_while(|&i| is_comment(lines[i]) && !is_lead(lines[i])).collect();
        assert!(!block.is_empty(), "example.yaml:{}: \"uncomment to use\" is followed by no commented lines", lead + 1);
        let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        for &i in &block {
            let hash = lines[i].find('#').unwrap();
            let rest = &lines[i][hash + 1..];
            edited[i] = format!("{}{}", &lines[i][..hash], rest.strip_prefix(' ').unwrap_or(rest));
        }
        out.push((lead + 1, block.iter().map(|i| i + 1).collect(), edited.join("\n") + "\n"));
    }
    out
}

/// A comment line that reads as a YAML key or list item (`# key: …`, `#   - key: …`).
fn looks_like_config(line: &str) -> bool {
    let Some(rest) = line.trim_start().strip_prefix('#') else { return false };
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("- ").unwrap_or(rest);
    let key_len = rest.bytes().take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_').count();
    key_len > 0 && rest[key_len..].starts_with(':') && rest[key_len + 1..].chars().next().is_none_or(|c| c == ' ')
}

/// Every commented block of config/example.yaml, uncommented alone, passes `goodput check`,
/// so a user who follows "uncomment to use" gets a config that works. A commented key outside
/// such a block fails the test: it would be one nobody checks.
#[test]
fn every_commented_block_of_the_example_config_passes_check() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("config/example.yaml")).expect("config/example.yaml reads");
    let blocks = example_with_each_block_uncommented(&text);
    assert!(blocks.len() >= 8, "only {} commented blocks found", blocks.len());
    let covered: std::collections::BTreeSet<usize> = blocks.iter().flat_map(|(_, block, _)| block.clone()).collect();
    for (n, line) in text.lines().enumerate() {
        assert!(
            !looks_like_config(line) || covered.contains(&(n + 1)),
            "example.yaml:{}: a commented key outside an \"uncomment to use\" block: {line}",
            n + 1
        );
    }
    let dir = std::env::temp_dir().join(format!("goodput-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (lead, _, edited) in &blocks {
        let path = dir.join(format!("example-{lead}.yaml"));
        std::fs::write(&path, edited).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .expect("goodput check runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let kubernetes = edited.lines().any(|l| l.trim_start().starts_with("- kubernetes:"));
        if kubernetes && !cfg!(feature = "kubernetes") {
            assert!(
                !out.status.success(),
                "block after example.yaml:{lead}: kubernetes discovery accepted by a build without it"
            );
            assert!(stderr.contains("--features kubernetes"), "block after example.yaml:{lead}: {stderr}");
        } else {
            assert!(
                out.status.success(),
                "block after example.yaml:{lead}, uncommented, fails goodput check:\n{stdout}{stderr}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The deprecated `runbook_base_url` still works, with a warning at its key that gives the
/// `runbook_url` with the same links.
#[test]
fn the_deprecated_runbook_base_url_is_a_warning_with_its_replacement() {
    let yaml = "targets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]\nalerting:\n  runbook_base_url: https://wiki.example.com/llm/\n";
    let loaded = config::from_str(yaml, "r.yaml").unwrap();
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert_eq!(
        loaded.warnings[0].to_string(),
        "r.yaml:3:3: alerting.runbook_base_url is deprecated; write `runbook_url: \"https://wiki.example.com/llm/{alertname}\"` instead, which gives the same links (docs/alerts.md#runbooks)"
    );
    assert_eq!(loaded.config.alerting.runbook_page().as_deref(), Some("https://wiki.example.com/llm/{alertname}"));
}
