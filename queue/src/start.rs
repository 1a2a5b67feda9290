//! The node-start check (queue.md §5.4 step 2): the queue must not be committed beyond the node's last
//! applied mc block. There is no rollback path.

use regolith_formats::BlockId;

use crate::error::{QueueError, Result};

/// `committed` must equal `applied` (full id, hashes included) or have a strictly lower seqno.
pub(crate) fn check_committed_not_ahead(
    committed: Option<BlockId>,
    applied: &BlockId,
) -> Result<()> {
    let Some(committed) = committed else {
        return Ok(());
    };
    if committed == *applied || committed.seqno < applied.seqno {
        return Ok(());
    }
    Err(QueueError::QueueAheadOfAppliedState {
        committed: Box::new(committed),
        applied: Box::new(*applied),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use regolith_formats::{HashBytes, ShardIdent};

    fn id(seqno: u32, root: u8) -> BlockId {
        BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno,
            root_hash: HashBytes([root; 32]),
            file_hash: HashBytes([root; 32]),
        }
    }

    #[test]
    fn rules() {
        assert!(check_committed_not_ahead(Some(id(5, 1)), &id(5, 1)).is_ok());
        assert!(check_committed_not_ahead(Some(id(4, 9)), &id(5, 1)).is_ok());
        assert!(check_committed_not_ahead(None, &id(5, 1)).is_ok());
        assert!(check_committed_not_ahead(Some(id(6, 1)), &id(5, 1)).is_err());
        assert!(check_committed_not_ahead(Some(id(5, 2)), &id(5, 1)).is_err());
    }
}
