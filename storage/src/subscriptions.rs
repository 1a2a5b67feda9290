//! Generation-tagged subscriptions: waiters registered per key, resolved by `notify` (storage.md §6.5).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::error::{Result, StorageError};

static NEXT_WAITER_ID: AtomicU64 = AtomicU64::new(1);

type WaiterList<V> = Vec<(u64, oneshot::Sender<V>)>;

/// Waiters per key.
pub(crate) struct Subscriptions<K, V> {
    map: Arc<Mutex<HashMap<K, WaiterList<V>>>>,
}

impl<K, V> Default for Subscriptions<K, V> {
    fn default() -> Self {
        Self {
            map: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Subscriptions<K, V> {
    /// Registers a waiter for `key`.
    pub(crate) fn subscribe(&self, key: K) -> Waiter<K, V> {
        let waiter_id = NEXT_WAITER_ID.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.map
            .lock()
            .entry(key.clone())
            .or_default()
            .push((waiter_id, tx));
        Waiter {
            map: self.map.clone(),
            key,
            waiter_id,
            rx: Some(rx),
        }
    }

    /// Resolves every waiter of `key` with a clone of `value`.
    pub(crate) fn notify(&self, key: &K, value: &V) {
        let waiters = self.map.lock().remove(key);
        for (_, tx) in waiters.into_iter().flatten() {
            let _ = tx.send(value.clone());
        }
    }

    /// Number of keys with waiters (tests).
    #[cfg(feature = "test-utils")]
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}

/// One registered waiter; dropping it removes only its own registration.
pub(crate) struct Waiter<K: Hash + Eq, V> {
    map: Arc<Mutex<HashMap<K, WaiterList<V>>>>,
    key: K,
    waiter_id: u64,
    rx: Option<oneshot::Receiver<V>>,
}

impl<K: Hash + Eq, V> Waiter<K, V> {
    /// Awaits the value, with an optional timeout.
    pub(crate) async fn wait(mut self, timeout: Option<Duration>) -> Result<V> {
        let rx = self.rx.as_mut().expect("receiver is taken only here");
        let result = match timeout {
            Some(t) => match tokio::time::timeout(t, rx).await {
                Ok(r) => r.map_err(|_| StorageError::Closed),
                Err(_) => Err(StorageError::Timeout),
            },
            None => rx.await.map_err(|_| StorageError::Closed),
        };
        result
    }
}

impl<K: Hash + Eq, V> Drop for Waiter<K, V> {
    fn drop(&mut self) {
        let mut map = self.map.lock();
        if let Some(list) = map.get_mut(&self.key) {
            list.retain(|(id, _)| *id != self.waiter_id);
            if list.is_empty() {
                map.remove(&self.key);
            }
        }
    }
}
