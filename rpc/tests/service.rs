//! rpc.md §10 items 3 (service side), 5 and 6, and the handler rules of §3.3, on stub storage.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::*;
use regolith_rpc::proto::{self, rpc, OverlayResponse};
use regolith_rpc::{
    ArchiveLookup, BlockchainRpcServiceConfig, HandleFlags, StateInfo, StateKind, StatePart,
};
use tycho_types::models::BlockId;
use tycho_types::prelude::HashBytes;

const MIB: usize = 1 << 20;

#[tokio::test]
async fn item3_chunked_block_arrives_in_three_chunks() {
    let original = pseudo_random(5 * MIB / 2, 7);
    let compressed = zstd::encode_all(original.as_slice(), 3).unwrap();
    assert!(compressed.len() > 2 * MIB && compressed.len() < 3 * MIB);
    let storage = Arc::new(StubStorage::default());
    let id = mc_block(5, 1);
    storage.insert_full(id, Bytes::from(compressed.clone()));
    let svc = service(storage, Arc::new(StubProvider::new(MIB as u64)));

    let OverlayResponse::Ok(proto::BlockFull::Found {
        block_id,
        block,
        proof,
        queue_diff,
    }) = ask::<proto::BlockFull, _>(&svc, rpc::GetBlockFull { block_id: id }).await
    else {
        panic!("found expected")
    };
    assert_eq!(block_id, id);
    assert_eq!(block.size as usize, compressed.len());
    assert_eq!(block.chunk_size as usize, MIB);
    assert_eq!(block.data.len(), MIB);
    assert_eq!(&proof[..], b"proof");
    assert_eq!(&queue_diff[..], b"diff");

    let mut blob = block.data.to_vec();
    let mut chunks = 1;
    let mut offset = block.chunk_size;
    while (offset as usize) < compressed.len() {
        let data = data_of(
            ask(
                &svc,
                rpc::GetBlockDataChunk {
                    block_id: id,
                    offset,
                },
            )
            .await,
        );
        assert!(data.len() <= MIB);
        blob.extend_from_slice(&data);
        offset += block.chunk_size;
        chunks += 1;
    }
    assert_eq!(chunks, 3);
    assert_eq!(blob, compressed);
    assert_eq!(zstd::decode_all(blob.as_slice()).unwrap(), original);

    // an unaligned offset is served too
    let data = data_of(
        ask(
            &svc,
            rpc::GetBlockDataChunk {
                block_id: id,
                offset: 10,
            },
        )
        .await,
    );
    assert_eq!(&data[..], &compressed[10..10 + MIB]);
}

/// A repeated getBlockFull (by id or by the next1 walk) is answered from the service's cache, with the
/// same bytes; a block that lost a part or was removed is never served from it; a zero size turns it off.
#[tokio::test]
async fn repeated_full_blocks_come_from_the_answer_cache() {
    use std::sync::atomic::Ordering;
    let storage = Arc::new(StubStorage::default());
    let prev = mc_block(6, 2);
    let id = mc_block(7, 3);
    storage.insert_full(prev, Bytes::from_static(b"prev"));
    storage.insert_full(id, Bytes::from_static(b"block"));
    storage.link(&prev, id);
    let svc = service(storage.clone(), Arc::new(StubProvider::new(MIB as u64)));
    let reads = || storage.proof_reads.load(Ordering::Relaxed);
    let raw = |svc: &regolith_rpc::BlockchainRpcService, request: Vec<u8>| {
        let svc = svc.clone();
        async move { svc.handle_query(&request).await.expect("an answer") }
    };
    let by_id = tl_proto::serialize(rpc::GetBlockFull { block_id: id });
    let by_walk = tl_proto::serialize(rpc::GetNextBlockFull {
        prev_block_id: prev,
    });

    let first = raw(&svc, by_id.clone()).await;
    assert_eq!(reads(), 1);
    assert_eq!(raw(&svc, by_id.clone()).await, first);
    assert_eq!(raw(&svc, by_walk.clone()).await, first);
    assert_eq!(reads(), 1, "the repeats are answered from the cache");

    // A block that lost a part, or was removed, is read again (and is not found).
    let edits: [fn(&mut HandleFlags); 2] = [|f| f.has_proof = false, |f| f.is_removed = true];
    for edit in edits {
        edit(&mut storage.blocks.lock().get_mut(&id).unwrap().flags);
        assert_eq!(
            ask::<proto::BlockFull, _>(&svc, rpc::GetBlockFull { block_id: id }).await,
            OverlayResponse::Ok(proto::BlockFull::NotFound)
        );
        storage.insert_full(id, Bytes::from_static(b"block"));
        let before = reads();
        assert_eq!(raw(&svc, by_id.clone()).await, first);
        assert_eq!(reads(), before + 1, "read again after the block changed");
    }

    // A storage failure on a hit is an error, not a cached answer.
    *storage.fail.lock() = true;
    assert_eq!(
        ask::<proto::BlockFull, _>(&svc, rpc::GetBlockFull { block_id: id }).await,
        OverlayResponse::Err(2)
    );
    *storage.fail.lock() = false;

    // Size 0: every answer is read from storage.
    let off = regolith_rpc::BlockchainRpcService::builder()
        .with_storage(storage.clone())
        .with_provider(Arc::new(StubProvider::new(MIB as u64)))
        .without_broadcast_listener()
        .with_config(BlockchainRpcServiceConfig {
            block_full_cache_size: bytesize::ByteSize::b(0),
            ..Default::default()
        })
        .build();
    let before = reads();
    for _ in 0..3 {
        assert_eq!(raw(&off, by_id.clone()).await, first);
    }
    assert_eq!(reads(), before + 3);
}

