//! A reloaded config applied to what follows evaluation (docs/discovery.md#reload): the
//! evaluation settings, the alert states, the error budgets, the request store, alert
//! delivery, the GPU sources, `external_labels`, the state snapshot and the interval.
//!
//! Two steps, so that a reload is all or nothing: [`prepare`] does what can fail (a
//! `state_dir` that cannot be used, a delivery client that cannot be built) and changes
//! nothing; [`Post::reconfigure`] then cannot fail, and runs between two ticks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use super::gpu::Gpus;
use super::tick::Post;
use crate::config::Config;
use crate::deliver::{Delivery, DeliveryError};
use crate::serve::page::PageFacts;
use crate::state;

/// Why a reload was refused, the running config staying whole. Its text ends the log line
/// `config reload refused: …`.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// A new listen address cannot be bound (the message names the config key).
    #[error(transparent)]
    Listen(#[from] std::io::Error),
    /// A new `state_dir` cannot be made or written.
    #[error("state_dir: cannot use {}: {err}", dir.display())]
    StateDir { dir: PathBuf, err: std::io::Error },
    /// New alert delivery workers cannot start.
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

/// What [`prepare`] made ready for a reload.
pub struct Prepared {
    /// New delivery workers, when the destinations or their settings changed.
    pub delivery: Option<Delivery>,
    /// The HTTP server's address under the new config: the default runbook links point there.
    pub addr: SocketAddr,
}

/// Whether alert delivery must start again for `new`: its destinations (credentials
/// included), resend interval, timeout or queue size changed.
fn delivery_changed(old: &Config, new: &Config) -> bool {
    let d = |c: &Config| {
        let a = &c.alerting;
        (a.alertmanager_urls(), a.webhook.clone(), a.resend_interval, a.timeout, a.queue_capacity)
    };
    d(old) != d(new)
}

/// Everything a reload to `new` needs that can fail, done without changing the running
/// daemon: a new `state_dir` is made and checked as at start, new delivery workers are
/// built. `addr` is where the HTTP server will listen.
pub fn prepare(old: &Config, new: &Config, addr: SocketAddr) -> Result<Prepared, ReloadError> {
    if let Some(s) = &new.state
        && old.state.as_ref().is_none_or(|o| o.dir != s.dir)
    {
        std::fs::create_dir_all(&s.dir)
            .and_then(|()| state::file::prepare(&s.dir))
            .map_err(|err| ReloadError::StateDir { dir: s.dir.clone(), err })?;
    }
    let delivery = if delivery_changed(old, new) { Some(Delivery::start(&new.alerting)?) } else { None };
    Ok(Prepared { delivery, addr })
}

impl Post {
    /// Makes `new` the config of everything after evaluation; `old` is the one in force.
    /// Returns what it did to state that the changes themselves do not say (how many
    /// alerts ended, which budgets restarted, how many request series were judged again),
    /// for the reload's log line.
    pub async fn reconfigure(&mut self, old: &Config, new: &Config, prepared: Prepared) -> Vec<String> {
        let mut notes = Vec::new();
        let now_ms = self.clock.now_ms();
        let eval = new.eval_config();
        self.eval.store(Arc::new(eval.clone()));

        let alerting = crate::serve::runbooks::with_default_page(&new.alerting, prepared.addr);
        let alerts = self.enricher.reconfigure(&eval, &alerting, new.gpu.as_ref(), new.cost.as_ref(), now_ms);
        if alerts.resolved.len() + alerts.dropped > 0 {
            notes.push(format!(
                "alerts of changed rules and SLOs: {} firing resolved, {} pending dropped, {} kept",
                alerts.resolved.len(),
                alerts.dropped,
                alerts.kept
            ));
        }
        let moved: Vec<String> = self
            .budgets
            .reconfigure(new)
            .into_iter()
            .filter(|(_, fate)| *fate != crate::budget::reload::Ledgers::Kept)
            .map(|(slo, fate)| format!("{slo} {}", fate.as_str()))
            .collect();
        if !moved.is_empty() {
            notes.push(format!("error budgets: {}", moved.join(", ")));
        }
        let rebuilt = self.requests.reconfigure(new, now_ms).await;
        if rebuilt.rebuilt > 0 {
            notes.push(format!("request series judged again from their records: {}", rebuilt.rebuilt));
        }

        // What destinations were sent ends under the labels they were sent with.
        let relabel = old.external_labels != new.external_labels;
        let mut ended = alerts.resolved;
        if relabel {
            ended.extend(self.enricher.alerts().firing_resolved_at(now_ms));
        }
        for n in &mut ended {
            for (k, v) in &self.external_labels {
                n.labels.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        self.delivery.submit(&ended);
        let redeliver = prepared.delivery.is_some();
        if let Some(d) = prepared.delivery {
            self.shared.delivery.store(Arc::new(Some(d.metrics())));
            let retired = std::mem::replace(&mut self.delivery, d);
            tokio::spawn(async move {
                super::tick::last_flush(&retired).await;
            });
        }
        if relabel || redeliver {
            self.enricher.alerts_mut().resend_firing();
        }
        if relabel {
            self.external_labels = new.external_labels.clone();
            self.shared.set_external_labels(&new.external_labels);
        }

        if Gpus::changed(old, new) {
            self.gpus = Gpus::start(new);
        }
        self.reconfigure_state(new);
        self.shared.page.set_facts(PageFacts::from_config(new));
        if self.every != new.evaluation_interval {
            self.every = new.evaluation_interval;
        }
        notes
    }

    /// `state_dir` and its settings: a keeper starts, follows the new keys, or stops.
    fn reconfigure_state(&mut self, new: &Config) {
        match (&mut self.state, &new.state) {
            (Some(k), Some(cfg)) => k.reconfigure(cfg.clone(), new),
            (None, Some(cfg)) => {
                let stats = Arc::new(state::metrics::StateStats::default());
                let sources = state::Sources {
                    targets: Vec::new(),
                    book: self.budgets.book(),
                    store: self.requests.store(),
                    capacity: self.enricher.capacity(),
                };
                let roster = self.roster.clone();
                let keeper = state::Keeper::new(cfg.clone(), new, sources, stats.clone())
                    .following(Arc::new(move || roster.runtimes()));
                self.shared.state.store(Arc::new(Some(stats)));
                self.state = Some(keeper);
            }
            (Some(_), None) => {
                self.state = None;
                self.shared.state.store(Arc::new(None));
            }
            (None, None) => {}
        }
    }
}
