//! Column families of the `ledger` database, each declared as a typed table with its byte layout.
//!
//! Code reads and writes through these types ([`crate::db::LedgerDb`] and [`crate::db::Txn`]), never raw
//! slices, except where a range scan needs raw key bounds, which are built from the same key types.
//! Integers inside keys are big-endian so that byte order is numeric order; integers inside values are
//! little-endian. Strings inside keys are length-prefixed (u32 BE) so no key is a prefix of another course's.

use regolith_kv::{tables, Codec, DecodeError, NameKey};
pub(crate) use regolith_kv::{Empty, RawBytes};

use crate::delivery::Digest;
use crate::delivery_key::{ContextId, DeliveryKey, TransportContext};
use crate::outcome::OutcomeKind;

type Result<T, E = DecodeError> = std::result::Result<T, E>;

tables! {
    /// The tables of the `ledger` database.
    pub(crate) schema LedgerTables(());
    /// Database metadata: ASCII name → value (`db_version`: 1 byte, [`crate::db::DB_VERSION`]).
    Meta: "meta", NameKey => RawBytes;
    /// Processed deliveries (§2 rule 1): delivery key (32) → outcome code (1) ‖ context id (32) ‖
    /// has sequence (1) ‖ sequence u64 LE (8) ‖ edition u64 LE (8) ‖ digest (32) ‖ recorded at ms u64 LE (8) ‖
    /// course (u32 LE length ‖ UTF-8). Only decided deliveries are here: never rejected or below-floor ones.
    Deliveries: "deliveries", DeliveryKey => ProcessedMark;
    /// Sequenced deliveries per context, for pruning below a floor (§4): context id (32) ‖ sequence u64 BE (8)
    /// ‖ delivery key (32) → empty. Written together with the `deliveries` row of a sequenced delivery.
    DeliverySequences: "delivery_sequences", SequenceKey => Empty;
    /// The current edition of each course (§2 rules 2-5): course (u32 BE length ‖ UTF-8) → edition u64 LE (8) ‖
    /// digest (32) ‖ delivery key that made it current (32) ‖ recorded at ms u64 LE (8).
    Current: "current", CourseKey => CurrentRow;
    /// Every applied or stale announcement (§4): course (u32 BE length ‖ UTF-8) ‖ edition u64 BE (8) ‖
    /// delivery key (32) → outcome code (1: applied, 4: stale) ‖ digest (32) ‖ recorded at ms u64 LE (8).
    History: "history", EditionKey => HistoryRow;
    /// Stored conflicts (§2 rule 4), kept until an operator resolves them: course (u32 BE length ‖ UTF-8) ‖
    /// edition u64 BE (8) ‖ delivery key (32) → current digest (32) ‖ delivered digest (32) ‖ recorded at ms
    /// u64 LE (8).
    Conflicts: "conflicts", EditionKey => ConflictRow;
    /// Proven-closed floors per transport context (§4): context id (32) → floor u64 LE (8) ‖ raised at ms
    /// u64 LE (8) ‖ pruned in total u64 LE (8) ‖ the context's four fields (each u32 LE length ‖ UTF-8).
    Floors: "floors", ContextId => FloorRow;
}

impl Codec for DeliveryKey {
    type Encoded<'a> = [u8; 32];
    fn encode(&self) -> [u8; 32] {
        self.0
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        Self::from_slice(bytes)
            .map_err(|reason| DecodeError::new(format!("delivery key: {reason}")))
    }
}

impl Codec for ContextId {
    type Encoded<'a> = [u8; 32];
    fn encode(&self) -> [u8; 32] {
        self.0
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        Self::from_slice(bytes).map_err(|reason| DecodeError::new(format!("context id: {reason}")))
    }
}

/// Key of `current`: a course id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CourseKey(pub String);

impl CourseKey {
    /// The encoded course: u32 BE length ‖ bytes. Also the prefix of its rows in `history` and `conflicts`.
    pub(crate) fn prefix(course: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + course.len());
        out.extend_from_slice(&len_u32(course.len()).to_be_bytes());
        out.extend_from_slice(course.as_bytes());
        out
    }
}