#[tokio::test]
async fn small_block_size_is_piece_length_and_parts_are_required() {
    let storage = Arc::new(StubStorage::default());
    let id = mc_block(6, 2);
    storage.insert_full(id, Bytes::from_static(b"tiny"));
    let svc = service(storage.clone(), Arc::new(StubProvider::new(MIB as u64)));
    let OverlayResponse::Ok(proto::BlockFull::Found { block, .. }) =
        ask::<proto::BlockFull, _>(&svc, rpc::GetBlockFull { block_id: id }).await
    else {
        panic!()
    };
    assert_eq!(block.size, 4);

    // each missing part, or a removed block → notFound
    let edits: [fn(&mut HandleFlags); 4] = [
        |f| f.has_proof = false,
        |f| f.has_queue_diff = false,
        |f| f.has_data = false,
        |f| f.is_removed = true,
    ];
    for edit in edits {
        let mut saved = {
            let mut blocks = storage.blocks.lock();
            let saved = blocks[&id].clone();
            edit(&mut blocks.get_mut(&id).unwrap().flags);
            saved
        };
        assert_eq!(
            ask::<proto::BlockFull, _>(&svc, rpc::GetBlockFull { block_id: id }).await,
            OverlayResponse::Ok(proto::BlockFull::NotFound)
        );
        saved.flags = HandleFlags {
            has_data: true,
            has_proof: true,
            has_queue_diff: true,
            ..Default::default()
        };
        storage.blocks.lock().insert(id, saved);
    }

    // getNextBlockFull: no next1 → notFound; flag without link → err 2; link → the next block
    let next = mc_block(7, 3);
    storage.insert_full(next, Bytes::from_static(b"next"));
    assert_eq!(
        ask::<proto::BlockFull, _>(&svc, rpc::GetNextBlockFull { prev_block_id: id }).await,
        OverlayResponse::Ok(proto::BlockFull::NotFound)
    );
    storage.blocks.lock().get_mut(&id).unwrap().flags.has_next1 = true;
    assert_eq!(
        ask::<proto::BlockFull, _>(&svc, rpc::GetNextBlockFull { prev_block_id: id }).await,
        OverlayResponse::Err(2)
    );
    storage.blocks.lock().get_mut(&id).unwrap().next1 = Some(next);
    let OverlayResponse::Ok(proto::BlockFull::Found {
        block_id, block, ..
    }) = ask::<proto::BlockFull, _>(&svc, rpc::GetNextBlockFull { prev_block_id: id }).await
    else {
        panic!()
    };
    assert_eq!(block_id, next);
    assert_eq!(&block.data[..], b"next");

    // a storage error → err 2
    *storage.fail.lock() = true;
    assert_eq!(
        ask::<proto::BlockFull, _>(&svc, rpc::GetBlockFull { block_id: id }).await,
        OverlayResponse::Err(2)
    );
}

fn key_block_store() -> Arc<StubStorage> {
    let storage = Arc::new(StubStorage::default());
    for seqno in (0..=200).step_by(10) {
        storage
            .key_blocks
            .lock()
            .insert(seqno, mc_block(seqno, seqno as u8));
    }
    storage
}

