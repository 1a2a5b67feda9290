//! rpc.md §10 item 1: ids from schema lines, golden vectors of §2.9, the traps of §2.5 and the overlay id.

use super::*;
use tycho_types::models::ShardIdent;
use tycho_types::prelude::HashBytes;

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Normalises a schema line (§2.1): comments removed, whitespace collapsed, `(vector X)` → `vector X`.
fn normalised(line: &str) -> String {
    let line = line.split("//").next().unwrap_or("");
    let line = line.trim().trim_end_matches(';');
    let line = line.replace(['(', ')'], "");
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn hex(s: &str) -> Vec<u8> {
    ::hex::decode(s.replace(' ', "")).unwrap()
}

fn ser<T: TlWrite>(value: T) -> Vec<u8> {
    tl_proto::serialize(value)
}

fn de<'a, T: TlRead<'a>>(bytes: &'a [u8]) -> TlResult<T> {
    let mut packet = bytes;
    T::read_from(&mut packet)
}

fn mc_id() -> BlockId {
    BlockId {
        shard: ShardIdent::MASTERCHAIN,
        seqno: 1,
        root_hash: HashBytes([0x11; 32]),
        file_hash: HashBytes([0x22; 32]),
    }
}

/// Every id of the schema: the answers and wrappers listed here, the requests taken from the method table
/// (a new method needs no line in this test).
#[test]
fn ids_match_schema_lines() {
    let answers = [
        ("overlay.pong", ids::PONG),
        ("overlay.response.ok", ids::RESPONSE_OK),
        ("overlay.response.err", ids::RESPONSE_ERR),
        ("overlay.broadcastPrefix", ids::BROADCAST_PREFIX),
        ("blockchain.overlayIdData", ids::OVERLAY_ID_DATA),
        ("blockchain.keyBlockIds", ids::KEY_BLOCK_IDS),
        ("blockchain.blockFull.found", ids::BLOCK_FULL_FOUND),
        ("blockchain.blockFull.notFound", ids::BLOCK_FULL_NOT_FOUND),
        ("blockchain.blockData", ids::BLOCK_DATA),
        ("blockchain.keyBlockProof.found", ids::KEY_BLOCK_PROOF_FOUND),
        (
            "blockchain.keyBlockProof.notFound",
            ids::KEY_BLOCK_PROOF_NOT_FOUND,
        ),
        (
            "blockchain.zerostateProof.found",
            ids::ZEROSTATE_PROOF_FOUND,
        ),
        (
            "blockchain.zerostateProof.notFound",
            ids::ZEROSTATE_PROOF_NOT_FOUND,
        ),
        ("blockchain.archiveInfo.found", ids::ARCHIVE_INFO_FOUND),
        ("blockchain.archiveInfo.tooNew", ids::ARCHIVE_INFO_TOO_NEW),
        (
            "blockchain.archiveInfo.notFound",
            ids::ARCHIVE_INFO_NOT_FOUND,
        ),
        (
            "blockchain.persistentStatePartInfo",
            ids::PERSISTENT_STATE_PART_INFO,
        ),
        (
            "blockchain.persistentStateInfo.found",
            ids::PERSISTENT_STATE_INFO_FOUND,
        ),
        (
            "blockchain.persistentStateInfo.foundWithParts",
            ids::PERSISTENT_STATE_INFO_FOUND_WITH_PARTS,
        ),
        (
            "blockchain.persistentStateInfo.notFound",
            ids::PERSISTENT_STATE_INFO_NOT_FOUND,
        ),
        ("blockchain.data", ids::DATA),
        ("blockchain.broadcast.message", ids::BROADCAST_MESSAGE),
        ("regolith.nextBlock", ids::NEXT_BLOCK),
        ("regolith.nextBlocks", ids::NEXT_BLOCKS),
    ];
    let requests = Method::ALL.iter().map(|method| {
        let name = match method.name() {
            "ping" => "overlay.ping".to_string(),
            name if method.is_extension() => format!("regolith.{name}"),
            name => format!("blockchain.{name}"),
        };
        (name, method.id())
    });
    let expected: Vec<(String, u32)> = answers
        .into_iter()
        .map(|(name, id)| (name.to_string(), id))
        .chain(requests)
        .collect();
    assert!(
        expected.iter().any(|(_, id)| *id == ids::PING),
        "ping is a method"
    );
    let lines: Vec<&str> = SCHEMA
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//") && !l.contains("---"))
        .collect();
    assert_eq!(lines.len(), expected.len(), "one schema line per id");
    for (name, id) in expected {
        let line = lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("{name} missing from the schema"));
        assert_eq!(crc32(normalised(line).as_bytes()), id, "{name}: {line}");
    }
    // The schema writes `long` for the chunk sizes, the wire carries 4 bytes (trap 1): the ids still
    // come from the `long` text.
    assert!(SCHEMA.contains("chunk_size:long = blockchain.ArchiveInfo"));
}

