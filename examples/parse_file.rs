//! Parses one exposition file once and prints what it found: the process to put under
//! `/usr/bin/time -v` to measure the parser's peak memory on a given body.
//!
//! `cargo run --release --example parse_file -- FILE`

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: parse_file FILE");
        std::process::exit(2);
    };
    let body = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let start = std::time::Instant::now();
    match goodput::parse::parse(&body, &goodput::parse::Limits::unlimited()) {
        Ok(e) => {
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{path}: {} bytes, {} families, {} samples, {} labels, {} duplicates, {:.1} ms ({:.0} MB/s)",
                body.len(),
                e.families.len(),
                e.samples.len(),
                e.labels.len(),
                e.duplicates.len(),
                secs * 1e3,
                body.len() as f64 / secs / 1e6
            );
        }
        Err(e) => {
            eprintln!("{path}:{e}");
            std::process::exit(1);
        }
    }
}
