use clap::Parser;

fn main() {
    let cli = goodput::cli::Cli::parse();
    std::process::exit(goodput::cli::main(cli));
}
