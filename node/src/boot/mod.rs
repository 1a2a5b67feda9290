//! How a node gets the chain it goes on from: the genesis data of a data directory (zerostate proof and
//! states), a cold boot from the newest persistent state the network serves, and the imports of persistent
//! shard and queue state files.

pub mod cold_boot;
pub mod genesis;
pub mod queue_state;
pub mod state_import;
