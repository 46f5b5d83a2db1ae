//! The wall clock stepping under a running daemon (docs/limits.md#clock-steps): the daemon
//! is started with a clock that reads the system clock less a settable step, as an NTP
//! step or an operator's `date -s` would move it. A step back of an hour keeps every
//! window's histogram quantiles and coverage (the daemon's time goes on from the monotonic
//! clock) and says so on /metrics; the step forward that corrects it is taken back without
//! a jump.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::support::{PATIENCE, until_async};
use common::{Fixture, get, metrics_samples, sample_value, vllm_body};
use goodput::daemon::{self, clock::Clock, clock::SystemClock};
use goodput::report::Report;

const HOUR_MS: i64 = 3_600_000;

/// The system clock less `back` ms.
struct SteppedClock {
    back: AtomicI64,
}

impl Clock for SteppedClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() - self.back.load(Ordering::SeqCst)
    }
}

/// The TTFT quantiles of the target's 1m window that have a value, and its coverage.
fn ttft(r: &Report) -> (usize, f64) {
    let Some(w) = r.targets.first().and_then(|t| t.models.first()).and_then(|m| m.windows.first()) else {
        return (0, 0.0);
    };
    let n = w.latency.iter().filter(|q| q.metric.as_str() == "ttft" && q.value.is_finite()).count();
    (n, w.coverage)
}

async fn metric(d: &daemon::Daemon, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let (_, body) = get(&format!("http://{}/metrics", d.local_addr())).await;
    sample_value(&metrics_samples(&body), name, labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hour_step_back_keeps_the_windows_and_is_counted() {
    goodput::scrape::install_crypto_provider();
    let engine = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 200ms
scrape: {{interval: 200ms, timeout: 150ms}}
windows: [1m]
targets: [{{name: a, url: 'http://{}/metrics', engine: vllm}}]
",
        engine.addr
    );
    let cfg = goodput::config::from_str(&yaml, "clock.yaml").expect("valid config").config;
    let clock = Arc::new(SteppedClock { back: AtomicI64::new(0) });
    let d = daemon::start(cfg, clock.clone()).await.expect("daemon starts");
    let mut before = (0, 0.0);
    let began = std::time::Instant::now();
    while began.elapsed() < PATIENCE {
        before = ttft(&d.report());
        if before.0 > 0 && before.1 > 0.02 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(before.0 > 0, "no TTFT quantiles before the step: {:?}", d.report().targets);
    assert_eq!(metric(&d, "llm_slo_clock_steps_total", &[("direction", "backward")]).await, Some(0.0));

    // The wall clock goes back an hour and stays there: for every tick after, the quantiles
    // are there and the window keeps what it held.
    clock.back.store(HOUR_MS, Ordering::SeqCst);
    let t_before = d.report().t_ms;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let r = d.report();
        let (n, coverage) = ttft(&r);
        assert!(n >= before.0, "the quantiles blanked after the clock stepped back: {n} < {}", before.0);
        assert!(coverage >= before.1, "the window lost its data: coverage {coverage} < {}", before.1);
        assert!(r.t_ms >= t_before, "the report's time went back: {} < {t_before}", r.t_ms);
    }
    let backward = [("direction", "backward")];
    let steps = until_async(PATIENCE, "the step back counted", async || {
        metric(&d, "llm_slo_clock_steps_total", &backward).await.filter(|n| *n >= 1.0)
    })
    .await;
    assert_eq!(steps, 1.0, "one step back");
    let offset = metric(&d, "llm_slo_clock_offset_seconds", &[]).await.unwrap();
    assert!((3599.0..3601.0).contains(&offset), "offset {offset}");
    let last_eval = metric(&d, "llm_slo_target_last_evaluation_timestamp_seconds", &[("target", "a")]).await.unwrap();
    assert!(last_eval * 1000.0 >= t_before as f64, "timestamps went back");

    // Corrected: the offset is taken back, the daemon's time runs on without a jump.
    clock.back.store(0, Ordering::SeqCst);
    let steps = until_async(PATIENCE, "the correction counted and the offset taken back", async || {
        let steps = metric(&d, "llm_slo_clock_steps_total", &[("direction", "forward")]).await?;
        let offset = metric(&d, "llm_slo_clock_offset_seconds", &[]).await?;
        (steps >= 1.0 && offset == 0.0).then_some(steps)
    })
    .await;
    assert_eq!(steps, 1.0, "one step forward");
    let (n, coverage) = ttft(&d.report());
    assert!(n >= before.0 && coverage >= before.1, "after the correction: {n} quantiles, coverage {coverage}");
    d.shutdown().await;
}
