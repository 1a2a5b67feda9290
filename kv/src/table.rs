//! Tables (column families) and schemas (the set of tables of one database).

use rocksdb::Options;

use crate::codec::Codec;

/// The tables of one database and the configuration their options are built from.
pub trait Schema: Send + Sync + 'static {
    /// What the per-table options are built from (a config, a shared cache, or `()`).
    type Config;
    /// Every table, in declaration order.
    const TABLES: &'static [TableDef<Self::Config>];
}

/// One table of a schema: its name and its options.
pub struct TableDef<C: 'static> {
    /// Column family name.
    pub name: &'static str,
    /// Sets the table's RocksDB options.
    pub options: fn(&mut Options, &C),
}

impl<C: 'static> TableDef<C> {
    /// The options of a table that keeps RocksDB's defaults.
    pub const DEFAULT_OPTIONS: fn(&mut Options, &C) = keep_defaults::<C>;
}

fn keep_defaults<C>(_: &mut Options, _: &C) {}

/// A column family with its key and value types.
pub trait Table: 'static {
    /// The database it belongs to.
    type Schema: Schema;
    /// Column family name.
    const NAME: &'static str;
    /// Key type.
    type Key: Codec;
    /// Value type.
    type Value: Codec;
}

/// Declares a schema and its tables; the tables get the visibility written before `schema`.
///
/// ```
/// use regolith_kv::{tables, Empty, RawBytes};
///
/// fn tuned(options: &mut rocksdb::Options, _: &()) {
///     options.optimize_for_point_lookup(16);
/// }
///
/// tables! {
///     /// The example database.
///     pub schema Example(());
///     /// Raw rows by raw key.
///     Rows: "rows", RawBytes => RawBytes;
///     /// An index with tuned options.
///     Index: "index", RawBytes => Empty, options = tuned;
/// }
/// ```
#[macro_export]
macro_rules! tables {
    (
        $(#[$schema_doc:meta])* $vis:vis schema $schema:ident($config:ty);
        $($(#[$doc:meta])* $name:ident: $cf:literal, $key:ty => $value:ty $(, options = $options:path)?;)*
    ) => {
        $(#[$schema_doc])*
        #[derive(Debug, Clone, Copy)]
        $vis struct $schema;

        impl $crate::Schema for $schema {
            type Config = $config;
            const TABLES: &'static [$crate::TableDef<$config>] = &[$(
                $crate::TableDef {
                    name: $cf,
                    options: $crate::__table_options!($config $(, $options)?),
                }
            ),*];
        }

        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            $vis struct $name;

            impl $crate::Table for $name {
                type Schema = $schema;
                const NAME: &'static str = $cf;
                type Key = $key;
                type Value = $value;
            }
        )*
    };
}

/// The options function of a table in [`tables!`]: the one given, or [`TableDef::DEFAULT_OPTIONS`].
#[doc(hidden)]
#[macro_export]
macro_rules! __table_options {
    ($config:ty) => {
        $crate::TableDef::<$config>::DEFAULT_OPTIONS
    };
    ($config:ty, $options:path) => {
        $options
    };
}
