//! The daemon's GPU sources: the NVML sampler thread and a dcgm-exporter scrape task,
//! each publishing its latest readings for the evaluator to join.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::config::Config;
use crate::gpu::dcgm::{self, PodSelector};
use crate::gpu::nvml::NvmlSampler;
use crate::gpu::reading::GpuReading;
use crate::scrape::{FetchSpec, Fetcher};

/// The GPU sources with what stops them: a reload that changes `gpu` (or the scrape
/// settings dcgm-exporter is scraped with) starts new ones and stops these.
pub struct Gpus {
    pub sources: GpuSources,
    /// Stops the dcgm-exporter loop; the NVML thread stops when its sampler is dropped.
    stop: watch::Sender<bool>,
    tasks: tokio::task::JoinSet<()>,
}

impl Gpus {
    pub fn start(cfg: &Config) -> Gpus {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        let sources = GpuSources::start(cfg, stopped, &mut tasks);
        Gpus { sources, stop, tasks }
    }

    /// Whether a change from `old` to `new` needs the sources started again.
    pub fn changed(old: &Config, new: &Config) -> bool {
        let scrape = |c: &Config| {
            (c.scrape.timeout, c.scrape.body_limit, c.scrape.gzip, c.scrape.follow_redirects, c.scrape.interval)
        };
        old.gpu != new.gpu || (new.gpu.as_ref().is_some_and(|g| g.dcgm.is_some()) && scrape(old) != scrape(new))
    }
}

impl Drop for Gpus {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.tasks.abort_all();
    }
}

/// Latest readings from every configured GPU source.
pub struct GpuSources {
    nvml: Option<NvmlSampler>,
    dcgm: Arc<ArcSwap<Vec<GpuReading>>>,
}

impl GpuSources {
    /// Starts NVML (on its own thread; without a driver it logs once and stays empty)
    /// and, when `gpu.dcgm` is set, a dcgm-exporter scrape loop. Without a `gpu:`
    /// section nothing starts.
    pub fn start(cfg: &Config, stop: watch::Receiver<bool>, tasks: &mut tokio::task::JoinSet<()>) -> GpuSources {
        let dcgm = Arc::new(ArcSwap::from_pointee(Vec::new()));
        let Some(gpu) = &cfg.gpu else { return GpuSources { nvml: None, dcgm } };
        let visible = std::env::var("NVIDIA_VISIBLE_DEVICES").ok();
        let nvml = gpu.nvml.enabled.then(|| NvmlSampler::spawn(&gpu.nvml, visible.as_deref()));
        if let Some(d) = &gpu.dcgm {
            let selector = PodSelector::resolve(d, |k| std::env::var(k).ok());
            match url::Url::parse(&d.url).map_err(|e| e.to_string()).and_then(|url| {
                Fetcher::new(FetchSpec {
                    url,
                    headers: Vec::new(),
                    bearer_token_file: None,
                    timeout: cfg.scrape.timeout,
                    body_limit: cfg.scrape.body_limit,
                    gzip: cfg.scrape.gzip,
                    follow_redirects: cfg.scrape.follow_redirects,
                })
                .map_err(|e| e.to_string())
            }) {
                Ok(fetcher) => {
                    tasks.spawn(dcgm_loop(fetcher, selector, cfg.scrape.interval, dcgm.clone(), stop));
                }
                Err(e) => tracing::error!("dcgm-exporter at {} cannot be scraped: {e}", crate::redact::url_str(&d.url)),
            }
        }
        GpuSources { nvml, dcgm }
    }

    /// NVML readings, then dcgm-exporter readings of GPUs NVML did not report.
    pub fn latest(&self) -> Vec<GpuReading> {
        let mut out: Vec<GpuReading> = self.nvml.as_ref().map(|n| n.latest().as_ref().clone()).unwrap_or_default();
        for r in self.dcgm.load().iter() {
            if !out.iter().any(|o| o.uuid == r.uuid) {
                out.push(r.clone());
            }
        }
        out
    }
}

async fn dcgm_loop(
    fetcher: Fetcher,
    selector: PodSelector,
    every: std::time::Duration,
    latest: Arc<ArcSwap<Vec<GpuReading>>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let limits = crate::parse::Limits::default();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => return,
        }
        match fetcher.fetch().await {
            Ok(body) => match dcgm::read(&body, &limits, &selector) {
                Ok(readings) => latest.store(Arc::new(readings)),
                Err(e) => tracing::warn!("dcgm-exporter scrape does not parse: {e}"),
            },
            Err(e) => tracing::warn!("dcgm-exporter scrape failed: {e}"),
        }
    }
}
