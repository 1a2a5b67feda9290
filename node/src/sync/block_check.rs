//! Checks of a block that came from a peer, before anything of it is written: the file hash and root hash
//! match the id, the proof is a proof of this block, and the queue diff belongs to it and hashes to the
//! block's `out_msg_queue_updates.diff_hash`.

use anyhow::{bail, Result};
use regolith_formats::{BlockId, CheckedBlock};
use regolith_rpc::client::BlockDataFull;

/// Checks a downloaded block; `expected` is the id asked for (none for a next-block download). The result is
/// the one checked-block value of the apply path ([`CheckedBlock`]).
pub fn check_downloaded_block(
    expected: Option<&BlockId>,
    data: &BlockDataFull,
) -> Result<CheckedBlock> {
    let id = data.block_id;
    if let Some(expected) = expected {
        if *expected != id {
            bail!("asked for block {expected}, got {id}");
        }
    }
    let block = CheckedBlock::check(
        &id,
        data.block.clone(),
        data.proof.clone(),
        data.queue_diff.clone(),
    )?;
    // The client decoded this blob into `data.block`, which just matched the id's file hash.
    Ok(match &data.compressed_block {
        Some(frame) => block.with_data_frame(frame.clone()),
        None => block,
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};

    use super::*;

    fn fixture_block(seqno: u32) -> BlockDataFull {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/archive_1.bin"
        );
        let mut reader = ArchiveReader::new_compressed(std::fs::File::open(path).unwrap()).unwrap();
        let mut parts = std::collections::HashMap::new();
        while let Some(e) = reader.next_entry().unwrap() {
            if e.block_id.is_masterchain() && e.block_id.seqno == seqno {
                parts.insert(e.ty, (e.block_id, e.data));
            }
        }
        let take = |ty| Bytes::from(parts[&ty].1.clone());
        BlockDataFull {
            block_id: parts[&ArchiveEntryType::Block].0,
            block: take(ArchiveEntryType::Block),
            proof: take(ArchiveEntryType::Proof),
            queue_diff: take(ArchiveEntryType::QueueDiff),
            compressed_block: None,
        }
    }

    #[test]
    fn a_block_from_a_peer_is_checked_against_its_id_proof_and_diff() {
        let good = fixture_block(10);
        check_downloaded_block(Some(&good.block_id), &good).unwrap();
        check_downloaded_block(None, &good).unwrap();
        let other = fixture_block(11);
        assert!(
            check_downloaded_block(Some(&other.block_id), &good).is_err(),
            "another id"
        );

        let mut tampered = good.clone();
        let mut block = tampered.block.to_vec();
        let at = block.len() - 10;
        block[at] ^= 1;
        tampered.block = Bytes::from(block);
        let err = check_downloaded_block(None, &tampered)
            .unwrap_err()
            .to_string();
        assert!(err.contains("file hash"), "{err}");

        let mut wrong_proof = good.clone();
        wrong_proof.proof = other.proof.clone();
        let err = format!(
            "{:#}",
            check_downloaded_block(None, &wrong_proof).unwrap_err()
        );
        assert!(err.contains("proof"), "{err}");

        let mut wrong_diff = good.clone();
        wrong_diff.queue_diff = other.queue_diff.clone();
        let err = format!(
            "{:#}",
            check_downloaded_block(None, &wrong_diff).unwrap_err()
        );
        assert!(err.contains("queue diff"), "{err}");
    }
}