impl Codec for CourseKey {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        Self::prefix(&self.0)
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader::new("course key", bytes);
        let course = reader.string_be()?;
        reader.finish()?;
        Ok(Self(course))
    }
}

/// Key of `history` and `conflicts`: course ‖ edition BE ‖ delivery key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EditionKey {
    /// Course.
    pub course: String,
    /// Edition.
    pub edition: u64,
    /// The delivery that announced it.
    pub delivery_key: DeliveryKey,
}

impl Codec for EditionKey {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = CourseKey::prefix(&self.course);
        out.extend_from_slice(&self.edition.to_be_bytes());
        out.extend_from_slice(&self.delivery_key.0);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader::new("edition key", bytes);
        let course = reader.string_be()?;
        let edition = reader.u64_be()?;
        let delivery_key = DeliveryKey(reader.array()?);
        reader.finish()?;
        Ok(Self {
            course,
            edition,
            delivery_key,
        })
    }
}

/// Key of `delivery_sequences`: context id ‖ sequence BE ‖ delivery key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SequenceKey {
    /// The context.
    pub context_id: ContextId,
    /// The delivery's sequence in it.
    pub sequence: u64,
    /// The delivery.
    pub delivery_key: DeliveryKey,
}

/// The prefix of the rows of `context_id` with one sequence: context id (32) ‖ sequence BE (8); as a
/// range bound, the rows with sequence ≥ `sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SequenceBound {
    /// The context.
    pub context_id: ContextId,
    /// The sequence.
    pub sequence: u64,
}

impl Codec for SequenceBound {
    type Encoded<'a> = [u8; 40];
    fn encode(&self) -> [u8; 40] {
        let mut out = [0; 40];
        out[..32].copy_from_slice(&self.context_id.0);
        out[32..].copy_from_slice(&self.sequence.to_be_bytes());
        out
    }
    fn decode(_: &[u8]) -> Result<Self> {
        Err(DecodeError::new("sequence bounds are not stored"))
    }
}

impl Codec for SequenceKey {
    type Encoded<'a> = [u8; 72];
    fn encode(&self) -> [u8; 72] {
        let mut out = [0; 72];
        out[..40].copy_from_slice(
            &SequenceBound {
                context_id: self.context_id,
                sequence: self.sequence,
            }
            .encode(),
        );
        out[40..].copy_from_slice(&self.delivery_key.0);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader::new("sequence key", bytes);
        let context_id = ContextId(reader.array()?);
        let sequence = reader.u64_be()?;
        let delivery_key = DeliveryKey(reader.array()?);
        reader.finish()?;
        Ok(Self {
            context_id,
            sequence,
            delivery_key,
        })
    }
}

/// Value of `deliveries`: the recorded decision for one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessedMark {
    /// The recorded outcome (applied, already current, conflict, stale).
    pub outcome: OutcomeKind,
    /// The delivery's context.
    pub context_id: ContextId,
    /// The delivery's sequence, if it had one.
    pub sequence: Option<u64>,
    /// Edition announced.
    pub edition: u64,
    /// Digest announced.
    pub digest: Digest,
    /// When it was decided.
    pub recorded_at_ms: u64,
    /// Course announced.
    pub course: String,
}

impl Codec for ProcessedMark {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(94 + self.course.len());
        out.push(self.outcome.code());
        out.extend_from_slice(&self.context_id.0);
        out.push(u8::from(self.sequence.is_some()));
        out.extend_from_slice(&self.sequence.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.edition.to_le_bytes());
        out.extend_from_slice(&self.digest.0);
        out.extend_from_slice(&self.recorded_at_ms.to_le_bytes());
        put_string_le(&mut out, &self.course);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader::new("processed delivery", bytes);
        let outcome = reader.recorded_outcome()?;
        let context_id = ContextId(reader.array()?);
        let has_sequence = reader.flag()?;
        let sequence = reader.u64_le()?;
        let mark = Self {
            outcome,
            context_id,
            sequence: has_sequence.then_some(sequence),
            edition: reader.u64_le()?,
            digest: Digest(reader.array()?),
            recorded_at_ms: reader.u64_le()?,
            course: reader.string_le()?,
        };
        reader.finish()?;
        Ok(mark)
    }
}

