//! `goodput check --config NEW --against URL`: what reloading NEW into the daemon running
//! at URL would change, and what each change would do to its state
//! (docs/discovery.md#what-a-reload-changed).
//!
//! The daemon serves its running config in normal form at `/api/v1/config`, credentials
//! masked, with the command-line overrides it applies to every config it runs. NEW is
//! brought to the same form, with the same overrides, and the two are compared by the
//! code the daemon's own reload log uses (config::changes), so both say the same thing.

use std::time::Duration;

use crate::config::Config;
use crate::config::changes::{Change, between};
use crate::config::normal::{Normal, normalize};

/// How long the daemon gets to answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The running config of the daemon at `base` (`http://HOST:PORT`): its hash, its
/// overrides and its normal form.
pub struct Running {
    pub hash: String,
    pub overrides: Vec<String>,
    pub config: Normal,
}

/// `base` as a URL: `HOST:PORT` (what `listen` says) is taken as `http://HOST:PORT`.
pub fn base_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.contains("://") { base.to_string() } else { format!("http://{base}") }
}

/// Reads `base`/api/v1/config.
pub fn fetch(base: &str) -> Result<Running, Box<dyn std::error::Error + Send + Sync>> {
    let url = format!("{}/api/v1/config", base_url(base));
    let shown = crate::redact::url_str(&url);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (status, body) = rt
        .block_on(async {
            goodput::scrape::install_crypto_provider();
            let client = reqwest::Client::builder().no_proxy().timeout(TIMEOUT).build()?;
            let r = client.get(&url).send().await?;
            let status = r.status();
            Ok::<_, reqwest::Error>((status, r.text().await?))
        })
        .map_err(|e| {
            format!(
                "cannot read the running config from {shown}: {}; is `goodput run` listening there?",
                crate::redact::error_chain(&e)
            )
        })?;
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(format!(
            "{shown} answered 404: that daemon does not show its config (a goodput older than this one?)"
        )
        .into());
    }
    if !status.is_success() {
        return Err(format!("{shown} answered {status}: {}", body.trim()).into());
    }
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("{shown} did not answer with a goodput config: {e}"))?;
    let data = &v["data"];
    let config = Normal::from_json(&data["config"]).map_err(|e| format!("{shown}: {e}"))?;
    let hash = data["hash"].as_str().unwrap_or_default().to_string();
    let overrides =
        data["overrides"].as_array().into_iter().flatten().filter_map(|o| o.as_str().map(String::from)).collect();
    Ok(Running { hash, overrides, config })
}

/// The changes from the running config to `new` with the running daemon's overrides made
/// to it, and the hash `new` would run under.
pub fn changes(running: &Running, mut new: Config) -> (Vec<Change>, String) {
    if running.overrides.iter().any(|o| o == super::run::NO_ALERT_DELIVERY) {
        super::run::no_alert_delivery(&mut new);
    }
    let normal = normalize(&new);
    (between(&running.config, &normal), normal.hash())
}

/// What `goodput check --against` prints.
pub fn report(file: &str, base: &str, running: &Running, changes: &[Change], new_hash: &str) -> String {
    let base = crate::redact::url_str(&base_url(base));
    let mut out = String::new();
    if changes.is_empty() {
        out.push_str(&format!(
            "reloading {file} into the daemon at {base} would change nothing (config hash {})\n",
            running.hash
        ));
    } else {
        out.push_str(&format!(
            "reloading {file} into the daemon at {base} would make {} change(s) (config hash {} → {new_hash}):\n",
            changes.len(),
            running.hash
        ));
        for c in changes {
            out.push_str(&format!("  {c}\n"));
        }
    }
    if !running.overrides.is_empty() {
        out.push_str(&format!("the daemon runs with {}, applied to {file} too\n", running.overrides.join(" ")));
    }
    out.push_str(
        "credentials are not compared (the daemon never shows them); a new listen address may still be refused if it is taken\n",
    );
    out
}
