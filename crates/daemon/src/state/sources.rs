//! What a snapshot reads ([`Sources`]), and the identity a target is saved under
//! ([`identity`]), which restore compares against the config's.

use std::sync::{Arc, Mutex};

use crate::budget::BudgetBook;
use crate::capacity::CapacityBook;
use crate::config::Target;
use crate::daemon::target::TargetRuntime;
use crate::request::RequestStore;

/// Identifies what a target scrapes, without writing its URL (which may carry
/// credentials) to disk.
pub fn identity(t: &Target) -> u32 {
    crc32fast::hash(format!("{}\n{:?}", t.url.as_str(), t.engine).as_bytes())
}

/// What a snapshot reads.
#[derive(Clone)]
pub struct Sources {
    pub targets: Vec<Arc<TargetRuntime>>,
    pub book: Arc<Mutex<BudgetBook>>,
    pub store: Arc<Mutex<RequestStore>>,
    pub capacity: Arc<Mutex<CapacityBook>>,
}
