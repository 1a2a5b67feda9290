//! Optimistic transactions on a [`Db`] over [`rocksdb::OptimisticTransactionDB`].

use rocksdb::{OptimisticTransactionDB, OptimisticTransactionOptions, Transaction};

use crate::codec::Codec;
use crate::db::{decode_key, decode_value, Db};
use crate::error::{KvError, Result};
use crate::iter::KeyRange;
use crate::table::{Schema, Table};

/// One optimistic transaction with typed access; dropped without commit, it rolls back.
pub struct Txn<'a, S: Schema> {
    db: &'a Db<S, OptimisticTransactionDB>,
    inner: Transaction<'a, OptimisticTransactionDB>,
}

impl<S: Schema> Db<S, OptimisticTransactionDB> {
    /// Begins a transaction with the database's write options.
    pub fn transaction(&self) -> Txn<'_, S> {
        Txn {
            db: self,
            inner: self.db.transaction_opt(
                self.write_options(),
                &OptimisticTransactionOptions::default(),
            ),
        }
    }
}

impl<S: Schema> Txn<'_, S> {
    /// Reads a value and makes the commit fail if anyone else writes that key before it.
    pub fn get_for_update<T: Table<Schema = S>>(&self, key: &T::Key) -> Result<Option<T::Value>> {
        let encoded = key.encode();
        let raw = self
            .inner
            .get_pinned_for_update_cf(self.db.cf::<T>(), encoded.as_ref(), true)
            .map_err(KvError::db(format_args!(
                "reading {} in a transaction",
                T::NAME
            )))?;
        raw.map(|value| decode_value::<T>(encoded.as_ref(), &value))
            .transpose()
    }

    /// Writes a row.
    pub fn put<T: Table<Schema = S>>(&self, key: &T::Key, value: &T::Value) -> Result<()> {
        self.inner
            .put_cf(
                self.db.cf::<T>(),
                key.encode().as_ref(),
                value.encode().as_ref(),
            )
            .map_err(KvError::db(format_args!("writing {}", T::NAME)))
    }

    /// Deletes a row.
    pub fn delete<T: Table<Schema = S>>(&self, key: &T::Key) -> Result<()> {
        self.inner
            .delete_cf(self.db.cf::<T>(), key.encode().as_ref())
            .map_err(KvError::db(format_args!("deleting from {}", T::NAME)))
    }

    /// The keys of a table in `range`, as this transaction sees them, for as long as `keep` accepts them.
    pub fn keys_while<T: Table<Schema = S>>(
        &self,
        range: KeyRange,
        keep: impl Fn(&T::Key) -> bool,
    ) -> Result<Vec<T::Key>> {
        let mut keys = Vec::new();
        let mut it = self
            .inner
            .raw_iterator_cf_opt(self.db.cf::<T>(), range.read_options());
        match &range.lower {
            Some(lower) => it.seek(lower),
            None => it.seek_to_first(),
        }
        while let Some(raw) = it.key() {
            let key = decode_key::<T>(raw)?;
            if !keep(&key) {
                break;
            }
            keys.push(key);
            it.next();
        }
        it.status().map_err(KvError::db(format_args!(
            "scanning {} in a transaction",
            T::NAME
        )))?;
        Ok(keys)
    }

    /// Commits. `Ok(false)`: a key read for update or written here changed meanwhile (busy / try again);
    /// nothing was written and the caller may run its decision again.
    pub fn commit(self, what: &str) -> Result<bool> {
        match self.inner.commit() {
            Ok(()) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    rocksdb::ErrorKind::Busy | rocksdb::ErrorKind::TryAgain
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(KvError::db(format_args!("committing {what}"))(e)),
        }
    }
}
