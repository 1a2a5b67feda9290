//! `regolith import` verifies every block proof before storing the block: copies of archive_1 with one
//! mc proof corrupted are refused at exactly that block, with the reason, and nothing of it is stored.

mod common;

use regolith_test_support::archive_1_arg;
use std::path::{Path, PathBuf};

use common::*;
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader, ArchiveWriter};
use regolith_formats::BlockId;
use serde_json::Value;
use tycho_types::boc::Boc;
use tycho_types::cell::CellBuilder;
use tycho_types::dict::Dict;
use tycho_types::models::{BlockProof, BlockSignature};

/// Every entry of archive_1 in order.
fn entries() -> Vec<(BlockId, ArchiveEntryType, Vec<u8>)> {
    ArchiveReader::new_compressed(std::fs::File::open(archive_1_arg()).unwrap())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.block_id, e.ty, e.data)
        })
        .collect()
}

fn mc_id(seqno: u32) -> BlockId {
    entries()
        .into_iter()
        .find(|(id, ty, _)| {
            *ty == ArchiveEntryType::Block && id.is_masterchain() && id.seqno == seqno
        })
        .unwrap()
        .0
}

/// A zstd copy of archive_1 in `dir` whose proof of mc block `seqno` is replaced by `f(proof entries)`.
fn archive_with_proof(
    dir: &Path,
    seqno: u32,
    f: impl FnOnce(&[u8], &[(BlockId, Vec<u8>)]) -> Vec<u8>,
) -> PathBuf {
    let all = entries();
    let proofs: Vec<(BlockId, Vec<u8>)> = all
        .iter()
        .filter(|(_, ty, _)| *ty == ArchiveEntryType::Proof)
        .map(|(id, _, data)| (*id, data.clone()))
        .collect();
    let path = dir.join(format!("archive_mc{seqno}.bin"));
    let encoder = zstd::stream::Encoder::new(std::fs::File::create(&path).unwrap(), 3).unwrap();
    let mut writer = ArchiveWriter::new(encoder).unwrap();
    let mut f = Some(f);
    for (id, ty, data) in &all {
        let data = if *ty == ArchiveEntryType::Proof && id.is_masterchain() && id.seqno == seqno {
            (f.take().unwrap())(data, &proofs)
        } else {
            data.clone()
        };
        writer.write_entry(id, *ty, &data).unwrap();
    }
    writer.finish().finish().unwrap();
    path
}

/// The proof BOC with its signatures changed by `f`.
fn with_signatures(
    raw: &[u8],
    f: impl FnOnce(&mut tycho_types::models::BlockSignatures),
) -> Vec<u8> {
    let mut proof = Boc::decode(raw).unwrap().parse::<BlockProof>().unwrap();
    f(proof.signatures.as_mut().unwrap());
    Boc::encode(CellBuilder::build_from(&proof).unwrap())
}

fn keep_signatures(s: &mut tycho_types::models::BlockSignatures, n: usize) {
    let mut dict = Dict::<u16, BlockSignature>::new();
    for entry in s.signatures.iter().take(n) {
        let (k, v) = entry.unwrap();
        dict.set(k, v).unwrap();
    }
    s.signatures = dict;
}