/// The method table covers every request of the schema (its functions and `overlay.ping`), each once, with
/// the id of its schema line, a unique label, and a body that decodes to the method it names.
#[test]
fn method_table_is_the_schemas_requests() {
    let functions = SCHEMA.split("---functions---").nth(1).unwrap();
    let mut requests: Vec<(String, u32)> = functions
        .lines()
        .map(normalised)
        .filter(|l| !l.is_empty())
        .map(|l| {
            (
                l.split_whitespace().next().unwrap().to_string(),
                crc32(l.as_bytes()),
            )
        })
        .collect();
    let ping = SCHEMA
        .lines()
        .find(|l| l.starts_with("overlay.ping"))
        .unwrap();
    requests.push(("overlay.ping".into(), crc32(normalised(ping).as_bytes())));
    assert_eq!(
        Method::ALL.len(),
        requests.len(),
        "one method per schema request"
    );
    let mut labels = std::collections::HashSet::new();
    for (name, id) in &requests {
        let method = Method::from_id(*id).unwrap_or_else(|| panic!("{name} has no method"));
        assert_eq!(method.id(), *id, "{name}");
        assert!(
            labels.insert(method.name()),
            "label {} twice",
            method.name()
        );
        let short = name.rsplit('.').next().unwrap();
        assert_eq!(method.name(), short, "{name}: label");
    }
    assert!(
        Method::from_id(ids::PONG).is_none(),
        "an answer is not a method"
    );
}

#[test]
fn ping_pong_and_overlay_id() {
    assert_eq!(ser(Ping), hex("33c8816d"));
    assert_eq!(ser(Pong), hex("04087067"));
    assert_eq!(de::<Pong>(&hex("04087067")).unwrap(), Pong);
    // A bare pong is not an overlay.response.
    assert!(de::<OverlayResponse<Data>>(&hex("04087067")).is_err());
    assert_eq!(
        ::hex::encode(overlay_id(&[0; 32], &[0; 32])),
        "9eab95f1579164f28dd0048b2d8da9c5c49adfc339bb823bd9c66b1b422a77cf"
    );
}

#[test]
fn archive_vectors() {
    let req = ser(rpc::GetArchiveInfo { mc_seqno: 1 });
    assert_eq!(req, hex("da6a85a4 01000000"));
    assert_eq!(
        de::<rpc::GetArchiveInfo>(&req).unwrap(),
        rpc::GetArchiveInfo { mc_seqno: 1 }
    );
    let chunk = rpc::GetArchiveChunk {
        archive_id: 1,
        offset: 1 << 20,
    };
    let bytes = ser(chunk);
    assert_eq!(bytes, hex("271e796f 0100000000000000 0000100000000000"));
    assert_eq!(de::<rpc::GetArchiveChunk>(&bytes).unwrap(), chunk);

    let found = OverlayResponse::Ok(ArchiveInfo::Found {
        id: 1,
        size: 1000,
        chunk_size: 1 << 20,
    });
    let bytes = ser(found.clone());
    assert_eq!(
        bytes,
        hex("079b3fcc 86f932cb 0100000000000000 e803000000000000 00001000")
    );
    assert_eq!(
        bytes.len() - 4,
        24,
        "the archiveInfo value is 24 B: chunk_size is 4 bytes (trap 1)"
    );
    assert_eq!(de::<OverlayResponse<ArchiveInfo>>(&bytes).unwrap(), found);

    let too_new = ser(OverlayResponse::Ok(ArchiveInfo::TooNew));
    assert_eq!(too_new, hex("079b3fcc e60e7cc5"));
    assert_eq!(
        ser(OverlayResponse::<ArchiveInfo>::Err(3)),
        hex("ef9df134 03000000")
    );
    assert_eq!(
        de::<OverlayResponse<ArchiveInfo>>(&hex("ef9df134 03000000")).unwrap(),
        OverlayResponse::Err(3)
    );
    assert_eq!(
        ser(OverlayResponse::Ok(ArchiveInfo::NotFound)),
        hex("079b3fcc cdf505ed")
    );
    // size 0 is rejected (NZ)
    assert!(
        de::<ArchiveInfo>(&hex("86f932cb 0100000000000000 0000000000000000 00001000")).is_err()
    );
    assert!(
        de::<ArchiveInfo>(&hex("86f932cb 0100000000000000 e803000000000000 00000000")).is_err()
    );
}

