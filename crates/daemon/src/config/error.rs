//! Config errors and warnings that point at `file:line:column` and say what is expected.

use std::fmt;

/// A position in the config file, 1-based. `line == 0` means "the file as a whole".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl Pos {
    pub const FILE: Pos = Pos { line: 0, column: 0 };

    pub fn new(line: u32, column: u32) -> Pos {
        Pos { line, column }
    }

    pub(crate) fn of(loc: serde_saphyr::Location) -> Pos {
        Pos { line: loc.line() as u32, column: loc.column() as u32 }
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

/// Collects errors and warnings while a raw config is checked, so that `goodput check`
/// reports every problem at once instead of one per run.
#[derive(Debug)]
pub(crate) struct Diagnostics {
    pub file: String,
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<ConfigError>,
}

impl Diagnostics {
    pub fn new(file: &str) -> Self {
        Diagnostics { file: file.to_string(), errors: Vec::new(), warnings: Vec::new() }
    }

    pub fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.errors.push(ConfigError { file: self.file.clone(), pos, message: message.into() });
    }

    pub fn warn(&mut self, pos: Pos, message: impl Into<String>) {
        self.warnings.push(ConfigError { file: self.file.clone(), pos, message: message.into() });
    }
}