/// Imports `archive` into a fresh data dir; it must fail at mc block `seqno` with `reason`, storing nothing
/// of that block (nor the shard blocks it references) and leaving mc block `seqno - 1` the last applied.
fn refused_at(dir: &Path, archive: &Path, seqno: u32, reason: &str) -> PathBuf {
    let data = dir.join(format!(
        "data-{}",
        archive.file_stem().unwrap().to_str().unwrap()
    ));
    let _ = std::fs::remove_dir_all(&data);
    init(&data);
    let err = fails(&data, &["import", "--quiet", archive.to_str().unwrap()]);
    let id = mc_id(seqno);
    assert!(
        err.contains(&format!("block {id}")),
        "the error names block {id}: {err}"
    );
    assert!(err.contains(reason), "the error says {reason:?}: {err}");
    let summary = summary(&data);
    assert_clean(&summary);
    let last = summary["last_applied_mc_block"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(last, mc_id(seqno - 1).to_string(), "{summary}");
    let out = regolith(&data, &["inspect", "--json", "block", &seqno.to_string()]);
    assert!(!out.status.success(), "mc block {seqno} must not be stored");
    let out = regolith(&data, &["inspect", "--json", "block", &id.to_string()]);
    assert!(!out.status.success(), "mc block {id} must not be stored");
    data
}

/// Ids of the shard blocks of archive_1 by seqno (1..=7).
fn shard_id(seqno: u32) -> BlockId {
    entries()
        .into_iter()
        .find(|(id, ty, _)| {
            *ty == ArchiveEntryType::Block && !id.is_masterchain() && id.seqno == seqno
        })
        .unwrap()
        .0
}

fn stored(data: &Path, id: &BlockId) -> bool {
    regolith(data, &["inspect", "--json", "block", &id.to_string()])
        .status
        .success()
}

#[test]
fn flipped_signature_byte_is_refused_at_that_block() {
    let tmp = tempfile::tempdir().unwrap();
    // mc 16 references shard block 2: neither is stored; shard block 1 (referenced by an earlier mc block) is.
    let archive = archive_with_proof(tmp.path(), 16, |raw, _| {
        with_signatures(raw, |s| {
            let mut dict = Dict::<u16, BlockSignature>::new();
            for (i, entry) in s.signatures.iter().enumerate() {
                let (k, mut v) = entry.unwrap();
                if i == 0 {
                    v.signature.0[40] ^= 0x80;
                }
                dict.set(k, v).unwrap();
            }
            s.signatures = dict;
        })
    });
    let data = refused_at(tmp.path(), &archive, 16, "bad signature of validator");
    assert!(
        !stored(&data, &shard_id(2)),
        "shard block 2 is trusted only through mc 16"
    );
    assert!(stored(&data, &shard_id(1)));
    assert_eq!(
        summary(&data)["blocks_total"],
        18,
        "mc and shard zerostates, mc 1..15, shard block 1"
    );

    // What was stored before stays valid: the good archive completes the chain.
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    let summary = summary(&data);
    assert_full_chain(&summary);
    assert_clean(&summary);
}

#[test]
fn one_of_three_signatures_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = archive_with_proof(tmp.path(), 50, |raw, _| {
        with_signatures(raw, |s| {
            keep_signatures(s, 1);
            s.signature_count = 1;
            s.total_weight = 1;
        })
    });
    refused_at(
        tmp.path(),
        &archive,
        50,
        "signed weight 1 of 4 is not above 2/3",
    );
    // Only the entries removed, the counters left: refused too.
    let archive = archive_with_proof(tmp.path(), 50, |raw, _| {
        with_signatures(raw, |s| keep_signatures(s, 1))
    });
    refused_at(
        tmp.path(),
        &archive,
        50,
        "signature count 3 disagrees with the 1 signature entries",
    );
}

#[test]
fn signature_count_that_disagrees_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = archive_with_proof(tmp.path(), 30, |raw, _| {
        with_signatures(raw, |s| s.signature_count = 2)
    });
    refused_at(
        tmp.path(),
        &archive,
        30,
        "signature count 2 disagrees with the 3 signature entries",
    );
}

#[test]
fn proof_of_another_block_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let other = mc_id(39);
    let archive = archive_with_proof(tmp.path(), 40, |_, proofs| {
        proofs
            .iter()
            .find(|(id, _)| *id == other)
            .unwrap()
            .1
            .clone()
    });
    refused_at(
        tmp.path(),
        &archive,
        40,
        &format!("proof of another block: the proof is for {other}"),
    );
}

#[test]
fn another_validator_set_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = archive_with_proof(tmp.path(), 70, |raw, _| {
        with_signatures(raw, |s| {
            s.validator_info.validator_list_hash_short ^= 0x0100;
        })
    });
    refused_at(tmp.path(), &archive,
        70,
        "wrong validator set: the proof names short hash 1d3ed21e, the expected subset has 1d3ed31e",
    );
}

#[test]
fn inspect_block_shows_how_it_was_proven() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    let block: Value =
        serde_json::from_str(&ok(&data, &["inspect", "--json", "block", "16"])).unwrap();
    assert_eq!(block["proof"]["signatures"], 3, "{block}");
    assert_eq!(block["proof"]["signed_weight"], 3, "{block}");
    assert_eq!(block["proof"]["total_weight"], 4, "{block}");
    assert_eq!(block["proof"]["validator_set"], "zerostate", "{block}");
    let text = ok(&data, &["inspect", "block", "16"]);
    assert!(text.contains("signed_weight: 3"), "{text}");
    let shard: Value = serde_json::from_str(&ok(
        &data,
        &["inspect", "--json", "block", &shard_id(2).to_string()],
    ))
    .unwrap();
    assert_eq!(shard["proof"]["link"], true, "{shard}");
    assert_eq!(shard["proof"]["trusted_through_mc_block"], 16, "{shard}");
}
