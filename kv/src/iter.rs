//! Typed iteration: key ranges built from encoded keys or key prefixes, rows decoded as they are read.

use std::marker::PhantomData;

use rocksdb::{DBRawIteratorWithThreadMode, ReadOptions};

use crate::codec::Codec;
use crate::db::{decode_key, decode_value, Engine};
use crate::error::{KvError, Result};
use crate::table::Table;

/// A range of keys: an inclusive lower and an exclusive upper bound, each optional, built from encoded
/// keys or key prefixes (any [`Codec`] whose encoding is a prefix of the table's keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRange {
    pub(crate) lower: Option<Vec<u8>>,
    pub(crate) upper: Option<Vec<u8>>,
    pub(crate) readahead: Option<usize>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> Self {
        Self::default()
    }

    /// Keys from `lower` (inclusive).
    pub fn from<K: Codec>(lower: &K) -> Self {
        Self {
            lower: Some(lower.encode().as_ref().to_vec()),
            ..Self::default()
        }
    }

    /// Keys below `upper` (exclusive).
    pub fn until<K: Codec>(upper: &K) -> Self {
        Self {
            upper: Some(upper.encode().as_ref().to_vec()),
            ..Self::default()
        }
    }

    /// Keys in `[lower, upper)`.
    pub fn between<A: Codec, B: Codec>(lower: &A, upper: &B) -> Self {
        Self::from(lower).to(upper)
    }

    /// Keys from `lower` through every key that starts with `upper` (for fixed-width keys: through
    /// `upper` itself). The exclusive end is `upper` plus one as a big-endian number of the same width; on
    /// overflow, a longer all-ff key.
    pub fn inclusive<A: Codec, B: Codec>(lower: &A, upper: &B) -> Self {
        let mut range = Self::from(lower);
        range.upper = Some(exclusive_end(upper.encode().as_ref()));
        range
    }

    /// Keys that start with `prefix`.
    pub fn prefix<K: Codec>(prefix: &K) -> Self {
        let bytes = prefix.encode().as_ref().to_vec();
        Self {
            upper: prefix_end(&bytes),
            lower: Some(bytes),
            readahead: None,
        }
    }

    /// Keys after every key that starts with `prefix` (`None`: no key can follow).
    pub fn after_prefix<K: Codec>(prefix: &K) -> Option<Self> {
        let lower = prefix_end(prefix.encode().as_ref())?;
        Some(Self {
            lower: Some(lower),
            ..Self::default()
        })
    }

    /// Raises the inclusive lower bound to `lower`.
    pub fn at_least<K: Codec>(mut self, lower: &K) -> Self {
        self.lower = Some(lower.encode().as_ref().to_vec());
        self
    }

    /// Sets the exclusive upper bound.
    pub fn to<K: Codec>(mut self, upper: &K) -> Self {
        self.upper = Some(upper.encode().as_ref().to_vec());
        self
    }

    /// Reads ahead this many bytes (long scans).
    pub fn readahead(mut self, bytes: usize) -> Self {
        self.readahead = Some(bytes);
        self
    }

    pub(crate) fn read_options(&self) -> ReadOptions {
        let mut options = ReadOptions::default();
        // Iteration is always in full key order, also over a table with a prefix extractor (a hashed
        // memtable would otherwise yield only the seek key's prefix).
        options.set_total_order_seek(true);
        if let Some(lower) = &self.lower {
            options.set_iterate_lower_bound(lower.clone());
        }
        if let Some(upper) = &self.upper {
            options.set_iterate_upper_bound(upper.clone());
        }
        if let Some(bytes) = self.readahead {
            options.set_readahead_size(bytes);
        }
        options
    }
}

/// The smallest byte string greater than every string starting with `prefix` (`None`: no such bound).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.last_mut() {
        if *last < u8::MAX {
            *last += 1;
            return Some(end);
        }
        end.pop();
    }
    None
}

/// The exclusive end of an inclusive bound: the bound plus one as a big-endian number of the same width;
/// on overflow, a longer all-ff key that sorts after every key of that width.
fn exclusive_end(inclusive_end: &[u8]) -> Vec<u8> {
    let mut end = inclusive_end.to_vec();
    for byte in end.iter_mut().rev() {
        if *byte < u8::MAX {
            *byte += 1;
            return end;
        }
        *byte = 0;
    }
    vec![0xff; inclusive_end.len() + 1]
}

/// Typed rows of one table, decoded as they are read; stops at the first error.
pub struct Iter<'a, T: Table, E: Engine> {
    raw: DBRawIteratorWithThreadMode<'a, E>,
    reverse: bool,
    done: bool,
    _table: PhantomData<fn() -> T>,
}

impl<'a, T: Table, E: Engine> Iter<'a, T, E> {
    pub(crate) fn new(
        mut raw: DBRawIteratorWithThreadMode<'a, E>,
        range: KeyRange,
        reverse: bool,
    ) -> Self {
        match (reverse, &range.lower) {
            (false, Some(lower)) => raw.seek(lower),
            (false, None) => raw.seek_to_first(),
            (true, _) => raw.seek_to_last(),
        }
        Self {
            raw,
            reverse,
            done: false,
            _table: PhantomData,
        }
    }

    fn advance(&mut self) {
        if self.reverse {
            self.raw.prev();
        } else {
            self.raw.next();
        }
    }

    fn step<R>(&mut self, read: impl FnOnce(&[u8], &[u8]) -> Result<R>) -> Option<Result<R>> {
        if self.done {
            return None;
        }
        let item = match (self.raw.key(), self.raw.value()) {
            (Some(key), Some(value)) => read(key, value),
            _ => {
                self.done = true;
                return self
                    .raw
                    .status()
                    .map_err(KvError::db(format_args!("iterating {}", T::NAME)))
                    .err()
                    .map(Err);
            }
        };
        self.done = item.is_err();
        self.advance();
        Some(item)
    }
}

impl<T: Table, E: Engine> Iterator for Iter<'_, T, E> {
    type Item = Result<(T::Key, T::Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(|key, value| Ok((decode_key::<T>(key)?, decode_value::<T>(key, value)?)))
    }
}

/// Typed keys of one table; values are not decoded.
pub struct Keys<'a, T: Table, E: Engine>(pub(crate) Iter<'a, T, E>);

impl<T: Table, E: Engine> Iterator for Keys<'_, T, E> {
    type Item = Result<T::Key>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.step(|key, _| decode_key::<T>(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_end_increments_or_extends() {
        assert_eq!(exclusive_end(&[0, 0xff]), vec![1, 0]);
        assert_eq!(exclusive_end(&[0xff, 0xff]), vec![0xff, 0xff, 0xff]);
        // The extended end sorts after every key of the original width.
        assert!([0xffu8, 0xff].as_slice() < exclusive_end(&[0xff, 0xff]).as_slice());
    }

    #[test]
    fn prefix_end_skips_trailing_ff() {
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }
}