/// Value of `current`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CurrentRow {
    /// Current edition.
    pub edition: u64,
    /// Its digest.
    pub digest: Digest,
    /// The delivery that made it current.
    pub delivery_key: DeliveryKey,
    /// When.
    pub recorded_at_ms: u64,
}

impl Codec for CurrentRow {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80);
        out.extend_from_slice(&self.edition.to_le_bytes());
        out.extend_from_slice(&self.digest.0);
        out.extend_from_slice(&self.delivery_key.0);
        out.extend_from_slice(&self.recorded_at_ms.to_le_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader::new("current record", bytes);
        let row = Self {
            edition: reader.u64_le()?,
            digest: Digest(reader.array()?),
            delivery_key: DeliveryKey(reader.array()?),
            recorded_at_ms: reader.u64_le()?,
        };
        reader.finish()?;
        Ok(row)
    }
}

/// Value of `history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HistoryRow {
    /// Applied or stale.
    pub outcome: OutcomeKind,
    /// The announced digest.
    pub digest: Digest,
    /// When.
    pub recorded_at_ms: u64,
}

impl Codec for HistoryRow {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(41);
        out.push(self.outcome.code());
        out.extend_from_slice(&self.digest.0);
        out.extend_from_slice(&self.recorded_at_ms.to_le_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader::new("history row", bytes);
        let row = Self {
            outcome: reader.recorded_outcome()?,
            digest: Digest(reader.array()?),
            recorded_at_ms: reader.u64_le()?,
        };
        reader.finish()?;
        Ok(row)
    }
}

/// Value of `conflicts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConflictRow {
    /// The digest that stayed current.
    pub current_digest: Digest,
    /// The digest the conflicting delivery announced.
    pub delivered_digest: Digest,
    /// When.
    pub recorded_at_ms: u64,
}

impl Codec for ConflictRow {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(72);
        out.extend_from_slice(&self.current_digest.0);
        out.extend_from_slice(&self.delivered_digest.0);
        out.extend_from_slice(&self.recorded_at_ms.to_le_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader::new("conflict row", bytes);
        let row = Self {
            current_digest: Digest(reader.array()?),
            delivered_digest: Digest(reader.array()?),
            recorded_at_ms: reader.u64_le()?,
        };
        reader.finish()?;
        Ok(row)
    }
}

/// Value of `floors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FloorRow {
    /// Every sequence at or below this is closed.
    pub floor: u64,
    /// When it was last raised.
    pub raised_at_ms: u64,
    /// Delivery marks pruned under this floor, in total.
    pub pruned_total: u64,
    /// The context, kept so operators can see whose floor it is.
    pub context: TransportContext,
}

impl Codec for FloorRow {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&self.floor.to_le_bytes());
        out.extend_from_slice(&self.raised_at_ms.to_le_bytes());
        out.extend_from_slice(&self.pruned_total.to_le_bytes());
        for (_, field) in self.context.fields() {
            put_string_le(&mut out, field);
        }
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader::new("floor row", bytes);
        let row = Self {
            floor: reader.u64_le()?,
            raised_at_ms: reader.u64_le()?,
            pruned_total: reader.u64_le()?,
            context: TransportContext {
                source_network: reader.string_le()?,
                sending_instance: reader.string_le()?,
                target_instance: reader.string_le()?,
                transport: reader.string_le()?,
            },
        };
        reader.finish()?;
        Ok(row)
    }
}

fn len_u32(len: usize) -> u32 {
    // Ids are validated to at most MAX_ID_LEN bytes; saturating keeps the encoder total anyway.
    u32::try_from(len).unwrap_or(u32::MAX)
}

