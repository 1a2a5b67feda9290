//! The generated masterchain zerostate: the base zerostate's config and accounts, with the generated validator
//! set (param 34) and the generated shards of workchain 0, each at the empty shard zerostate that `init`
//! computes ([`McZerostate::empty_shard_zerostate`]).

use regolith_formats::zerostate::{McZerostate, ShardZerostate};
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellBuilder, Lazy};
use tycho_types::models::{
    CurrencyCollection, ShardAccounts, ShardDescription, ShardHashes, ShardIdent,
    ShardStateUnsplit, ValidatorSet,
};

use crate::error::{build_err, ChainError};

/// The generated genesis: the mc zerostate (parsed, BOC) and the shard zerostates it lists.
pub struct Genesis {
    /// The mc zerostate.
    pub mc: McZerostate,
    /// Its BOC.
    pub boc: Vec<u8>,
    /// The shard zerostates, in shard order.
    pub shards: Vec<ShardZerostate>,
}

/// The shards of workchain 0 when it is split into `count` (1, 2, 4 or 8) shards, in shard order.
pub fn split_workchain(count: u8) -> Result<Vec<ShardIdent>, ChainError> {
    let depth = match count {
        1 => 0,
        2 => 1,
        4 => 2,
        8 => 3,
        other => {
            return Err(ChainError::InvalidOption(format!(
                "--shards must be 1, 2, 4 or 8, not {other}"
            )))
        }
    };
    let mut shards = vec![ShardIdent::BASECHAIN];
    for _ in 0..depth {
        shards = shards
            .iter()
            .flat_map(|s| {
                let (l, r) = s.split().expect("a shard of depth < 3 splits");
                [l, r]
            })
            .collect();
    }
    shards.sort_by_key(ShardIdent::prefix);
    Ok(shards)
}

/// Builds the mc zerostate from `base` (a zerostate BOC), with `vset` as param 34 (params 32, 36 removed),
/// `validator_list_hash_short` as the zerostate's subset hash, `shards` listed at their empty zerostates, and
/// `accounts` (the base's accounts and the generated ones, which add `added` nanotokens to the supply).
pub fn build(
    base: &[u8],
    vset: &ValidatorSet,
    validator_list_hash_short: u32,
    shards: &[ShardIdent],
    accounts: &ShardAccounts,
    added: u128,
) -> Result<Genesis, ChainError> {
    let base = McZerostate::parse(base).map_err(|e| ChainError::Zerostate(e.to_string()))?;
    let mut extra = base.extra.clone();
    let template = base
        .extra
        .shards
        .iter()
        .next()
        .transpose()
        .map_err(|e| ChainError::Zerostate(format!("shard hashes: {e}")))?
        .map(|(_, descr)| descr)
        .ok_or_else(|| ChainError::Zerostate("it lists no shard".into()))?;

    let vset_cell = CellBuilder::build_from(vset).map_err(build_err("validator set"))?;
    extra
        .config
        .set_raw(34, vset_cell)
        .map_err(build_err("config param 34"))?;
    for param in [32, 33, 35, 36, 37] {
        extra
            .config
            .remove(param)
            .map_err(build_err("config params"))?;
    }
    extra.validator_info.validator_list_hash_short = validator_list_hash_short;
    extra.validator_info.catchain_seqno = 0;

    let mut descrs = Vec::with_capacity(shards.len());
    for shard in shards {
        let root = empty_shard_state(&base, *shard)?;
        let boc = Boc::encode(&root);
        descrs.push((
            *shard,
            ShardDescription {
                root_hash: *root.repr_hash(),
                file_hash: regolith_formats::file_hash(&boc),
                gen_utime: base.state.gen_utime,
                ..template.clone()
            },
        ));
    }
    extra.shards = ShardHashes::from_shards(descrs.iter().map(|(s, d)| (s, d)))
        .map_err(build_err("shard hashes"))?;

    extra.global_balance = extra
        .global_balance
        .checked_add(&CurrencyCollection::new(added))
        .map_err(build_err("the global balance"))?;
    let state = ShardStateUnsplit {
        accounts: Lazy::new(accounts).map_err(build_err("the mc accounts"))?,
        total_balance: accounts.root_extra().balance.clone(),
        custom: Some(Lazy::new(&extra).map_err(build_err("McStateExtra"))?),
        ..base.state.clone()
    };
    let root = CellBuilder::build_from(&state).map_err(build_err("the mc zerostate"))?;
    let boc = Boc::encode(&root);
    let mc = McZerostate::parse(&boc).map_err(|e| ChainError::Zerostate(e.to_string()))?;
    let listed = mc
        .listed_shards()
        .map_err(|e| ChainError::Zerostate(e.to_string()))?;
    let shards = listed
        .iter()
        .map(|l| {
            mc.empty_shard_zerostate(l)
                .map_err(|e| ChainError::Zerostate(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Genesis { mc, boc, shards })
}

/// The empty zerostate of `shard` as `init` computes it.
fn empty_shard_state(base: &McZerostate, shard: ShardIdent) -> Result<Cell, ChainError> {
    let state = ShardStateUnsplit {
        global_id: base.state.global_id,
        shard_ident: shard,
        gen_utime: base.state.gen_utime,
        min_ref_mc_seqno: u32::MAX,
        ..Default::default()
    };
    CellBuilder::build_from(&state).map_err(build_err(format!("the zerostate of {shard}")))
}
