//! TL `block.queueStateHeader` (id `0xd4014b65`) and `block.queueState` (id `0x3664d9cc`): the persistent
//! state of one shard's internal message queue, taken at a key block.
//!
//! Layout (TL, integers LE):
//! - header: shard (i32 ‖ u64) ‖ seqno u32 ‖ u32 n (1 ≤ n ≤ 1000) × boxed `block.queueDiff`, newest first
//!   (strictly descending seqno, each diff's `prev_hash` = the hash of the next, older one);
//! - state: boxed header ‖ u32 chunk count (≤ 10,000,000) × bigBytes, where bigBytes = u32 length ≤ 100 MiB ‖
//!   data ‖ zero padding to a multiple of 4. Each chunk is a multi-root BOC of message cells; the roots follow
//!   the diffs' message lists in order (checked by the queue import, which decodes the cells).
//!
//! Parsing validates every rule above, never panics and never allocates from a declared count before checking
//! that the remaining input can hold it. Writing a parsed value gives back identical bytes.

use tycho_types::models::ShardIdent;
use tycho_types::prelude::HashBytes;

use crate::queue_diff::{queue_diff_hash, QueueDiff, TlReader};
use crate::FormatError;

/// TL constructor id of `block.queueStateHeader`.
pub const QUEUE_STATE_HEADER_ID: u32 = 0xd401_4b65;
/// TL constructor id of `block.queueState`.
pub const QUEUE_STATE_ID: u32 = 0x3664_d9cc;
/// Limit of diffs in a header.
pub const MAX_STATE_DIFFS: u32 = 1000;
/// Limit of chunks in a state.
pub const MAX_STATE_CHUNKS: u32 = 10_000_000;
/// Limit of one bigBytes value (100 MiB).
pub const MAX_BIG_BYTES: u32 = 100 << 20;
/// Limit of roots in one chunk BOC.
pub const MAX_CHUNK_ROOTS: usize = 10_000;

/// A parsed `block.queueStateHeader` with the hash of each diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStateHeader {
    /// Shard of the block the state was taken at.
    pub shard: ShardIdent,
    /// Seqno of that block.
    pub seqno: u32,
    diffs: Vec<QueueDiff>,
    diff_hashes: Vec<HashBytes>,
}

impl QueueStateHeader {
    /// Builds a header from diffs (newest first), checking the header rules.
    pub fn new(shard: ShardIdent, seqno: u32, diffs: Vec<QueueDiff>) -> Result<Self, FormatError> {
        let diff_hashes = diffs.iter().map(QueueDiff::compute_hash).collect();
        let header = Self {
            shard,
            seqno,
            diffs,
            diff_hashes,
        };
        header.validate()?;
        Ok(header)
    }

    /// The diffs, newest first.
    pub fn diffs(&self) -> &[QueueDiff] {
        &self.diffs
    }

    /// The diff hashes (BLAKE3 of each boxed diff), in the order of [`Self::diffs`].
    pub fn diff_hashes(&self) -> &[HashBytes] {
        &self.diff_hashes
    }

    /// Total number of message hashes listed by all diffs.
    pub fn message_count(&self) -> usize {
        self.diffs.iter().map(|d| d.messages.len()).sum()
    }

    /// Reads one boxed header.
    pub fn read(r: &mut TlReader<'_>) -> Result<Self, FormatError> {
        let id = r.u32("queue state header constructor")?;
        if id != QUEUE_STATE_HEADER_ID {
            return Err(FormatError::UnknownConstructor {
                what: "block.queueStateHeader",
                expected: QUEUE_STATE_HEADER_ID,
                actual: id,
            });
        }
        let shard = r.shard("queue state header shard")?;
        let seqno = r.u32("queue state header seqno")?;
        // A boxed diff is at least 4 + 32 + 12 + 4 + 4 + 40 + 40 + 4 + 4 + 4 = 148 bytes.
        let n = r.count("queue state header diffs", MAX_STATE_DIFFS, 148)?;
        if n == 0 {
            return Err(FormatError::invalid("queue state header diffs", "no diffs"));
        }
        let mut diffs = Vec::with_capacity(n);
        let mut diff_hashes = Vec::with_capacity(n);
        for _ in 0..n {
            let before = r.remaining();
            let diff = QueueDiff::read(r)?;
            let used = before.len() - r.remaining().len();
            diff_hashes.push(queue_diff_hash(&before[..used]));
            diffs.push(diff);
        }
        let header = Self {
            shard,
            seqno,
            diffs,
            diff_hashes,
        };
        header.validate()?;
        Ok(header)
    }