fn put_string_le(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&len_u32(text.len()).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

/// A cursor over a stored row that turns every short read into a corruption error naming the row.
struct Reader<'a> {
    what: &'static str,
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn new(what: &'static str, bytes: &'a [u8]) -> Self {
        Self {
            what,
            bytes,
            offset: 0,
        }
    }

    fn error(&self, reason: String) -> DecodeError {
        DecodeError::new(format!("{}: {reason}", self.what))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self
            .offset
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.error(format!(
                "needs {len} bytes at offset {}, row is {} bytes",
                self.offset,
                self.bytes.len()
            )));
        };
        let slice = &self.bytes[self.offset..end];
        self.offset = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let slice = self.take(N)?;
        let mut out = [0; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    fn u64_le(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn u64_be(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn flag(&mut self) -> Result<bool> {
        match self.array::<1>()?[0] {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.error(format!("flag byte {other} at offset {}", self.offset - 1))),
        }
    }

    fn recorded_outcome(&mut self) -> Result<OutcomeKind> {
        let code = self.array::<1>()?[0];
        OutcomeKind::from_recorded_code(code)
            .ok_or_else(|| self.error(format!("unknown outcome code {code}")))
    }

    fn string_with_len(&mut self, len: u32) -> Result<String> {
        let bytes = self.take(len as usize)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|e| self.error(format!("string is not UTF-8: {e}")))
    }

    fn string_le(&mut self) -> Result<String> {
        let len = u32::from_le_bytes(self.array()?);
        self.string_with_len(len)
    }

    fn string_be(&mut self) -> Result<String> {
        let len = u32::from_be_bytes(self.array()?);
        self.string_with_len(len)
    }

    fn finish(&self) -> Result<()> {
        if self.offset != self.bytes.len() {
            return Err(self.error(format!("{} trailing bytes", self.bytes.len() - self.offset)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Codec + PartialEq + std::fmt::Debug>(value: T) {
        let bytes = value.encode().as_ref().to_vec();
        assert_eq!(T::decode(&bytes).unwrap(), value);
        assert!(
            T::decode(&bytes[..bytes.len() - 1]).is_err(),
            "a truncated row must not decode"
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            T::decode(&longer).is_err(),
            "trailing bytes must not decode"
        );
    }

    #[test]
    fn rows_round_trip() {
        let key = DeliveryKey([3; 32]);
        round_trip(key);
        round_trip(CourseKey("C17".into()));
        round_trip(EditionKey {
            course: "C17".into(),
            edition: 10,
            delivery_key: key,
        });
        round_trip(SequenceKey {
            context_id: ContextId([9; 32]),
            sequence: 400,
            delivery_key: key,
        });
        for sequence in [None, Some(0), Some(u64::MAX)] {
            round_trip(ProcessedMark {
                outcome: OutcomeKind::Stale,
                context_id: ContextId([9; 32]),
                sequence,
                edition: 2,
                digest: Digest([5; 32]),
                recorded_at_ms: 1_700_000_000_000,
                course: "C17".into(),
            });
        }
        round_trip(CurrentRow {
            edition: 2,
            digest: Digest([5; 32]),
            delivery_key: key,
            recorded_at_ms: 7,
        });
        round_trip(HistoryRow {
            outcome: OutcomeKind::Applied,
            digest: Digest([5; 32]),
            recorded_at_ms: 7,
        });
        round_trip(ConflictRow {
            current_digest: Digest([5; 32]),
            delivered_digest: Digest([6; 32]),
            recorded_at_ms: 7,
        });
        round_trip(FloorRow {
            floor: 500,
            raised_at_ms: 7,
            pruned_total: 3,
            context: TransportContext::new("eth", "0xs", "mirror", "ccip"),
        });
    }

    #[test]
    fn edition_keys_sort_numerically_within_a_course() {
        let key = |course: &str, edition| {
            EditionKey {
                course: course.into(),
                edition,
                delivery_key: DeliveryKey([0; 32]),
            }
            .encode()
        };
        assert!(key("C17", 2) < key("C17", 10));
        // A course is never a prefix of another course's rows.
        assert!(!key("C1", 2).starts_with(&CourseKey::prefix("C")));
        assert!(key("C1", 2).starts_with(&CourseKey::prefix("C1")));
    }

    #[test]
    fn unknown_outcome_code_is_corruption() {
        let mut bytes = HistoryRow {
            outcome: OutcomeKind::Applied,
            digest: Digest([5; 32]),
            recorded_at_ms: 7,
        }
        .encode();
        bytes[0] = 5; // Duplicate is never recorded
        let error = HistoryRow::decode(&bytes).unwrap_err().to_string();
        assert!(error.contains("unknown outcome code 5"), "{error}");
    }
}