async fn key_ids(
    svc: &regolith_rpc::BlockchainRpcService,
    from: proto::KeyBlockIds,
) -> (Vec<u32>, bool) {
    let _ = svc;
    (
        from.block_ids.iter().map(|id| id.seqno).collect(),
        from.incomplete,
    )
}

async fn next_keys(
    svc: &regolith_rpc::BlockchainRpcService,
    block_id: BlockId,
    max_size: u32,
) -> Result<(Vec<u32>, bool), u32> {
    match ask::<proto::KeyBlockIds, _>(svc, rpc::GetNextKeyBlockIds { block_id, max_size }).await {
        OverlayResponse::Ok(ids) => Ok(key_ids(svc, ids).await),
        OverlayResponse::Err(code) => Err(code),
    }
}

#[tokio::test]
async fn item5_key_block_ids() {
    let storage = key_block_store();
    let svc = service(storage, Arc::new(StubProvider::new(MIB as u64)));
    let k = |s: u32| mc_block(s, s as u8);
    assert_eq!(
        next_keys(&svc, k(0), 10).await,
        Ok(((10..=80).step_by(10).collect(), false))
    );
    assert_eq!(
        next_keys(&svc, k(0), 3).await,
        Ok((vec![10, 20, 30], false))
    );
    assert_eq!(
        next_keys(&svc, k(150), 10).await,
        Ok(((160..=200).step_by(10).collect(), true))
    );
    assert_eq!(next_keys(&svc, k(200), 10).await, Ok((vec![], true)));
    assert_eq!(next_keys(&svc, k(300), 10).await, Ok((vec![], true)));
    assert_eq!(next_keys(&svc, k(0), 0).await, Ok((vec![], false)));

    // wrong root hash, a seqno that is not a key block, a shard block → err 2
    let mut wrong = k(0);
    wrong.root_hash = HashBytes([0xee; 32]);
    assert_eq!(next_keys(&svc, wrong, 10).await, Err(2));
    assert_eq!(next_keys(&svc, mc_block(15, 15), 10).await, Err(2));
    assert_eq!(next_keys(&svc, shard_block(0, 0), 10).await, Err(2));

    let empty = service(
        Arc::new(StubStorage::default()),
        Arc::new(StubProvider::new(MIB as u64)),
    );
    assert_eq!(next_keys(&empty, k(0), 10).await, Ok((vec![], true)));
}