#[test]
fn key_block_ids_data_and_block_data_vectors() {
    let empty = KeyBlockIds {
        block_ids: vec![],
        incomplete: true,
    };
    assert_eq!(ser(empty.clone()), hex("fca38a33 00000000 b5757299"));
    assert_eq!(de::<KeyBlockIds>(&ser(empty.clone())).unwrap(), empty);
    let two = KeyBlockIds {
        block_ids: vec![mc_id(), mc_id()],
        incomplete: false,
    };
    let bytes = ser(two.clone());
    assert_eq!(bytes.len(), 4 + 4 + 160 + 4, "ids are bare");
    assert_eq!(&bytes[168..], &hex("379779bc")[..]);
    assert_eq!(de::<KeyBlockIds>(&bytes).unwrap(), two);

    assert_eq!(ser(Data { data: Bytes::new() }), hex("a30e1c92 00000000"));
    let block_data = BlockData {
        data: Bytes::from_static(b"abc"),
        size: 3,
        chunk_size: 1 << 20,
    };
    let bytes = ser(block_data.clone());
    assert_eq!(bytes, hex("5b8fe7c0 03616263 03000000 00001000"));
    assert_eq!(de::<BlockData>(&bytes).unwrap(), block_data);
    // size 0 is rejected
    assert!(de::<BlockData>(&hex("5b8fe7c0 03616263 00000000 00001000")).is_err());
}

#[test]
fn persistent_state_vectors() {
    let found = PersistentStateInfo::Found {
        size: 5000,
        chunk_size: 1 << 20,
    };
    let bytes = ser(found.clone());
    assert_eq!(bytes, hex("9be35d9f 8813000000000000 00001000"));
    assert_eq!(de::<PersistentStateInfo>(&bytes).unwrap(), found);

    let parts = PersistentStateInfo::FoundWithParts {
        size: 5000,
        chunk_size: 1 << 20,
        split_depth: 1,
        parts: vec![PersistentStatePartInfo {
            prefix: 0x4000000000000000,
            size: 77,
        }],
    };
    let bytes = ser(parts.clone());
    assert_eq!(
        bytes,
        hex("d4e56eb0 8813000000000000 00001000 01000000 01000000 17cfecd4 0000000000000040 4d00000000000000")
    );
    assert_eq!(bytes.len(), 44);
    assert_eq!(de::<PersistentStateInfo>(&bytes).unwrap(), parts);

    // split_depth 0 rejected, more than 64 parts rejected
    let mut zero_depth = bytes.clone();
    zero_depth[16..20].copy_from_slice(&[0; 4]);
    assert!(de::<PersistentStateInfo>(&zero_depth).is_err());
    let mut many = hex("d4e56eb0 8813000000000000 00001000 01000000");
    many.extend_from_slice(&65u32.to_le_bytes());
    for _ in 0..65 {
        many.extend_from_slice(&hex("17cfecd4 0000000000000040 4d00000000000000"));
    }
    assert!(de::<PersistentStateInfo>(&many).is_err());
    // a part without its constructor id is rejected (boxed, trap 2)
    let mut bare_part = hex("d4e56eb0 8813000000000000 00001000 01000000 01000000");
    bare_part.extend_from_slice(&hex("0000000000000040 4d00000000000000"));
    assert!(de::<PersistentStateInfo>(&bare_part).is_err());
}

#[test]
fn broadcast_and_bytes_vectors() {
    assert_eq!(
        broadcast_body(b"abc").to_vec(),
        hex("1f0e9170 b68544e7 03616263")
    );
    let long = Bytes::from(vec![0xaa; 254]);
    let bytes = ser(Data { data: long.clone() });
    let body = &bytes[4..];
    assert_eq!(body.len(), 260);
    assert_eq!(&body[..4], &hex("fefe0000")[..]);
    assert_eq!(&body[4..258], &long[..]);
    assert_eq!(&body[258..], &[0, 0]);
    assert_eq!(de::<Data>(&bytes).unwrap().data, long);
    // 253 bytes still use the short header
    let short = ser(Data {
        data: Bytes::from(vec![0xaa; 253]),
    });
    assert_eq!(short[4], 253);
    assert_eq!(short.len(), 4 + 256);
}

