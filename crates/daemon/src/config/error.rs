//! Config errors and warnings that point at `file:line:column` and say what is expected.

use std::collections::HashSet;
use std::fmt;

/// A position in the config file, 1-based. `line == 0` means "the file as a whole".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl Pos {
    pub const FILE: Pos = Pos { line: 0, column: 0 };

    pub fn new(line: u32, column: u32) -> Pos {
        Pos { line, column }
    }

    /// Order of the report: by position, with file-wide problems last.
    fn order(self) -> (bool, u32, u32) {
        (self.line == 0, self.line, self.column)
    }
}

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file name as the user gave it.
    pub file: String,
    pub pos: Pos,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pos.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.file, self.pos.line, self.pos.column, self.message)
        }
    }
}

/// Every problem found in one config file (never empty when returned as an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Most errors reported for one file; past this many, the rest would bury the first.
pub const MAX_ERRORS: usize = 100;

/// Collects errors and warnings while a raw config is checked, so that `goodput check`
/// reports every problem at once instead of one per run.
#[derive(Debug)]
pub(crate) struct Diagnostics {
    pub file: String,
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<ConfigError>,
    /// `(mapping, key)` of values already rejected while reading the YAML.
    pub rejected: HashSet<(Pos, String)>,
}

impl Diagnostics {
    pub fn new(file: &str, errors: Vec<ConfigError>, rejected: HashSet<(Pos, String)>) -> Self {
        Diagnostics { file: file.to_string(), errors, warnings: Vec::new(), rejected }
    }

    /// Whether `key` of the mapping at `map` was written but rejected (and reported) already,
    /// so that it must not be reported again as missing.
    pub fn rejected(&self, map: Pos, key: &str) -> bool {
        self.rejected.contains(&(map, key.to_string()))
    }

    /// Errors and warnings, each sorted by position; at most [`MAX_ERRORS`] errors.
    pub fn finish(mut self) -> (Vec<ConfigError>, Vec<ConfigError>) {
        self.errors.sort_by_key(|e| e.pos.order());
        self.warnings.sort_by_key(|e| e.pos.order());
        if self.errors.len() > MAX_ERRORS {
            let more = self.errors.len() - MAX_ERRORS;
            self.errors.truncate(MAX_ERRORS);
            self.error(Pos::FILE, format!("{more} more errors not shown; fix these and check again"));
        }
        (self.errors, self.warnings)
    }

    pub fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.errors.push(ConfigError { file: self.file.clone(), pos, message: message.into() });
    }

    pub fn warn(&mut self, pos: Pos, message: impl Into<String>) {
        self.warnings.push(ConfigError { file: self.file.clone(), pos, message: message.into() });
    }
}
