//! Owned snapshots and iterators: a reader that keeps its database alive and reads all its data from one
//! point in time.

use std::sync::Arc;

use rocksdb::{DBRawIteratorWithThreadMode, ReadOptions, SnapshotWithThreadMode, DB};

use crate::codec::Codec;
use crate::db::{decode_key, decode_value, Db};
use crate::error::{KvError, Result};
use crate::iter::{Iter, KeyRange, Keys};
use crate::table::{Schema, Table};

/// A RocksDB snapshot that keeps its database alive; `O` is what owns the database (the [`Db`] itself or
/// a crate's wrapper around it).
pub struct Snapshot<S: Schema, O: AsRef<Db<S>> = Db<S>> {
    // Field order matters: the snapshot is released before the database reference is dropped.
    snapshot: SnapshotWithThreadMode<'static, DB>,
    db: Arc<O>,
    _schema: std::marker::PhantomData<fn() -> S>,
}

impl<S: Schema> AsRef<Db<S>> for Db<S> {
    fn as_ref(&self) -> &Db<S> {
        self
    }
}

impl<S: Schema, O: AsRef<Db<S>>> Snapshot<S, O> {
    /// Takes a snapshot of the current state.
    pub fn new(db: Arc<O>) -> Self {
        let snapshot = (*db).as_ref().db.snapshot();
        // SAFETY: the snapshot borrows `db.db`, which lives inside the `Arc` stored next to it and is
        // therefore alive (and at a stable address) until after the snapshot is dropped (field order).
        let snapshot = unsafe {
            std::mem::transmute::<SnapshotWithThreadMode<'_, DB>, SnapshotWithThreadMode<'static, DB>>(
                snapshot,
            )
        };
        Self {
            snapshot,
            db,
            _schema: std::marker::PhantomData,
        }
    }

    /// What owns the database this snapshot belongs to.
    pub fn db(&self) -> &Arc<O> {
        &self.db
    }

    fn kv(&self) -> &Db<S> {
        (*self.db).as_ref()
    }

    /// Calls `on_table` for every table, in declaration order, then `on_row` with each of its raw rows in
    /// key order (digests, tools).
    pub fn for_each_raw_row(
        &self,
        mut on_table: impl FnMut(&'static str),
        mut on_row: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        for table in S::TABLES {
            on_table(table.name);
            let mut it = self
                .kv()
                .db
                .raw_iterator_cf_opt(self.kv().cf_by_name(table.name), self.read_options());
            it.seek_to_first();
            while let Some((key, value)) = it.item() {
                on_row(key, value);
                it.next();
            }
            it.status()
                .map_err(KvError::db(format_args!("reading {}", table.name)))?;
        }
        Ok(())
    }

    fn read_options(&self) -> ReadOptions {
        let mut options = ReadOptions::default();
        options.set_snapshot(&self.snapshot);
        // Dumps iterate in full key order, also over tables with a prefix extractor.
        options.set_total_order_seek(true);
        options
    }

    /// Point read of a typed value.
    pub fn get<T: Table<Schema = S>>(&self, key: &T::Key) -> Result<Option<T::Value>> {
        let encoded = key.encode();
        let raw = self
            .kv()
            .db
            .get_pinned_cf_opt(self.kv().cf::<T>(), encoded.as_ref(), &self.read_options())
            .map_err(KvError::db(format_args!("reading {}", T::NAME)))?;
        raw.map(|value| decode_value::<T>(encoded.as_ref(), &value))
            .transpose()
    }

    /// Whether a key exists.
    pub fn contains<T: Table<Schema = S>>(&self, key: &T::Key) -> Result<bool> {
        Ok(self
            .kv()
            .db
            .get_pinned_cf_opt(
                self.kv().cf::<T>(),
                key.encode().as_ref(),
                &self.read_options(),
            )
            .map_err(KvError::db(format_args!("reading {}", T::NAME)))?
            .is_some())
    }

    /// Typed rows of a table in `range`, ascending.
    pub fn iter<T: Table<Schema = S>>(&self, range: KeyRange) -> Iter<'_, T, DB> {
        Iter::new(
            self.kv().raw_iter::<T>(&range, Some(&self.snapshot)),
            range,
            false,
        )
    }

    /// Typed rows of a table in `range`, descending.
    pub fn iter_rev<T: Table<Schema = S>>(&self, range: KeyRange) -> Iter<'_, T, DB> {
        Iter::new(
            self.kv().raw_iter::<T>(&range, Some(&self.snapshot)),
            range,
            true,
        )
    }

    /// Typed keys of a table in `range`, ascending.
    pub fn keys<T: Table<Schema = S>>(&self, range: KeyRange) -> Keys<'_, T, DB> {
        Keys(self.iter(range))
    }
}

/// Typed rows of one table in a range, on an owned snapshot (no borrow: it can live in a long-lived
/// reader).
pub struct OwnedIter<T: Table, O: AsRef<Db<T::Schema>> = Db<<T as Table>::Schema>> {
    // Field order matters: the iterator is dropped before the snapshot it reads.
    iter: DBRawIteratorWithThreadMode<'static, DB>,
    done: bool,
    _snapshot: Arc<Snapshot<T::Schema, O>>,
}

impl<T: Table, O: AsRef<Db<T::Schema>>> OwnedIter<T, O> {
    /// Opens an iterator over `range` of table `T` on a snapshot.
    pub fn new(snapshot: Arc<Snapshot<T::Schema, O>>, range: KeyRange) -> Self {
        let iter = snapshot
            .kv()
            .raw_iter::<T>(&range, Some(&snapshot.snapshot));
        // SAFETY: the iterator borrows the database and the snapshot, both owned (through `Arc`s) by the
        // `_snapshot` field, which is dropped after the iterator (field order).
        let mut iter = unsafe {
            std::mem::transmute::<
                DBRawIteratorWithThreadMode<'_, DB>,
                DBRawIteratorWithThreadMode<'static, DB>,
            >(iter)
        };
        match &range.lower {
            Some(lower) => iter.seek(lower),
            None => iter.seek_to_first(),
        }
        Self {
            iter,
            done: false,
            _snapshot: snapshot,
        }
    }
}

impl<T: Table, O: AsRef<Db<T::Schema>>> OwnedIter<T, O> {
    /// The next row with its value left undecoded: `read` gets the decoded key and the value's bytes,
    /// which live only for the call (nothing is copied). A key that does not decode is reported, and the
    /// iterator moves past it.
    pub fn next_raw<R>(&mut self, read: impl FnOnce(T::Key, &[u8]) -> R) -> Option<Result<R>> {
        self.advance(|key, value| Ok(read(decode_key::<T>(key)?, value)))
    }

    fn advance<R>(&mut self, read: impl FnOnce(&[u8], &[u8]) -> Result<R>) -> Option<Result<R>> {
        if self.done {
            return None;
        }
        let item = match self.iter.item() {
            Some((key, value)) => read(key, value),
            None => {
                self.done = true;
                return self
                    .iter
                    .status()
                    .map_err(KvError::db(format_args!("iterating {}", T::NAME)))
                    .err()
                    .map(Err);
            }
        };
        // A row that does not decode is reported, and the iterator moves past it.
        self.iter.next();
        Some(item)
    }
}

impl<T: Table, O: AsRef<Db<T::Schema>>> Iterator for OwnedIter<T, O> {
    type Item = Result<(T::Key, T::Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance(|key, value| Ok((decode_key::<T>(key)?, decode_value::<T>(key, value)?)))
    }
}
