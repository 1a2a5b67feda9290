//! A persistent queue state, TL `block.queueState` (formats::queue_state), then every check of the queue's
//! import (queue.md §5.9: the message BOCs of the chunks against the diffs) through
//! `QueueStorage::validate_queue_state`, on a queue database in a temp dir opened once per process; a state
//! that validates is imported too. The TL format is canonical (the padding of the chunks must be zero), so a
//! state that parses re-encodes to exactly the input.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use regolith_formats::queue_state::QueueState;
use regolith_formats::{BlockId, HashBytes};
use regolith_queue::QueueStorage;

fn queue() -> &'static Arc<QueueStorage> {
    static QUEUE: OnceLock<(tempfile::TempDir, Arc<QueueStorage>)> = OnceLock::new();
    &QUEUE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            let queue = QueueStorage::open_at(&dir.path().join("int_queue")).expect("queue db");
            (dir, queue)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let queue = queue();
    let Ok(state) = QueueState::parse(data) else {
        assert!(queue
            .validate_queue_state(&any_block(), &HashBytes::ZERO, 1, data)
            .is_err());
        return;
    };
    let mut encoded = Vec::new();
    state.write(&mut encoded);
    assert_eq!(encoded, data, "encode(decode(x)) != x");

    let header = &state.header;
    let block = BlockId {
        shard: header.shard,
        seqno: header.seqno,
        ..any_block()
    };
    let top_hash = header.diff_hashes()[0];
    let tail_len = header.diffs().len() as u32;
    let validated = queue.validate_queue_state(&block, &top_hash, tail_len, data);
    if let Ok(summary) = &validated {
        assert_eq!(summary.diffs, header.diffs().len());
        assert_eq!(summary.messages, header.message_count());
        let imported = queue
            .import_queue_state(&block, &top_hash, tail_len, data)
            .expect("a state that validates imports");
        assert_eq!(&imported, summary);
    }
    let wrong_hash = HashBytes([!top_hash.0[0]; 32]);
    assert!(queue
        .validate_queue_state(&block, &wrong_hash, tail_len, data)
        .is_err());
});

fn any_block() -> BlockId {
    BlockId {
        shard: regolith_formats::ShardIdent::BASECHAIN,
        seqno: 0,
        root_hash: HashBytes::ZERO,
        file_hash: HashBytes::ZERO,
    }
}
