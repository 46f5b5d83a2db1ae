//! Reading a config file or text: [`yaml`](super::yaml) parses it, [`validate`](super::validate)
//! checks it and builds the [`Config`](super::Config).

use std::path::Path;

use super::error::{ConfigError, ConfigErrors, Pos};
use super::types::Loaded;
use super::{validate, yaml};

/// Largest config file read. A config is a few kilobytes; the limit keeps
/// `--config /dev/zero` or a wrong path to a large file from filling memory.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads and validates a config file; `${VAR}`s in `external_labels` come from the
/// process environment.
pub fn load(path: &Path) -> Result<Loaded, ConfigErrors> {
    load_with_env(path, &|name| std::env::var(name).ok())
}

/// [`load`] with the environment `external_labels` expand from. `goodput rules` keeps
/// each `${VAR}` as written: the rules do not read the labels, and a pod's config must
/// generate rules outside the pod.
pub fn load_with_env(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, ConfigErrors> {
    let name = path.display().to_string();
    let fail = |message: String| ConfigErrors(vec![ConfigError { file: name.clone(), pos: Pos::FILE, message }]);
    let mut text = String::new();
    let file = std::fs::File::open(path).map_err(|e| fail(format!("cannot read the config file: {e}")))?;
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_FILE_BYTES + 1), &mut text)
        .map_err(|e| fail(format!("cannot read the config file: {e}")))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(fail(format!(
            "the config file is larger than {} MiB, the most goodput reads; a config is a few kilobytes",
            MAX_FILE_BYTES >> 20
        )));
    }
    from_str_with_env(&text, &name, env)
}

/// Validates config text; `file` names it in error messages.
pub fn from_str(text: &str, file: &str) -> Result<Loaded, ConfigErrors> {
    from_str_with_env(text, file, &|name| std::env::var(name).ok())
}

/// [`from_str`] with the environment `external_labels` expand from.
pub fn from_str_with_env(text: &str, file: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, ConfigErrors> {
    let read = yaml::read(text, file)?;
    validate::validate(read, file, env)
}