    fn validate(&self) -> Result<(), FormatError> {
        const WHAT: &str = "queue state header diffs";
        if self.diffs.is_empty() || self.diffs.len() > MAX_STATE_DIFFS as usize {
            return Err(FormatError::invalid(
                WHAT,
                format!("{} diffs, expected 1..={MAX_STATE_DIFFS}", self.diffs.len()),
            ));
        }
        for (i, diff) in self.diffs.iter().enumerate() {
            if diff.shard != self.shard {
                return Err(FormatError::invalid(
                    WHAT,
                    format!(
                        "diff {i} is for shard {}, header is for {}",
                        diff.shard, self.shard
                    ),
                ));
            }
        }
        for (i, pair) in self.diffs.windows(2).enumerate() {
            if pair[1].seqno >= pair[0].seqno {
                return Err(FormatError::invalid(
                    WHAT,
                    format!(
                        "seqnos are not strictly descending at diff {}: {} then {}",
                        i + 1,
                        pair[0].seqno,
                        pair[1].seqno
                    ),
                ));
            }
            if self.diff_hashes[i + 1] != pair[0].prev_hash {
                return Err(FormatError::invalid(
                    WHAT,
                    format!(
                        "broken prev_hash chain: diff {} (seqno {}) does not hash to the prev_hash of seqno {}",
                        i + 1,
                        pair[1].seqno,
                        pair[0].seqno
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Serializes the boxed header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&QUEUE_STATE_HEADER_ID.to_le_bytes());
        out.extend_from_slice(&self.shard.workchain().to_le_bytes());
        out.extend_from_slice(&self.shard.prefix().to_le_bytes());
        out.extend_from_slice(&self.seqno.to_le_bytes());
        out.extend_from_slice(&(self.diffs.len() as u32).to_le_bytes());
        for diff in &self.diffs {
            diff.write(out);
        }
    }
}

/// A parsed `block.queueState`; chunks borrow the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueState<'a> {
    /// The header.
    pub header: QueueStateHeader,
    /// The chunk BOCs (without length and padding), in file order.
    pub chunks: Vec<&'a [u8]>,
}

impl<'a> QueueState<'a> {
    /// Parses a complete boxed `block.queueState`; every byte must be consumed.
    pub fn parse(data: &'a [u8]) -> Result<Self, FormatError> {
        let mut r = TlReader::new(data);
        let id = r.u32("queue state constructor")?;
        if id != QUEUE_STATE_ID {
            return Err(FormatError::UnknownConstructor {
                what: "block.queueState",
                expected: QUEUE_STATE_ID,
                actual: id,
            });
        }
        let header = QueueStateHeader::read(&mut r)?;
        let n = r.count("queue state chunks", MAX_STATE_CHUNKS, 4)?;
        let mut chunks = Vec::with_capacity(n);
        for _ in 0..n {
            chunks.push(read_big_bytes(&mut r, "queue state chunk")?);
        }
        if !r.remaining().is_empty() {
            return Err(FormatError::invalid(
                "queue state",
                format!("{} trailing bytes", r.remaining().len()),
            ));
        }
        Ok(Self { header, chunks })
    }

    /// Serializes the boxed state; the chunk count written is the true count.
    pub fn write(&self, out: &mut Vec<u8>) {
        write_queue_state(&self.header, &self.chunks, out);
    }
}

/// The chunk BOCs of a queue state's messages, in order: multi-root BOCs of at most [`MAX_CHUNK_ROOTS`]
/// message cells each.
pub fn message_chunks(messages: &[tycho_types::cell::Cell]) -> Vec<Vec<u8>> {
    messages
        .chunks(MAX_CHUNK_ROOTS)
        .map(|chunk| {
            let mut boc = tycho_types::boc::ser::BocHeader::<std::hash::RandomState>::with_capacity(
                chunk.len(),
            );
            for cell in chunk {
                boc.add_root(cell.as_ref());
            }
            let mut bytes = Vec::new();
            boc.encode(&mut bytes);
            bytes
        })
        .collect()
}

/// Serializes a boxed `block.queueState` from a header and chunk BOCs.
pub fn write_queue_state<C: AsRef<[u8]>>(
    header: &QueueStateHeader,
    chunks: &[C],
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&QUEUE_STATE_ID.to_le_bytes());
    header.write(out);
    out.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    for chunk in chunks {
        write_big_bytes(out, chunk.as_ref());
    }
}

fn read_big_bytes<'a>(r: &mut TlReader<'a>, what: &'static str) -> Result<&'a [u8], FormatError> {
    let len = r.u32(what)?;
    if len > MAX_BIG_BYTES {
        return Err(FormatError::invalid(
            what,
            format!("length {len} exceeds {MAX_BIG_BYTES}"),
        ));
    }
    let len = len as usize;
    let data = r.take(len, what)?;
    let padding = (4 - len % 4) % 4;
    let pad = r.take(padding, what)?;
    if pad.iter().any(|b| *b != 0) {
        return Err(FormatError::invalid(what, "non-zero padding"));
    }
    Ok(data)
}

fn write_big_bytes(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    let padding = (4 - data.len() % 4) % 4;
    out.extend(std::iter::repeat_n(0u8, padding));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/fixtures/queue_state")
                .join(name),
        )
        .unwrap()
    }

