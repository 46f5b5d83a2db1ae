//! The `listen` address a config file writes, read from a file that may not validate: where
//! a daemon waiting for a valid config serves (crate::daemon::standby), so that it answers
//! where the daemon will.

use std::net::SocketAddr;
use std::path::Path;

use super::tree::{self, Kind, Step};

/// The file's top-level `listen`, when the file reads as YAML and it is a valid address.
pub fn written_listen(path: &Path) -> Option<SocketAddr> {
    let text = std::fs::read(path).ok().filter(|t| t.len() as u64 <= super::loader::MAX_FILE_BYTES)?;
    listen_in(std::str::from_utf8(&text).ok()?)
}

fn listen_in(text: &str) -> Option<SocketAddr> {
    let root = tree::parse(text).ok()?;
    match &root.at(&[Step::Key("listen".into())])?.kind {
        Kind::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::listen_in;

    #[test]
    fn the_listen_of_a_file_that_does_not_validate() {
        let addr = Some("0.0.0.0:9464".parse().unwrap());
        assert_eq!(listen_in("listen: 0.0.0.0:9464\ntargets: 3\nbogus: [1, 2]\n"), addr);
        assert_eq!(listen_in("bogus: 1\nlisten: ' 0.0.0.0:9464 '\n"), addr);
        assert_eq!(listen_in("targets: []\n"), None, "none written");
        assert_eq!(listen_in("listen: localhost:9464\n"), None, "not IP:PORT");
        assert_eq!(listen_in("listen: [0.0.0.0:9464]\n"), None, "not a scalar");
        assert_eq!(listen_in("listen: 0.0.0.0:9464\n  bad: indentation\n"), None, "not YAML");
        assert_eq!(listen_in("- listen: 0.0.0.0:9464\n"), None, "not a mapping");
    }
}