#[test]
fn block_id_is_bare_and_checked() {
    let mut bytes = Vec::new();
    codec::block_id::write(&mc_id(), &mut bytes);
    let mut expected = hex("ffffffff 0000000000000080 01000000");
    expected.extend_from_slice(&[0x11; 32]);
    expected.extend_from_slice(&[0x22; 32]);
    assert_eq!(bytes, expected);
    assert_eq!(bytes.len(), 80);
    assert_eq!(
        codec::block_id::read(&mut bytes.as_slice()).unwrap(),
        mc_id()
    );

    let with_prefix = |wc: i32, prefix: u64| {
        let mut b = bytes.clone();
        b[..4].copy_from_slice(&wc.to_le_bytes());
        b[4..12].copy_from_slice(&prefix.to_le_bytes());
        codec::block_id::read(&mut b.as_slice())
    };
    assert!(with_prefix(0, 0).is_err(), "prefix 0");
    assert!(with_prefix(0, 0x8000000000000001).is_err(), "low bits");
    assert!(with_prefix(0, 0x8000000000000004).is_err(), "low bits");
    assert!(with_prefix(-1, 0x4000000000000000).is_err(), "mc split");
    assert!(with_prefix(0, 0x4000000000000000).is_ok());
    assert!(with_prefix(0, 0x8000000000000000).is_ok());
}

#[test]
fn function_lengths_and_roundtrips() {
    let id = mc_id();
    let full = ser(rpc::GetBlockFull { block_id: id });
    assert_eq!(full.len(), 84);
    assert_eq!(&full[..4], &ids::GET_BLOCK_FULL.to_le_bytes());
    let keys = ser(rpc::GetNextKeyBlockIds {
        block_id: id,
        max_size: 8,
    });
    assert_eq!(keys.len(), 88);
    let chunk = ser(rpc::GetBlockDataChunk {
        block_id: id,
        offset: 7,
    });
    assert_eq!(chunk.len(), 88, "offset is 4 bytes");
    let part = ser(rpc::GetPersistentShardStatePartChunk {
        block_id: id,
        prefix: 1,
        offset: 2,
    });
    assert_eq!(part.len(), 100);

    let requests = [
        (ser(Ping), RpcRequest::Ping(Ping)),
        (
            keys,
            RpcRequest::GetNextKeyBlockIds(rpc::GetNextKeyBlockIds {
                block_id: id,
                max_size: 8,
            }),
        ),
        (
            full.clone(),
            RpcRequest::GetBlockFull(rpc::GetBlockFull { block_id: id }),
        ),
        (
            ser(rpc::GetNextBlockFull { prev_block_id: id }),
            RpcRequest::GetNextBlockFull(rpc::GetNextBlockFull { prev_block_id: id }),
        ),
        (
            chunk,
            RpcRequest::GetBlockDataChunk(rpc::GetBlockDataChunk {
                block_id: id,
                offset: 7,
            }),
        ),
        (
            ser(rpc::GetKeyBlockProof { block_id: id }),
            RpcRequest::GetKeyBlockProof(rpc::GetKeyBlockProof { block_id: id }),
        ),
        (
            ser(rpc::GetZerostateProof),
            RpcRequest::GetZerostateProof(rpc::GetZerostateProof),
        ),
        (
            ser(rpc::GetPersistentShardStateInfo { block_id: id }),
            RpcRequest::GetPersistentShardStateInfo(rpc::GetPersistentShardStateInfo {
                block_id: id,
            }),
        ),
        (
            ser(rpc::GetPersistentQueueStateInfo { block_id: id }),
            RpcRequest::GetPersistentQueueStateInfo(rpc::GetPersistentQueueStateInfo {
                block_id: id,
            }),
        ),
        (
            ser(rpc::GetPersistentShardStateChunk {
                block_id: id,
                offset: 3,
            }),
            RpcRequest::GetPersistentShardStateChunk(rpc::GetPersistentShardStateChunk {
                block_id: id,
                offset: 3,
            }),
        ),
        (
            ser(rpc::GetPersistentShardStateRootChunk {
                block_id: id,
                offset: 3,
            }),
            RpcRequest::GetPersistentShardStateRootChunk(rpc::GetPersistentShardStateRootChunk {
                block_id: id,
                offset: 3,
            }),
        ),
        (
            part,
            RpcRequest::GetPersistentShardStatePartChunk(rpc::GetPersistentShardStatePartChunk {
                block_id: id,
                prefix: 1,
                offset: 2,
            }),
        ),
        (
            ser(rpc::GetPersistentQueueStateChunk {
                block_id: id,
                offset: 3,
            }),
            RpcRequest::GetPersistentQueueStateChunk(rpc::GetPersistentQueueStateChunk {
                block_id: id,
                offset: 3,
            }),
        ),
    ];
    for (bytes, expected) in requests {
        assert_eq!(RpcRequest::decode(&bytes).unwrap(), expected);
        // trailing bytes are accepted
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[1, 2, 3]);
        assert_eq!(RpcRequest::decode(&longer).unwrap(), expected);
    }
    assert!(RpcRequest::decode(&full[..83]).is_err(), "truncated");
    assert!(RpcRequest::decode(&[1, 2, 3, 4]).is_err(), "unknown");
    assert!(RpcRequest::decode(&[]).is_err());
}

