//! `dns`: targets from DNS names, resolved every `refresh`.

use super::Publisher;
use crate::config::DnsSd;

/// Keeps the names' targets published until the source is dropped.
pub async fn run(cfg: DnsSd, _publish: Publisher) {
    tracing::error!(names = ?cfg.names, "dns discovery is not in this build of goodput; it finds no targets");
}
