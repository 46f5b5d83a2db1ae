//! The status page at `/` in a real browser: headless Chromium (Debian `chromium`) loads it
//! from a running daemon scraping two simulated engines and one dead target, dumps the DOM
//! and takes a screenshot. The test checks what is drawn (targets, SLOs, an SVG per chart,
//! alerts with runbook links, scrape health), that hostile names stay text, that nothing is
//! loaded from elsewhere, and that the screenshot has the right size and is not blank; that
//! the capacity chart draws the numbers `/metrics` exports where their y says; and that the
//! words read right: error budgets over each SLO's period, each capacity stated once,
//! numbers joined to their units, counts that agree with their number. The screenshot is
//! kept at `target/artifacts/status-page.png` (docs/status-page.md).

use crate::net;
use crate::tools;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goodput::config;
use goodput::daemon::{self, clock::SystemClock};
use goodput_sim::config::{Profile, SimConfig};
use goodput_sim::live;

/// A model name as hostile as an engine could send, and a target name from the config.
const EVIL_MODEL: &str = "<script>alert(1)</script>";
const EVIL_TARGET: &str = "<img src=x onerror=alert(2)>";

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 2000;

fn config_yaml(chat: &str, batch: &str, dead: u16) -> String {
    format!(
        r#"
listen: 127.0.0.1:0
evaluation_interval: 1s
scrape: {{interval: 1s, timeout: 900ms}}
targets:
  - {{name: sim-chat, url: "{chat}", engine: vllm, model: "{EVIL_MODEL}"}}
  - {{name: sim-batch, url: "{batch}", engine: vllm, model: sim-llama-70b}}
  - {{name: "{EVIL_TARGET}", url: "http://127.0.0.1:{dead}/metrics", engine: vllm}}
windows: [1m, 5m]
quantiles: [0.5, 0.99]
slos:
  - {{name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99, period: 7d, targets: [sim-chat]}}
  - {{name: batch, ttft: 2s, tpot: 100ms, e2e: 30s, objective: 0.95, models: [sim-llama-70b]}}
  # Met by every request, and a rate bin needs only 20 of them: a capacity estimate (a
  # lower bound, as no failing load is seen) within a minute of steady load.
  - {{name: lax, ttft: 60s, tpot: 5s, objective: 0.5, targets: [sim-chat]}}
kv_cache: {{underloaded: 0.70, target_low: 0.75, target_high: 0.85, critical: 0.90}}
alerting:
  rules:
    # Fires as soon as any KV cache is in use, so that the page has an alert to show.
    LLMKVCacheSaturated: {{threshold: 0.001, for: 0s}}
"#
    )
}

/// Where CI keeps the screenshot.
fn artifact() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/artifacts/status-page.png")
}

/// Runs Chromium headless on `url` with `args`, killed after 90 s; its stdout.
fn chromium(bin: &Path, profile: &Path, args: &[&str], url: &str) -> String {
    let mut child = Command::new(bin)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        .args(["--no-first-run", "--disable-extensions", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium {args:?} did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    assert!(status.success(), "chromium {args:?}: {status:?}\n{stderr}");
    reader.join().unwrap()
}

/// Every `name="…"` attribute value in `html`.
fn attribute_values<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let key = format!(" {name}=\"");
    html.match_indices(&key)
        .map(|(i, _)| {
            let v = &html[i + key.len()..];
            &v[..v.find('"').unwrap_or(v.len())]
        })
        .collect()
}

/// Every `runbook_url` annotation of the alerts `/api/v1/alerts` lists.
fn runbook_urls(port: u16) -> std::collections::HashSet<String> {
    let body = net::get_body(port, "/api/v1/alerts").expect("/api/v1/alerts answers");
    let v: serde_json::Value = serde_json::from_str(&body).expect("/api/v1/alerts is JSON");
    let alerts = v["data"]["alerts"].as_array().expect("data.alerts").iter();
    alerts.filter_map(|a| a["annotations"]["runbook_url"].as_str().map(str::to_string)).collect()
}

/// The units the page writes after numbers.
const UNITS: [&str; 6] = ["ms", "s", "%", "requests/s", "tokens/s", "preemptions/s"];

/// The text between tags, outside `<title>` and `<desc>` (tooltips, and what a screen
/// reader says instead of a drawing), one text node a line.
fn visible_text(html: &str) -> String {
    let mut out = String::new();
    let mut hidden = 0usize;
    for piece in html.split('<') {
        let Some((tag, text)) = piece.split_once('>') else { continue };
        if tag.starts_with("title") || tag.starts_with("desc") {
            hidden += 1;
        } else if tag.starts_with("/title") || tag.starts_with("/desc") {
            hidden = hidden.saturating_sub(1);
        }
        if hidden == 0 && !text.is_empty() {
            out.push_str(text);
            out.push('\n');
        }
    }
    out
}

/// Each number and unit a plain space apart in the text of `html` (a line may break there;
/// the browser writes a no-break space as `&nbsp;`).
fn loose_units(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for piece in html.split('<') {
        let Some((_, text)) = piece.split_once('>') else { continue };
        let words: Vec<&str> = text.split(' ').collect();
        for pair in words.windows(2) {
            let unit = pair[1].trim_end_matches([',', '.', ';', ')', ']', ':']);
            if pair[0].ends_with(|c: char| c.is_ascii_digit()) && UNITS.contains(&unit) {
                found.push(format!("{} {} in {text:?}", pair[0], pair[1]));
            }
        }
    }
    found
}

/// The section of `target` in `html`.
fn section<'a>(html: &'a str, target: &str) -> &'a str {
    let at = html.find(&format!("<h2>{target} ")).unwrap_or_else(|| panic!("no section for {target}"));
    let s = &html[at..];
    &s[..s.find("</section>").unwrap_or(s.len())]
}

