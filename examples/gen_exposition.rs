//! Writes the synthetic vLLM-like benchmark exposition to a file.
//!
//! `cargo run --release --example gen_exposition -- OUT [MEGABYTES] [ENGINES] [SEED]`
//! (defaults: 20 MB, 8 engines, seed 1).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first() else {
        eprintln!("usage: gen_exposition OUT [MEGABYTES] [ENGINES] [SEED]");
        std::process::exit(2);
    };
    let num = |i: usize, d: u64| {
        args.get(i).map_or(Ok(d), |s| s.parse::<u64>()).unwrap_or_else(|e| {
            eprintln!("argument {i}: {e}");
            std::process::exit(2)
        })
    };
    let mb = num(1, 20);
    let engines = num(2, 8) as usize;
    let text = goodput::parse::vllm_like_exposition((mb as usize) << 20, engines, num(3, 1));
    if let Err(e) = std::fs::write(out, &text) {
        eprintln!("cannot write {out}: {e}");
        std::process::exit(1);
    }
    eprintln!("wrote {} bytes to {out}", text.len());
}
