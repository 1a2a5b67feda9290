//! The database of one crate: a typed [`Db`] of its schema together with the fail points its tests arm. Each
//! crate names it with a type alias and opens it with its own options; everything else is the [`Db`]'s.

use std::path::Path;

use crate::db::{Db, DbOptions};
use crate::error::Result;
use crate::table::Schema;

/// A database of schema `S` with the fail points `F` of its owner; dereferences to the [`Db`].
pub struct Database<S: Schema, F = ()> {
    db: Db<S>,
    /// Failure injection for tests (armed only with the `test-utils` feature).
    pub fail_points: F,
}

impl<S: Schema, F: Default> Database<S, F> {
    /// Opens (creating if missing) the database at `path`, with its fail points disarmed.
    pub fn open(path: &Path, config: &S::Config, options: DbOptions) -> Result<Self> {
        Ok(Self {
            db: Db::open(path, config, options)?,
            fail_points: F::default(),
        })
    }
}

impl<S: Schema, F> std::ops::Deref for Database<S, F> {
    type Target = Db<S>;

    fn deref(&self) -> &Db<S> {
        &self.db
    }
}

impl<S: Schema, F> AsRef<Db<S>> for Database<S, F> {
    fn as_ref(&self) -> &Db<S> {
        &self.db
    }
}