/// The words of the page: each SLO's budget over its period, each capacity said once,
/// units joined to numbers, counts in agreement.
fn check_words(dom: &str) {
    assert!(dom.contains("TTFT ≤ 500&nbsp;ms"), "a threshold's number and unit are joined");
    // Error budgets: over each SLO's period (chat sets 7d, batch has the default 28d).
    assert!(dom.contains("<th>error budget over the SLO's period</th>"), "{dom}");
    for (target, slo, period) in [("sim-chat", "chat", "7d"), ("sim-chat", "lax", "28d"), ("sim-batch", "batch", "28d")]
    {
        let s = section(dom, target);
        let row = &s[s.find(&format!(r#"<tr data-slo="{slo}">"#)).unwrap()..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(row.contains(&format!(r#"data-period="{period}""#)), "{slo}: {row}");
        assert!(row.contains(&format!("over the last {period}")), "{slo}: {row}");
    }
    assert!(!dom.contains("error budget left") && !dom.contains("-999"), "{dom}");
    // The capacity of each target, model and SLO is said once.
    for (target, slos) in [("sim-chat", &["chat", "lax"][..]), ("sim-batch", &["batch"][..])] {
        let text = visible_text(section(dom, target));
        for slo in slos {
            assert_eq!(text.matches(&format!("Capacity for SLO {slo}")).count(), 1, "{slo} on {target}:\n{text}");
        }
    }
    let loose = loose_units(dom);
    assert!(loose.is_empty(), "a number and its unit may be split by a line break: {loose:#?}");
    // Counts agree with their number: three targets, two models, one SLO on sim-batch.
    for said in ["3 targets,", "2 models ·", "<small>2 SLOs</small>", "<small>1 SLO</small>"] {
        assert!(dom.contains(said), "{said} not in the DOM");
    }
}

/// The capacity chart of `slo` in `html`: its `<figure>`.
fn capacity_figure<'a>(html: &'a str, slo: &str) -> Option<&'a str> {
    let at = html.find(&format!(r#"data-chart="capacity" data-slo="{slo}""#))?;
    let figure = &html[html[..at].rfind("<figure")?..];
    Some(&figure[..figure.find("</figure>")?])
}

/// The page once both engines have several evaluations in their charts, an alert fires, and
/// the steady engine has a capacity estimate for `lax`.
fn wait_for_page(port: u16) -> String {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(500));
        let Some(page) = net::get_raw(port, "/") else { continue };
        let ready = |target: &str| {
            page.find(&format!(r#"<h2>{target} "#)).is_some_and(|at| {
                let section = &page[at..];
                let section = &section[..section.find("</section>").unwrap_or(section.len())];
                attribute_values(section, "data-points").iter().any(|n| n.parse::<u32>().unwrap_or(0) >= 8)
            })
        };
        let estimated = capacity_figure(&page, "lax").is_some_and(|f| !f.contains(r#"data-state="none""#));
        if ready("sim-chat") && ready("sim-batch") && page.contains(r#"<a class="runbook""#) && estimated {
            return page;
        }
        last = page;
    }
    panic!("the page did not show both engines with 8 evaluations, an alert and a capacity within 120 s:\n{last}");
}

/// The capacity samples of `/metrics` for SLO `lax` of sim-chat, and its arrival rate: the
/// conservative end's q=0.1 and q=0.9, the headroom and the arrivals.
fn exported_capacity(port: u16) -> [Option<f64>; 4] {
    let body = net::get_body(port, "/metrics").expect("/metrics answers");
    let value = |family: &str, want: &[&str]| {
        body.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(r#"target="sim-chat""#))
            .filter(|l| want.iter().all(|w| l.contains(w)))
            // Histogram bounds give two ends: the conservative one is the lower.
            .find(|l| !l.contains("bound=") || l.contains(r#"bound="lower""#))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
    };
    [
        value("llm_slo_capacity_request_rate", &[r#"slo="lax""#, r#"q="0.1""#]),
        value("llm_slo_capacity_request_rate", &[r#"slo="lax""#, r#"q="0.9""#]),
        value("llm_slo_capacity_headroom_ratio", &[r#"slo="lax""#]),
        value("llm_slo_capacity_arrival_rate", &[]),
    ]
}

/// The number in `attr="…"` of the first element of `html` that starts with `tag`.
fn number(html: &str, tag: &str, attr: &str) -> f64 {
    let at = html.find(tag).unwrap_or_else(|| panic!("no {tag} in {html}"));
    let element = &html[at..at + html[at..].find('>').unwrap()];
    let v = attribute_values(element, attr);
    v.first().unwrap_or_else(|| panic!("no {attr} in {element}")).parse().unwrap()
}

/// The capacity chart of `lax` against what `/metrics` exported at the same time: the right
/// edge's marks sit at the y of the exported values on the chart's scale, and say them.
fn check_capacity_chart(dom: &str, exported: [Option<f64>; 4]) {
    let [p10, p90, headroom, arrivals] = exported;
    let p10 = p10.expect("/metrics has the lax capacity");
    let f = capacity_figure(dom, "lax").expect("a capacity chart for lax");
    for part in
        ["<svg class=\"capacity\"", "<title>Capacity for SLO lax", "<desc>Capacity ", "<figcaption>", "key arrivals"]
    {
        assert!(f.contains(part), "{part} not in the capacity chart:\n{f}");
    }
    let (top, y0, h) =
        (number(f, "<figure", "data-top"), number(f, "<figure", "data-plot-y"), number(f, "<figure", "data-plot-h"));
    let rate_at = |y: f64| top * (1.0 - (y - y0) / h);
    // Coordinates have one decimal: a twentieth of a pixel.
    let close = |a: f64, b: f64| (a - b).abs() <= top * 0.06 / h + 1e-9;
    let censored = f.contains(r#"data-state="lower-bound""#);
    if censored {
        // A lower bound: a dashed line and an arrow at the bound, no band.
        assert!(f.contains(r#"class="line bound""#) && !f.contains("capband"), "{f}");
        let d = attribute_values(f, "d").into_iter().find(|d| d.contains("h8M")).expect("the arrow's path");
        let y: f64 = d.split(['M', ' ', 'h']).nth(2).unwrap().parse().unwrap();
        assert!(close(rate_at(y), p10), "bound drawn at {} for {p10} exported", rate_at(y));
        assert_eq!(number(f, r#"<path class="now bound""#, "data-value"), p10);
        assert!(f.contains(&format!("≥ {p10:.2}")), "{f}");
    } else {
        assert!(f.contains(r#"data-state="interval""#), "{f}");
        let p90 = p90.expect("/metrics has q=0.9");
        let tag = r#"<rect class="now capband""#;
        let (y, height) = (number(f, tag, "y"), number(f, tag, "height"));
        assert!(close(rate_at(y), p90) && close(rate_at(y + height), p10), "band {y}+{height} for {p10}–{p90}");
    }
    let a = arrivals.expect("/metrics has the arrival rate");
    assert!(close(rate_at(number(f, r#"<circle class="now arrivals""#, "cy")), a), "arrivals {a}");
    if let Some(h) = headroom {
        let shown = format!("{}{h:.2}×", if censored { "≥ " } else { "" });
        assert!(f.contains(&shown), "headroom {shown} not in {f}");
    }
}

#[test]
fn chromium_draws_the_status_page_from_a_running_daemon() {
    let Some(browser) = tools::require_any(&["chromium", "chromium-browser"]) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (d, engines) = rt.block_on(async {
        let mut engines = Vec::new();
        for (profile, model) in [(Profile::Steady, EVIL_MODEL), (Profile::Ramp, "sim-llama-70b")] {
            let mut sim = SimConfig::profile(profile);
            sim.model = model.into();
            engines.push(live::serve(sim, "127.0.0.1:0".parse().unwrap(), 1.0).await.unwrap());
        }
        let yaml = config_yaml(&engines[0].url(), &engines[1].url(), net::free_port());
        let cfg = config::from_str(&yaml, "status_page.yaml").expect("the test config is valid").config;
        let d = daemon::start(cfg, Arc::new(SystemClock)).await.unwrap();
        (d, engines)
    });
    let port = d.local_addr().port();
    let served = wait_for_page(port);

    // What the daemon sent: a strict policy, HTML, and its own stylesheet.
    let (head, _) = served.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/html; charset=utf-8"), "{head}");
    assert!(head.contains("content-security-policy: default-src 'none'; style-src 'self';"), "{head}");
    let css = net::get_raw(port, "/status.css").unwrap();
    assert!(css.starts_with("HTTP/1.1 200") && css.contains(".band.target"), "{css}");

    let profile = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    // The capacity moves once per history interval (15 s): a DOM between two equal reads
    // of /metrics shows the numbers they exported.
    let (dom, exported) = (0..5)
        .find_map(|_| {
            let before = exported_capacity(port);
            let dom = chromium(&browser, profile.path(), &["--dump-dom"], &url);
            (exported_capacity(port) == before).then_some((dom, before))
        })
        .expect("/metrics kept changing while Chromium loaded the page");
    let runbook_urls = runbook_urls(port);
    let shot = artifact();
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&shot);
    let size = format!("--window-size={WIDTH},{HEIGHT}");
    chromium(&browser, profile.path(), &[&format!("--screenshot={}", shot.display()), &size], &url);
    rt.block_on(async {
        d.shutdown().await;
        for e in engines {
            e.shutdown().await;
        }
    });

    // The DOM as the browser built it.
    assert!(dom.contains("<title>goodput status</title>"), "{dom}");
    for needle in [
        r#"<section id="alerts">"#,
        r#"<section id="health">"#,
        "<h2>sim-chat ",
        "<h2>sim-batch ",
        r#"data-slo="chat""#,
        r#"data-slo="batch""#,
        "LLMKVCacheSaturated",
        r#"<a class="runbook" href=""#,
        "Connection refused",
    ] {
        assert!(dom.contains(needle), "{needle} not in the DOM:\n{dom}");
    }
    // A capacity chart per target and SLO: drawn, or a sentence while there is no estimate.
    let capacity: Vec<&str> = dom.split(r#"<figure class="chart capacity""#).skip(1).collect();
    assert_eq!(capacity.len(), 3, "chat and lax on sim-chat, batch on sim-batch");
    for f in &capacity {
        let words = f.contains(r#"data-state="none""#);
        assert_eq!(words, f.contains("not enough load variation yet"), "{f}");
        assert_eq!(words, !f[..f.find("</figure>").unwrap()].contains("<svg"), "{f}");
    }
    check_capacity_chart(&dom, exported);
    check_words(&dom);
    // Hostile names are text: no element was made of them.
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{dom}");
    assert!(dom.contains("&lt;img src=x onerror=alert(2)&gt;"), "{dom}");
    assert!(!dom.contains("<script") && !dom.contains("<img"), "{dom}");
    // Two models (the dead target has none), four charts each, each an SVG.
    for chart in ["goodput", "ttft", "tpot", "kv"] {
        let n = dom.matches(&format!(r#"<figure class="chart" data-chart="{chart}""#)).count();
        assert_eq!(n, 2, "{chart} charts");
    }
    let figures: Vec<&str> = dom.split(r#"<figure class="chart""#).skip(1).collect();
    assert!(figures.iter().all(|f| f.contains("<svg") && f.contains("</svg>")), "a chart without its SVG");
    assert!(dom.matches(r#"class="attainment""#).count() >= 2, "attainment brackets drawn");
    assert!(dom.contains(r#"class="threshold""#) && dom.contains(r#"class="band critical""#));
    // Nothing comes from elsewhere: every src and href is the daemon's own, or a runbook link.
    let runbooks = dom.matches(r#"<a class="runbook" href=""#).count();
    let external: Vec<&str> = ["src", "href"]
        .iter()
        .flat_map(|a| attribute_values(&dom, a))
        .filter(|v| v.contains("//") || v.starts_with("data:") || v.starts_with("javascript:"))
        .collect();
    assert_eq!(external.len(), runbooks, "only runbook links leave the daemon: {external:?}");
    // Each runbook link is the one its alert carries (crates/core/src/alert computes it).
    assert!(external.iter().all(|v| runbook_urls.contains(*v)), "{external:?} not in {runbook_urls:?}");

    // The screenshot: the right size, and drawn.
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (WIDTH, HEIGHT));
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let pixels: Vec<[u8; 3]> = buf[..info.buffer_size()].chunks(channels).map(|p| [p[0], p[1], p[2]]).collect();
    let non_white = pixels.iter().filter(|p| **p != [255, 255, 255]).count();
    let colours: std::collections::HashSet<[u8; 3]> = pixels.iter().copied().collect();
    assert!(non_white * 20 > pixels.len(), "{non_white} of {} pixels are not white", pixels.len());
    assert!(colours.len() > 50, "{} distinct colours: a blank or unstyled page", colours.len());
    // The KV chart's target band, in the stylesheet's colour: CSS and SVG were applied.
    assert!(colours.contains(&[0xda, 0xfb, 0xe1]), "no pixel of the KV target band colour");
}
