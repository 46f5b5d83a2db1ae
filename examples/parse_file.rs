//! Parses one exposition file and prints what it found and how fast.
//!
//! `cargo run --release --example parse_file -- FILE [REPEAT]`
//!
//! With REPEAT = 1 (the default) this is the process to put under `/usr/bin/time -v` to
//! measure the parser's peak memory. With REPEAT > 1 it prints the median wall time and
//! the median on-CPU time of one parse (from `/proc/thread-self/schedstat`), which on a
//! shared, overloaded machine shows what the parser does when it has a core.

use std::time::Instant;

fn on_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: parse_file FILE [REPEAT]");
        std::process::exit(2);
    };
    let repeat: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
    let body = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let limits = goodput::parse::Limits::unlimited();
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..repeat {
        let (c0, t0) = (on_cpu_ns(), Instant::now());
        let parsed = goodput::parse::parse(&body, &limits);
        let secs = t0.elapsed().as_secs_f64();
        if let (Some(a), Some(b)) = (c0, on_cpu_ns()) {
            cpu.push((b - a) as f64 / 1e9);
        }
        wall.push(secs);
        match parsed {
            Ok(e) if wall.len() == 1 => println!(
                "{path}: {} bytes, {} families, {} samples, {} labels, {} duplicates",
                body.len(),
                e.families.len(),
                e.samples.len(),
                e.labels.len(),
                e.duplicates.len()
            ),
            Ok(_) => {}
            Err(e) => {
                eprintln!("{path}:{e}");
                std::process::exit(1);
            }
        }
    }
    let mb = body.len() as f64 / 1e6;
    let w = median(&mut wall);
    print!("{repeat} parses: median wall {:.1} ms ({:.0} MB/s)", w * 1e3, mb / w);
    if !cpu.is_empty() {
        let c = median(&mut cpu);
        print!(", median on-CPU {:.1} ms ({:.0} MB/s)", c * 1e3, mb / c);
    }
    println!();
}
