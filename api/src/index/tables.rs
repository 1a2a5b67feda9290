//! The column families of the transactions index (`<data>/api/`), each a typed table with its byte layout.
//! An account is its workchain as an unsigned byte then its id (33 bytes), so that key order is the order
//! getAccountsByCodeHash answers in (api.md §4); integers in keys are big-endian.

use regolith_kv::{tables, Codec, DecodeError, Empty, NameKey, RawBytes};
use tycho_types::cell::HashBytes;
use tycho_types::models::StdAddr;

tables! {
    /// The tables of the transactions index.
    pub(crate) schema IndexTables(());
    /// Index metadata: ASCII name → value (`last_indexed_mc`: u32 LE; `smallest_lt`: u64 LE).
    Meta: "meta", NameKey => RawBytes;
    /// Transactions: account (33) ‖ lt u64 BE (8) → block id (80, LE layout) ‖ transaction hash (32) ‖ has an
    /// inbound message (1) ‖ [its hash (32)] ‖ BOC.
    Transactions: "transactions", TxKey => TxRow;
    /// Transactions by hash: transaction hash (32) → account (33) ‖ lt u64 BE (8).
    TransactionsByHash: "transactions_by_hash", Hash32 => TxKey;
    /// Transactions by inbound message: message repr hash (32) → transaction hash (32).
    TransactionsByInMsg: "transactions_by_in_msg", Hash32 => Hash32;
    /// Active accounts by code: code hash (32) ‖ account (33) → empty.
    CodeAccounts: "code_accounts", CodeKey => Empty;
    /// The code each indexed account has now: account (33) → code hash (32).
    AccountCodes: "account_codes", AccountKey => Hash32;
    /// The indexed key blocks, for transactions GC (api.md §8): mc seqno u32 BE (4) → gen_utime u32 LE (4) ‖
    /// start_lt u64 LE (8).
    KeyBlocks: "key_blocks", SeqnoKey => KeyBlockTimes;
}

/// An mc seqno, big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SeqnoKey(pub(crate) u32);

impl Codec for SeqnoKey {
    type Encoded<'a> = [u8; 4];
    fn encode(&self) -> [u8; 4] {
        self.0.to_be_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        DecodeError::check_len("seqno", bytes, 4)?;
        Ok(Self(u32::from_be_bytes(bytes.try_into().expect("4 bytes"))))
    }
}

/// When a key block was made and its first lt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyBlockTimes {
    /// Its `gen_utime`.
    pub gen_utime: u32,
    /// Its `start_lt`.
    pub start_lt: u64,
}

impl Codec for KeyBlockTimes {
    type Encoded<'a> = [u8; 12];
    fn encode(&self) -> [u8; 12] {
        let mut out = [0u8; 12];
        out[..4].copy_from_slice(&self.gen_utime.to_le_bytes());
        out[4..].copy_from_slice(&self.start_lt.to_le_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        DecodeError::check_len("key block times", bytes, 12)?;
        Ok(Self {
            gen_utime: u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")),
            start_lt: u64::from_le_bytes(bytes[4..].try_into().expect("8 bytes")),
        })
    }
}

/// A 32-byte hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hash32(pub(crate) HashBytes);

impl Codec for Hash32 {
    type Encoded<'a> = [u8; 32];
    fn encode(&self) -> [u8; 32] {
        self.0 .0
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        DecodeError::check_len("hash", bytes, 32)?;
        Ok(Self(HashBytes(bytes.try_into().expect("32 bytes"))))
    }
}

/// An account: workchain as u8 (1) ‖ id (32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct AccountKey(pub(crate) [u8; 33]);

impl AccountKey {
    pub(crate) fn of(address: &StdAddr) -> Self {
        let mut key = [0u8; 33];
        key[0] = address.workchain as u8;
        key[1..].copy_from_slice(address.address.as_slice());
        Self(key)
    }

    pub(crate) fn address(&self) -> StdAddr {
        StdAddr::new(
            self.0[0] as i8,
            HashBytes(self.0[1..].try_into().expect("32 bytes")),
        )
    }
}

impl Codec for AccountKey {
    type Encoded<'a> = [u8; 33];
    fn encode(&self) -> [u8; 33] {
        self.0
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        DecodeError::check_len("account", bytes, 33)?;
        Ok(Self(bytes.try_into().expect("33 bytes")))
    }
}

/// A transaction's place: account (33) ‖ lt u64 BE (8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxKey {
    pub(crate) account: AccountKey,
    pub(crate) lt: u64,
}

impl Codec for TxKey {
    type Encoded<'a> = [u8; 41];
    fn encode(&self) -> [u8; 41] {
        let mut out = [0u8; 41];
        out[..33].copy_from_slice(&self.account.0);
        out[33..].copy_from_slice(&self.lt.to_be_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        DecodeError::check_len("transaction key", bytes, 41)?;
        Ok(Self {
            account: AccountKey(bytes[..33].try_into().expect("33 bytes")),
            lt: u64::from_be_bytes(bytes[33..].try_into().expect("8 bytes")),
        })
    }
}

/// A stored transaction: its block, its hash, its inbound message's hash and its BOC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxRow {
    pub(crate) block: tycho_types::models::BlockId,
    pub(crate) hash: HashBytes,
    pub(crate) in_msg_hash: Option<HashBytes>,
    pub(crate) boc: Vec<u8>,
}

impl Codec for TxRow {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(145 + self.boc.len());
        out.extend_from_slice(&regolith_formats::encode_block_id(&self.block));
        out.extend_from_slice(self.hash.as_slice());
        match &self.in_msg_hash {
            Some(hash) => {
                out.push(1);
                out.extend_from_slice(hash.as_slice());
            }
            None => out.push(0),
        }
        out.extend_from_slice(&self.boc);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let short = || DecodeError::new(format!("a transaction row of {} bytes", bytes.len()));
        if bytes.len() < 113 {
            return Err(short());
        }
        let block = regolith_formats::decode_block_id(&bytes[..80])
            .map_err(|e| DecodeError::new(format!("a transaction row's block id: {e}")))?;
        let hash = HashBytes(bytes[80..112].try_into().expect("32 bytes"));
        let (in_msg_hash, boc) = match bytes[112] {
            0 => (None, &bytes[113..]),
            1 if bytes.len() >= 145 => (
                Some(HashBytes(bytes[113..145].try_into().expect("32 bytes"))),
                &bytes[145..],
            ),
            1 => return Err(short()),
            other => {
                return Err(DecodeError::new(format!(
                    "a transaction row's message flag {other}"
                )))
            }
        };
        Ok(Self {
            block,
            hash,
            in_msg_hash,
            boc: boc.to_vec(),
        })
    }
}

/// A code hash and an account with that code: code hash (32) ‖ account (33).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CodeKey {
    pub(crate) code: HashBytes,
    pub(crate) account: AccountKey,
}

impl Codec for CodeKey {
    type Encoded<'a> = [u8; 65];
    fn encode(&self) -> [u8; 65] {
        let mut out = [0u8; 65];
        out[..32].copy_from_slice(self.code.as_slice());
        out[32..].copy_from_slice(&self.account.0);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        DecodeError::check_len("code key", bytes, 65)?;
        Ok(Self {
            code: HashBytes(bytes[..32].try_into().expect("32 bytes")),
            account: AccountKey(bytes[32..].try_into().expect("33 bytes")),
        })
    }
}
