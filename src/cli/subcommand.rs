//! What every subcommand shares: the result it returns ([`CliResult`]) and, for those that
//! need a valid config, loading it with every problem printed ([`load_config`]).

/// Errors a subcommand reports to the user before exiting 1.
pub type CliResult = Result<i32, Box<dyn std::error::Error + Send + Sync>>;

/// Loads a config for a subcommand that needs a valid one: prints every error (and a
/// pointer to `goodput check`) or the warnings to stderr. `None` means exit 1.
pub(crate) fn load_config(path: &std::path::Path) -> Option<crate::config::Config> {
    match crate::config::load(path) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            Some(loaded.config)
        }
        Err(errs) => {
            for e in &errs.0 {
                eprintln!("error: {e}");
            }
            eprintln!("{}: {} error(s); `goodput check --config FILE` shows them too", path.display(), errs.0.len());
            None
        }
    }
}
