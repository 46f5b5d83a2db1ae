//! How long each part of the daemon's shutdown may take: the bounds the evaluation loop's
//! last flush keeps within, and the one operators size Kubernetes' grace period by.

use std::time::Duration;

/// The longest [`Daemon::shutdown`](super::Daemon::shutdown) takes. Kubernetes'
/// `terminationGracePeriodSeconds` must be longer (docs/deploy.md).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long queued alert notifications get to reach their destinations on shutdown; within
/// [`SHUTDOWN_GRACE`], leaving the rest of it to the HTTP server.
pub const ALERT_FLUSH: Duration = Duration::from_secs(3);

/// How long the last state snapshot gets on shutdown, beside the alert flush and within
/// [`SHUTDOWN_GRACE`]; past it the snapshot written before is kept (docs/limits.md).
pub const SNAPSHOT_GRACE: Duration = Duration::from_secs(4);
