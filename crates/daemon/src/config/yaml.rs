//! YAML → [`RawConfig`]: serde-saphyr errors turned into `file:line:column: message`.

use serde_saphyr::{DeserializeError, MessageFormatter};

use super::error::{ConfigError, ConfigErrors, Pos};
use super::raw::{RawConfig, section_of};

pub(crate) fn read(text: &str, file: &str) -> Result<RawConfig, ConfigErrors> {
    if text.trim().is_empty() {
        return Err(ConfigErrors(vec![ConfigError {
            file: file.to_string(),
            pos: Pos::FILE,
            message: "the config file is empty; it needs at least `targets:` (see config/example.yaml)".into(),
        }]));
    }
    // serde-saphyr's defaults refuse duplicate keys and bound alias expansion.
    serde_saphyr::from_str::<RawConfig>(text).map_err(|e| ConfigErrors(vec![convert(&e, file)]))
}

fn convert(err: &DeserializeError, file: &str) -> ConfigError {
    let pos = err.location().map(Pos::of).filter(|p| p.line > 0).unwrap_or(Pos::FILE);
    let inner = err.without_snippet();
    let message = match inner {
        DeserializeError::SerdeUnknownField { field, expected, .. } => {
            let section = section_of(expected).unwrap_or("this section");
            format!("unknown key {field:?} in {section}; expected one of {}", expected.join(", "))
        }
        DeserializeError::SerdeMissingField { field, .. } => {
            format!("missing required key {field:?}")
        }
        DeserializeError::SerdeInvalidType { unexpected, expected, .. } => {
            format!("wrong type: found {unexpected}, expected {expected}")
        }
        DeserializeError::Unexpected { expected, .. } => {
            let what = match *expected {
                "sequence start" => "a list (e.g. [1m, 5m] or one `- item` per line)",
                "mapping start" => "a mapping of keys to values",
                "string scalar" => "a single value, not a list or mapping",
                other => other,
            };
            format!("wrong type: expected {what}")
        }
        DeserializeError::InvalidScalar { ty, .. } => {
            format!(
                "invalid {ty} value; write a plain number like 0.99 (durations and sizes need a unit, e.g. 5s, 16MiB)"
            )
        }
        other => serde_saphyr::DefaultMessageFormatter.format_message(other).into_owned(),
    };
    ConfigError { file: file.to_string(), pos, message }
}