#[tokio::test]
async fn item6_answer_codes() {
    let storage = Arc::new(StubStorage::default());
    let id = mc_block(3, 4);
    storage.insert_full(id, Bytes::from(vec![1u8; 100]));
    let provider = Arc::new(StubProvider::new(MIB as u64));
    provider
        .archives
        .lock()
        .insert(1, Bytes::from(vec![9u8; 3 * MIB / 2]));
    let state_block = shard_block(10, 5);
    let state = Bytes::from(vec![7u8; MIB]);
    put_state(
        &provider,
        state_block,
        StateKind::Shard,
        StatePart::Unsplit,
        state.clone(),
    );
    let svc = service(storage.clone(), provider.clone());

    // getBlockDataChunk
    let unknown = mc_block(99, 9);
    assert_eq!(
        ask::<proto::Data, _>(
            &svc,
            rpc::GetBlockDataChunk {
                block_id: unknown,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(3)
    );
    assert_eq!(
        ask::<proto::Data, _>(
            &svc,
            rpc::GetBlockDataChunk {
                block_id: id,
                offset: 100
            }
        )
        .await,
        OverlayResponse::Err(3)
    );
    assert_eq!(
        ask::<proto::Data, _>(
            &svc,
            rpc::GetBlockDataChunk {
                block_id: id,
                offset: 1000
            }
        )
        .await,
        OverlayResponse::Err(3)
    );
    assert_eq!(
        data_of(
            ask(
                &svc,
                rpc::GetBlockDataChunk {
                    block_id: id,
                    offset: 50
                }
            )
            .await
        )
        .len(),
        50
    );

    // getArchiveChunk
    assert_eq!(
        data_of(
            ask(
                &svc,
                rpc::GetArchiveChunk {
                    archive_id: 1,
                    offset: MIB as u64
                }
            )
            .await
        )
        .len(),
        MIB / 2
    );
    assert_eq!(
        ask::<proto::Data, _>(
            &svc,
            rpc::GetArchiveChunk {
                archive_id: 1,
                offset: 1
            }
        )
        .await,
        OverlayResponse::Err(2)
    );
    assert_eq!(
        ask::<proto::Data, _>(
            &svc,
            rpc::GetArchiveChunk {
                archive_id: 7,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(2)
    );
    provider
        .archives
        .lock()
        .insert(1, Bytes::from_static(b"truncation would find me"));
    assert_eq!(
        ask::<proto::Data, _>(
            &svc,
            rpc::GetArchiveChunk {
                archive_id: (1u64 << 32) + 1,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(2),
        "a 64-bit id is never truncated to archive 1"
    );

    // state chunks
    let chunk = |offset| rpc::GetPersistentShardStateChunk {
        block_id: state_block,
        offset,
    };
    assert_eq!(
        ask::<proto::Data, _>(&svc, chunk(5)).await,
        OverlayResponse::Err(3),
        "misaligned"
    );
    assert_eq!(data_of(ask(&svc, chunk(0)).await), state);
    assert_eq!(
        data_of(ask(&svc, chunk(MIB as u64)).await).len(),
        0,
        "offset == len"
    );
    assert_eq!(
        ask::<proto::Data, _>(&svc, chunk(2 * MIB as u64)).await,
        OverlayResponse::Err(3),
        "offset > len"
    );
    assert_eq!(
        ask::<proto::Data, _>(
            &svc,
            rpc::GetPersistentQueueStateChunk {
                block_id: state_block,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(3)
    );
    *provider.fail.lock() = true;
    assert_eq!(
        ask::<proto::Data, _>(&svc, chunk(0)).await,
        OverlayResponse::Err(2),
        "provider error"
    );
    *provider.fail.lock() = false;

    // serving off: info → notFound, the 4 chunk requests → 1
    provider.states.lock().insert(
        (state_block, StateKind::Shard),
        StateInfo {
            size: MIB as u64,
            chunk_size: MIB as u64,
            split_depth: 0,
            parts: vec![],
        },
    );
    assert!(matches!(
        ask::<proto::PersistentStateInfo, _>(
            &svc,
            rpc::GetPersistentShardStateInfo {
                block_id: state_block
            }
        )
        .await,
        OverlayResponse::Ok(proto::PersistentStateInfo::Found { .. })
    ));
    let off = regolith_rpc::BlockchainRpcService::builder()
        .with_storage(storage.clone())
        .with_provider(provider.clone())
        .without_broadcast_listener()
        .with_config(BlockchainRpcServiceConfig {
            serve_persistent_states: false,
            ..Default::default()
        })
        .build();
    assert_eq!(
        ask::<proto::PersistentStateInfo, _>(
            &off,
            rpc::GetPersistentShardStateInfo {
                block_id: state_block
            }
        )
        .await,
        OverlayResponse::Ok(proto::PersistentStateInfo::NotFound)
    );
    assert_eq!(
        ask::<proto::PersistentStateInfo, _>(
            &off,
            rpc::GetPersistentQueueStateInfo {
                block_id: state_block
            }
        )
        .await,
        OverlayResponse::Ok(proto::PersistentStateInfo::NotFound)
    );
    assert_eq!(
        ask::<proto::Data, _>(&off, chunk(0)).await,
        OverlayResponse::Err(1)
    );
    assert_eq!(
        ask::<proto::Data, _>(
            &off,
            rpc::GetPersistentShardStateRootChunk {
                block_id: state_block,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(1)
    );
    assert_eq!(
        ask::<proto::Data, _>(
            &off,
            rpc::GetPersistentShardStatePartChunk {
                block_id: state_block,
                prefix: 1 << 62,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(1)
    );
    assert_eq!(
        ask::<proto::Data, _>(
            &off,
            rpc::GetPersistentQueueStateChunk {
                block_id: state_block,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(1)
    );

    // unknown constructor, truncated getBlockFull, empty body → no answer
    assert!(svc
        .handle_query(&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0])
        .await
        .is_none());
    let full = tl_proto::serialize(rpc::GetBlockFull { block_id: id });
    assert!(svc.handle_query(&full[..full.len() - 1]).await.is_none());
    assert!(svc.handle_query(&[]).await.is_none());
    // ping → bare pong
    assert_eq!(
        svc.handle_query(&tl_proto::serialize(proto::Ping))
            .await
            .unwrap()
            .as_ref(),
        &[0x04, 0x08, 0x70, 0x67]
    );
}

#[tokio::test]
async fn infos_proofs_and_chunk_cap() {
    let storage = Arc::new(StubStorage::default());
    let id = mc_block(20, 6);
    storage.insert_full(id, Bytes::from_static(b"x"));
    let provider = Arc::new(StubProvider::new(MIB as u64));
    provider.archive_info.lock().insert(
        5,
        ArchiveLookup::Found {
            id: 1,
            size: 1000,
            chunk_size: MIB as u64,
        },
    );
    provider
        .archive_info
        .lock()
        .insert(6, ArchiveLookup::TooNew);
    provider.archive_info.lock().insert(
        7,
        ArchiveLookup::Found {
            id: 1,
            size: 1000,
            chunk_size: 8 * MIB as u64,
        },
    );
    let split_block = shard_block(30, 7);
    provider.states.lock().insert(
        (split_block, StateKind::Shard),
        StateInfo {
            size: 5000,
            chunk_size: MIB as u64,
            split_depth: 1,
            parts: vec![regolith_rpc::StatePartInfo {
                prefix: 0x4000000000000000,
                size: 77,
            }],
        },
    );
    provider.states.lock().insert(
        (split_block, StateKind::Queue),
        StateInfo {
            size: 10,
            chunk_size: MIB as u64,
            split_depth: 0,
            parts: vec![],
        },
    );
    let svc = service(storage.clone(), provider.clone());

    assert_eq!(
        ask::<proto::ArchiveInfo, _>(&svc, rpc::GetArchiveInfo { mc_seqno: 5 }).await,
        OverlayResponse::Ok(proto::ArchiveInfo::Found {
            id: 1,
            size: 1000,
            chunk_size: MIB as u32
        })
    );
    assert_eq!(
        ask::<proto::ArchiveInfo, _>(&svc, rpc::GetArchiveInfo { mc_seqno: 6 }).await,
        OverlayResponse::Ok(proto::ArchiveInfo::TooNew)
    );
    assert_eq!(
        ask::<proto::ArchiveInfo, _>(&svc, rpc::GetArchiveInfo { mc_seqno: 8 }).await,
        OverlayResponse::Ok(proto::ArchiveInfo::NotFound)
    );
    // a chunk that cannot fit the 8 MiB frame → err 2 (§4.5)
    assert_eq!(
        ask::<proto::ArchiveInfo, _>(&svc, rpc::GetArchiveInfo { mc_seqno: 7 }).await,
        OverlayResponse::Err(2)
    );
    *provider.fail.lock() = true;
    assert_eq!(
        ask::<proto::ArchiveInfo, _>(&svc, rpc::GetArchiveInfo { mc_seqno: 5 }).await,
        OverlayResponse::Err(2)
    );
    *provider.fail.lock() = false;

    assert_eq!(
        ask::<proto::PersistentStateInfo, _>(
            &svc,
            rpc::GetPersistentShardStateInfo {
                block_id: split_block
            }
        )
        .await,
        OverlayResponse::Ok(proto::PersistentStateInfo::FoundWithParts {
            size: 5000,
            chunk_size: MIB as u32,
            split_depth: 1,
            parts: vec![proto::PersistentStatePartInfo {
                prefix: 0x4000000000000000,
                size: 77
            }],
        })
    );
    assert_eq!(
        ask::<proto::PersistentStateInfo, _>(
            &svc,
            rpc::GetPersistentQueueStateInfo {
                block_id: split_block
            }
        )
        .await,
        OverlayResponse::Ok(proto::PersistentStateInfo::Found {
            size: 10,
            chunk_size: MIB as u32
        })
    );

    // key block proof: has_proof and not removed
    assert_eq!(
        ask::<proto::KeyBlockProof, _>(&svc, rpc::GetKeyBlockProof { block_id: id }).await,
        OverlayResponse::Ok(proto::KeyBlockProof::Found {
            proof: Bytes::from_static(b"proof")
        })
    );
    storage.blocks.lock().get_mut(&id).unwrap().flags.is_removed = true;
    assert_eq!(
        ask::<proto::KeyBlockProof, _>(&svc, rpc::GetKeyBlockProof { block_id: id }).await,
        OverlayResponse::Ok(proto::KeyBlockProof::NotFound)
    );
    // zerostate proof
    assert_eq!(
        ask::<proto::ZerostateProof, _>(&svc, rpc::GetZerostateProof).await,
        OverlayResponse::Ok(proto::ZerostateProof::NotFound)
    );
    *storage.zerostate_proof.lock() = Some(Bytes::from_static(b"zp"));
    assert_eq!(
        ask::<proto::ZerostateProof, _>(&svc, rpc::GetZerostateProof).await,
        OverlayResponse::Ok(proto::ZerostateProof::Found {
            proof: Bytes::from_static(b"zp")
        })
    );
}

async fn batch(
    svc: &regolith_rpc::BlockchainRpcService,
    prev: BlockId,
    max_mc_blocks: u32,
    max_bytes: u32,
) -> Vec<proto::NextBlock> {
    match ask::<proto::NextBlocks, _>(
        svc,
        rpc::GetNextBlocksFull {
            prev_block_id: prev,
            max_mc_blocks,
            max_bytes,
        },
    )
    .await
    {
        OverlayResponse::Ok(answer) => answer.blocks,
        OverlayResponse::Err(code) => panic!("err {code}"),
    }
}

/// The batched next-blocks extension: mc blocks in next1 order, each followed by its own shard blocks, every
/// block whole; capped at 16 mc blocks and by the byte budget, a block that does not fit ending the answer;
/// empty at the tip; unanswered, like a stock node, when switched off.
#[tokio::test]
async fn next_blocks_batch_follows_next1_and_stops_at_the_budget() {
    let storage = Arc::new(StubStorage::default());
    let mc = batch_chain(&storage, 20, 2, |seed| {
        Bytes::from(pseudo_random(1000, seed))
    });
    let svc = service(storage.clone(), Arc::new(StubProvider::new(MIB as u64)));

    let blocks = batch(&svc, mc[0], 3, 4 << 20).await;
    let ids: Vec<BlockId> = blocks.iter().map(|b| b.block_id).collect();
    let shards = |seqno: u32| storage.shards_of.lock()[&mc[seqno as usize - 1]].clone();
    let mut expected = Vec::new();
    for seqno in 2..=4 {
        expected.push(mc[seqno as usize - 1]);
        expected.extend(shards(seqno));
    }
    assert_eq!(ids, expected);
    for b in &blocks {
        assert_eq!(b.data.len(), 1000, "whole blobs");
        assert_eq!(&b.proof[..], b"proof");
        assert_eq!(&b.queue_diff[..], b"diff");
    }

    // At most 16 mc blocks, whatever is asked.
    let blocks = batch(&svc, mc[0], 1000, 4 << 20).await;
    assert_eq!(
        blocks
            .iter()
            .filter(|b| b.block_id.is_masterchain())
            .count(),
        16
    );

    // A budget for one mc block and one of its shard blocks: the second shard block ends the answer.
    let entry = 4 + 80 + 4 + 1000 + 8 + 8;
    let blocks = batch(&svc, mc[0], 16, (12 + 2 * entry) as u32).await;
    let ids: Vec<BlockId> = blocks.iter().map(|b| b.block_id).collect();
    assert_eq!(ids, vec![mc[1], shards(2)[0]]);
    // Not even the first block fits: nothing to batch.
    assert!(batch(&svc, mc[0], 16, 500).await.is_empty());

    // At the tip, and after an unknown or a shard block.
    assert!(batch(&svc, *mc.last().unwrap(), 16, 4 << 20)
        .await
        .is_empty());
    assert!(batch(&svc, mc_block(500, 9), 16, 4 << 20).await.is_empty());
    assert!(matches!(
        ask::<proto::NextBlocks, _>(
            &svc,
            rpc::GetNextBlocksFull {
                prev_block_id: shard_block(1, 1),
                max_mc_blocks: 16,
                max_bytes: 4 << 20,
            },
        )
        .await,
        OverlayResponse::Err(1)
    ));

    // A block whose parts are not all stored ends the answer before it.
    storage
        .blocks
        .lock()
        .get_mut(&mc[3])
        .unwrap()
        .flags
        .has_proof = false;
    let blocks = batch(&svc, mc[0], 16, 4 << 20).await;
    assert_eq!(blocks.len(), 2 * 3, "mc 2 and 3 with their shard blocks");

    // Switched off: no answer at all, as from a stock node.
    let off = regolith_rpc::BlockchainRpcService::builder()
        .with_storage(storage)
        .with_provider(Arc::new(StubProvider::new(MIB as u64)))
        .without_broadcast_listener()
        .with_config(BlockchainRpcServiceConfig {
            serve_next_blocks_batch: false,
            ..Default::default()
        })
        .build();
    let body = tl_proto::serialize(rpc::GetNextBlocksFull {
        prev_block_id: mc[0],
        max_mc_blocks: 16,
        max_bytes: 4 << 20,
    });
    assert!(off.handle_query(&body).await.is_none());
}
