//! `regolith chain generate`: writes a generated chain (regolith-chain) into a directory and prints its
//! summary line.

use std::path::PathBuf;

use anyhow::{Context, Result};
use regolith_chain::{ChainOptions, ChainShape, ChainSummary};

/// The base zerostate whose config a generated chain uses (relative to the working directory).
pub const DEFAULT_BASE_ZEROSTATE: &str = "../shared/fixtures/zerostate.boc";

/// `regolith chain ...`.
#[derive(Debug, clap::Args)]
pub struct ChainArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ChainCommand,
}

/// The `chain` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ChainCommand {
    /// Generate a chain of real, signed blocks: zerostate, archives, chain.json, validators.json.
    Generate(GenerateArgs),
}

/// `regolith chain generate`.
#[derive(Debug, Clone, clap::Args)]
pub struct GenerateArgs {
    /// The output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// The zerostate whose config (and mc accounts) the chain uses.
    #[arg(long, default_value = DEFAULT_BASE_ZEROSTATE)]
    pub base_zerostate: PathBuf,
    /// Masterchain blocks.
    #[arg(long, default_value_t = 1000)]
    pub mc_blocks: u32,
    /// The shape of the chain.
    #[command(flatten)]
    pub shape: ChainShapeArgs,
    /// Mc blocks per archive at most.
    #[arg(long, default_value_t = 100)]
    pub mc_blocks_per_archive: u32,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The generator options that shape a chain (`chain generate`, and `devnet --live`).
#[derive(Debug, Clone, clap::Args)]
pub struct ChainShapeArgs {
    /// Shards of workchain 0 (1, 2, 4 or 8).
    #[arg(long, default_value_t = 2)]
    pub shards: u8,
    /// Internal messages per shard block.
    #[arg(long, default_value_t = 20)]
    pub messages: u32,
    /// Body bytes per message.
    #[arg(long, default_value_t = 256)]
    pub message_bytes: u32,
    /// Every K-th mc block is a key block.
    #[arg(long, default_value_t = 100)]
    pub key_block_every: u32,
    /// Validators per set.
    #[arg(long, default_value_t = 7)]
    pub validators: u16,
    /// Every R-th key block installs a new validator set.
    #[arg(long, default_value_t = 3)]
    pub rotate_every: u32,
    /// Every P-th key block starts a new persistent-state window.
    #[arg(long, default_value_t = 2)]
    pub persistent_every: u32,
    /// Accounts per chain (masterchain and each shard).
    #[arg(long, default_value_t = 16)]
    pub accounts: u32,
    /// The seed of every key, account and message.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl ChainShapeArgs {
    /// The shape the options give.
    pub fn shape(&self) -> ChainShape {
        ChainShape {
            seed: self.seed,
            shards: self.shards,
            messages: self.messages,
            message_bytes: self.message_bytes,
            key_block_every: self.key_block_every,
            validators: self.validators,
            rotate_every: self.rotate_every,
            persistent_every: self.persistent_every,
            accounts: self.accounts,
        }
    }

    /// The generator's options for `mc_blocks` mc blocks in archives of `mc_blocks_per_archive`.
    pub fn options(&self, mc_blocks: u32, mc_blocks_per_archive: u32) -> ChainOptions {
        self.shape().options(mc_blocks, mc_blocks_per_archive)
    }
}

impl GenerateArgs {
    /// The generator's options.
    pub fn options(&self) -> ChainOptions {
        self.shape
            .options(self.mc_blocks, self.mc_blocks_per_archive)
    }
}

/// Generates the chain and returns its summary.
pub fn generate(args: &GenerateArgs) -> Result<ChainSummary> {
    let base = std::fs::read(&args.base_zerostate)
        .with_context(|| format!("cannot read {}", args.base_zerostate.display()))?;
    let summary = regolith_chain::generate(&args.options(), &base, &args.out)
        .with_context(|| format!("generating a chain into {}", args.out.display()))?;
    Ok(summary)
}

/// Runs `regolith chain ...`.
pub fn run(args: ChainArgs) -> Result<()> {
    match args.command {
        ChainCommand::Generate(args) => {
            let summary = generate(&args)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                let secs = (summary.elapsed_ms as f64 / 1000.0).max(1e-3);
                println!(
                    "generated {} mc blocks ({} blocks, {} key blocks, {} validator sets, {} state files) into {} archives in {:.2} s: {:.0} mc blocks/s, {:.1} MiB/s",
                    summary.mc_blocks,
                    summary.blocks,
                    summary.key_blocks,
                    summary.validator_sets,
                    summary.persistent_states,
                    summary.archives,
                    secs,
                    f64::from(summary.mc_blocks) / secs,
                    summary.bytes as f64 / 1048576.0 / secs
                );
            }
            Ok(())
        }
    }
}