#[test]
fn block_full_has_boxed_block_data() {
    let value = BlockFull::Found {
        block_id: mc_id(),
        block: BlockData {
            data: Bytes::from_static(b"abc"),
            size: 3,
            chunk_size: 1 << 20,
        },
        proof: Bytes::from_static(b"p"),
        queue_diff: Bytes::from_static(b"q"),
    };
    let bytes = ser(value.clone());
    assert_eq!(&bytes[..4], &hex("0acf0fcd")[..]);
    assert_eq!(
        &bytes[84..88],
        &hex("5b8fe7c0")[..],
        "blockData keeps its id"
    );
    assert_eq!(bytes.len(), 4 + 80 + 16 + 4 + 4);
    assert_eq!(de::<BlockFull>(&bytes).unwrap(), value);
    assert_eq!(ser(BlockFull::NotFound), hex("983d09cc"));
    assert_eq!(
        ser(KeyBlockProof::Found {
            proof: Bytes::from_static(b"x")
        }),
        hex("e8e4e6b6 01780000")
    );
    assert_eq!(ser(KeyBlockProof::NotFound), hex("46739e7c"));
    assert_eq!(ser(ZerostateProof::NotFound), hex("224f52c8"));
    assert_eq!(
        ser(ZerostateProof::Found {
            proof: Bytes::new()
        }),
        hex("bb0c3a23 00000000")
    );
    assert_eq!(ser(PersistentStateInfo::NotFound), hex("9969cf33"));
}

/// The batch extension: each entry boxed, the request's three fields in order, and counts that could not
/// be real refused before anything is allocated for them.
#[test]
fn next_blocks_batch_is_boxed_and_bounded() {
    let entry = NextBlock {
        block_id: mc_id(),
        data: Bytes::from_static(b"abc"),
        proof: Bytes::from_static(b"p"),
        queue_diff: Bytes::new(),
    };
    let value = NextBlocks {
        blocks: vec![entry.clone(), entry.clone()],
    };
    let bytes = ser(value.clone());
    assert_eq!(&bytes[..4], &ids::NEXT_BLOCKS.to_le_bytes());
    assert_eq!(&bytes[4..8], &2u32.to_le_bytes());
    assert_eq!(
        &bytes[8..12],
        &ids::NEXT_BLOCK.to_le_bytes(),
        "entries keep their id"
    );
    let entry_len = 4 + 80 + 4 + 4 + 4;
    assert_eq!(bytes.len(), 8 + 2 * entry_len);
    assert_eq!(de::<NextBlocks>(&bytes).unwrap(), value);
    assert_eq!(
        ser(NextBlocks { blocks: Vec::new() }),
        hex("6afaf79b 00000000")
    );

    // A count the rest of the answer cannot hold.
    let mut lie = bytes.clone();
    lie[4..8].copy_from_slice(&3u32.to_le_bytes());
    assert!(de::<NextBlocks>(&lie).is_err());
    // A count above the batch's ceiling, whatever follows.
    let mut huge = ids::NEXT_BLOCKS.to_le_bytes().to_vec();
    huge.extend_from_slice(&(codec::next_block_vec::MAX_ENTRIES as u32 + 1).to_le_bytes());
    huge.resize(
        huge.len() + (codec::next_block_vec::MAX_ENTRIES + 1) * entry_len,
        0,
    );
    assert!(matches!(de::<NextBlocks>(&huge), Err(TlError::InvalidData)));

    let request = rpc::GetNextBlocksFull {
        prev_block_id: mc_id(),
        max_mc_blocks: 16,
        max_bytes: 4 << 20,
    };
    let body = ser(request.clone());
    assert_eq!(&body[..4], &hex("5745d75c")[..]);
    assert_eq!(body.len(), 4 + 80 + 4 + 4);
    assert_eq!(&body[84..88], &16u32.to_le_bytes());
    assert_eq!(
        RpcRequest::decode(&body).unwrap(),
        RpcRequest::GetNextBlocksFull(request)
    );
    assert!(Method::GetNextBlocksFull.is_extension() && Method::GetNextBlocksFull.is_heavy());
    assert!(!Method::GetNextBlockFull.is_extension());
}
