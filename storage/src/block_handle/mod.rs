//! Block handles: the shared instance per block ([`BlockHandle`]), the weak-ref handle cache, the handle
//! storage with its flag setters, and the key-block index.

mod cache;
mod handle;
mod key_blocks;
mod storage;

pub use cache::HandleCache;
pub use handle::{BlockHandle, WeakBlockHandle};
pub use key_blocks::KeyBlocksDirection;
pub use storage::{BlockHandleStorage, HandleStatus, MaybeExistingHandle};
