//! The generator alone, for its speed figure without the node binary:
//! `cargo run --release -p regolith-chain --example generate -- OUT_DIR [MC_BLOCKS] [SHARDS] [MESSAGES]`.

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .expect("usage: generate OUT_DIR [MC_BLOCKS] [SHARDS] [MESSAGES]");
    let mut options = regolith_chain::ChainOptions::default();
    if let Some(n) = args.next() {
        options.mc_blocks = n.parse().expect("MC_BLOCKS");
    }
    if let Some(n) = args.next() {
        options.shape.shards = n.parse().expect("SHARDS");
    }
    if let Some(n) = args.next() {
        options.shape.messages = n.parse().expect("MESSAGES");
    }
    let base = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/zerostate.boc"
    ))
    .expect("the fixture zerostate");
    let summary = regolith_chain::generate(&options, &base, std::path::Path::new(&out))
        .unwrap_or_else(|e| panic!("{e}"));
    let secs = (summary.elapsed_ms as f64 / 1000.0).max(1e-3);
    println!(
        "generated {} mc blocks ({} blocks, {} key blocks, {} validator sets, {} state files) into {} archives in {secs:.2} s: {:.0} mc blocks/s, {:.1} MiB/s",
        summary.mc_blocks,
        summary.blocks,
        summary.key_blocks,
        summary.validator_sets,
        summary.persistent_states,
        summary.archives,
        f64::from(summary.mc_blocks) / secs,
        summary.bytes as f64 / 1048576.0 / secs
    );
}
