//! The newest applied states, published for readers (the account API): after every group the pipeline
//! applied, and after a restore. A reader takes a snapshot (cheap: the roots, shared) and reads it without a
//! lock; its stored cells stay readable while states GC keeps the checkpoint they belong to (the newest
//! `keep_checkpoints`, at least the last two by default).

use std::sync::Arc;

use parking_lot::RwLock;

use crate::chain_states::ChainStates;

/// A shared slot holding the newest applied states; cloning it shares the slot.
#[derive(Clone, Default)]
pub struct NewestStates(Arc<RwLock<Option<Arc<ChainStates>>>>);

impl NewestStates {
    /// Makes `states` the newest.
    pub fn publish(&self, states: &ChainStates) {
        *self.0.write() = Some(Arc::new(states.clone()));
    }

    /// The newest states, once any were published.
    pub fn get(&self) -> Option<Arc<ChainStates>> {
        self.0.read().clone()
    }
}