    fn hex(h: &HashBytes) -> String {
        h.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn shard_fixture() {
        let raw = fixture("shard.bin");
        let state = QueueState::parse(&raw).unwrap();
        let h = &state.header;
        assert_eq!(h.shard, ShardIdent::BASECHAIN);
        assert_eq!(h.seqno, 160);
        let seqnos: Vec<u32> = h.diffs().iter().map(|d| d.seqno).collect();
        assert_eq!(seqnos, [160, 159, 158]);
        assert_eq!(h.message_count(), 4300);
        assert_eq!(
            hex(&h.diff_hashes()[0]),
            "794fe9ce31b7919d2b6ca9ae0f97501f4017382a273b8f3ee512dcfcb5b14482"
        );
        assert!(hex(&h.diff_hashes()[1]).starts_with("7fc2c921"));
        assert!(hex(&h.diff_hashes()[2]).starts_with("94d9626f"));
        assert!(!state.chunks.is_empty());
        let mut out = Vec::new();
        state.write(&mut out);
        assert_eq!(out, raw);
        // The constructor computes the same hashes as the parser.
        let rebuilt = QueueStateHeader::new(h.shard, h.seqno, h.diffs().to_vec()).unwrap();
        assert_eq!(&rebuilt, h);
    }

    #[test]
    fn master_fixture() {
        let raw = fixture("master.bin");
        let state = QueueState::parse(&raw).unwrap();
        let h = &state.header;
        assert_eq!(h.shard, ShardIdent::MASTERCHAIN);
        assert_eq!(h.seqno, 90);
        assert_eq!(h.diffs().len(), 1);
        assert_eq!(h.message_count(), 0);
        assert!(state.chunks.is_empty());
        assert_eq!(
            hex(&h.diff_hashes()[0]),
            "5795ca5d1b8d0c1ce96394eef851bde718ff2e14fd2840098ed2bb7640f278c5"
        );
        let pt = &h.diffs()[0].processed_to;
        assert_eq!(pt.len(), 2);
        assert_eq!(pt[0].0, ShardIdent::MASTERCHAIN);
        assert_eq!(pt[0].1.lt, 246000004);
        assert_eq!(pt[1].0, ShardIdent::BASECHAIN);
        assert_eq!(pt[1].1.lt, 249001091);
        let mut out = Vec::new();
        state.write(&mut out);
        assert_eq!(out, raw);
    }

    #[test]
    fn every_truncation_and_extension_fails() {
        for name in ["master.bin", "shard.bin"] {
            let raw = fixture(name);
            let step = if raw.len() > 10_000 { 97 } else { 1 };
            for cut in (0..raw.len()).step_by(step) {
                assert!(QueueState::parse(&raw[..cut]).is_err(), "{name} cut {cut}");
            }
            let mut extra = raw.clone();
            extra.push(0);
            assert!(QueueState::parse(&extra).is_err(), "{name} extra byte");
        }
    }

    #[test]
    fn header_rules() {
        let raw = fixture("shard.bin");
        let state = QueueState::parse(&raw).unwrap();
        let h = &state.header;
        let diffs = h.diffs().to_vec();

        // 0 and 1001 diffs.
        assert!(QueueStateHeader::new(h.shard, h.seqno, vec![]).is_err());
        let mut zero = Vec::new();
        zero.extend_from_slice(&QUEUE_STATE_HEADER_ID.to_le_bytes());
        zero.extend_from_slice(&0i32.to_le_bytes());
        zero.extend_from_slice(&ShardIdent::PREFIX_FULL.to_le_bytes());
        zero.extend_from_slice(&160u32.to_le_bytes());
        zero.extend_from_slice(&0u32.to_le_bytes());
        assert!(QueueStateHeader::read(&mut TlReader::new(&zero)).is_err());
        let mut many = zero.clone();
        let n = many.len() - 4;
        many[n..].copy_from_slice(&1001u32.to_le_bytes());
        assert!(QueueStateHeader::read(&mut TlReader::new(&many)).is_err());

        // Ascending seqnos.
        let mut ascending = diffs.clone();
        ascending.reverse();
        assert!(QueueStateHeader::new(h.shard, h.seqno, ascending).is_err());

        // Broken prev_hash chain: a wrong prev_hash, or an older diff whose bytes changed.
        let mut broken = diffs.clone();
        broken[0].prev_hash = HashBytes([9; 32]);
        assert!(QueueStateHeader::new(h.shard, h.seqno, broken).is_err());
        let mut broken = diffs.clone();
        broken[2].prev_hash = HashBytes([7; 32]);
        assert!(QueueStateHeader::new(h.shard, h.seqno, broken).is_err());
        assert!(QueueStateHeader::new(h.shard, h.seqno, diffs.clone()).is_ok());

        // Wrong constructors.
        let mut bad = raw.clone();
        bad[0] ^= 1;
        assert!(matches!(
            QueueState::parse(&bad),
            Err(FormatError::UnknownConstructor { .. })
        ));
        let mut bad = raw.clone();
        bad[4] ^= 1;
        assert!(matches!(
            QueueState::parse(&bad),
            Err(FormatError::UnknownConstructor { .. })
        ));
    }

    #[test]
    fn big_bytes_rules() {
        let raw = fixture("master.bin");
        let state = QueueState::parse(&raw).unwrap();
        let mut base = Vec::new();
        state.header.write(&mut base);
        let mut with_prefix = QUEUE_STATE_ID.to_le_bytes().to_vec();
        with_prefix.extend_from_slice(&base);

        // A declared length above 100 MiB is rejected before anything is allocated.
        let mut huge = with_prefix.clone();
        huge.extend_from_slice(&1u32.to_le_bytes());
        huge.extend_from_slice(&(MAX_BIG_BYTES + 1).to_le_bytes());
        assert!(QueueState::parse(&huge).is_err());

        // A huge chunk count with no data behind it.
        let mut many = with_prefix.clone();
        many.extend_from_slice(&MAX_STATE_CHUNKS.to_le_bytes());
        assert!(QueueState::parse(&many).is_err());

        // Non-zero padding.
        let mut out = Vec::new();
        write_queue_state(&state.header, &[&[1u8, 2, 3][..]], &mut out);
        assert_eq!(
            QueueState::parse(&out).unwrap().chunks,
            vec![&[1u8, 2, 3][..]]
        );
        *out.last_mut().unwrap() = 1;
        assert!(QueueState::parse(&out).is_err());
    }

    #[test]
    fn random_garbage_never_panics() {
        let raw = fixture("shard.bin");
        let mut seed = 0x1234_5678_u64;
        for _ in 0..2000 {
            let mut data = raw[..raw.len().min(600)].to_vec();
            for _ in 0..4 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let pos = (seed >> 33) as usize % data.len();
                data[pos] = (seed >> 13) as u8;
            }
            let _ = QueueState::parse(&data);
        }
    }
}
