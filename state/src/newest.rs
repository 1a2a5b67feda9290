//! The newest applied states, published for readers (the account API): after every group the pipeline
//! applied, and after a restore. A reader takes a snapshot (cheap: the roots, shared) and reads it without a
//! lock; its stored cells stay readable while states GC keeps the checkpoint they belong to (the newest
//! `keep_checkpoints`, at least the last two by default).

use std::sync::Arc;

use parking_lot::RwLock;

use crate::chain_states::ChainStates;

/// A shared slot holding the newest applied states; cloning it shares the slot.
#[derive(Clone, Default)]
pub struct NewestStates(Arc<RwLock<Option<Published>>>);

/// Published states and the Unix time they were published at.
type Published = (Arc<ChainStates>, u32);

impl NewestStates {
    /// Makes `states` the newest, now.
    pub fn publish(&self, states: &ChainStates) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32);
        *self.0.write() = Some((Arc::new(states.clone()), now));
    }

    /// The newest states, once any were published.
    pub fn get(&self) -> Option<Arc<ChainStates>> {
        self.0.read().as_ref().map(|(states, _)| states.clone())
    }

    /// The newest states with the Unix time they were published at.
    pub fn get_with_time(&self) -> Option<Published> {
        self.0.read().clone()
    }
}
