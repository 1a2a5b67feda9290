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
    /// Transactions: account (33) ‖ lt u64 BE (8) → block id (80, LE layout) ‖ transaction hash (32) ‖ BOC.
    Transactions: "transactions", TxKey => TxRow;
    /// Transactions by hash: transaction hash (32) → account (33) ‖ lt u64 BE (8).
    TransactionsByHash: "transactions_by_hash", Hash32 => TxKey;
    /// Transactions by inbound message: message repr hash (32) → transaction hash (32).
    TransactionsByInMsg: "transactions_by_in_msg", Hash32 => Hash32;
    /// Active accounts by code: code hash (32) ‖ account (33) → empty.
    CodeAccounts: "code_accounts", CodeKey => Empty;
    /// The code each indexed account has now: account (33) → code hash (32).
    AccountCodes: "account_codes", AccountKey => Hash32;
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

/// A stored transaction: its block, its hash and its BOC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxRow {
    pub(crate) block: tycho_types::models::BlockId,
    pub(crate) hash: HashBytes,
    pub(crate) boc: Vec<u8>,
}

impl Codec for TxRow {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(112 + self.boc.len());
        out.extend_from_slice(&regolith_formats::encode_block_id(&self.block));
        out.extend_from_slice(self.hash.as_slice());
        out.extend_from_slice(&self.boc);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() < 112 {
            return Err(DecodeError::new(format!(
                "a transaction row of {} bytes",
                bytes.len()
            )));
        }
        let block = regolith_formats::decode_block_id(&bytes[..80])
            .map_err(|e| DecodeError::new(format!("a transaction row's block id: {e}")))?;
        Ok(Self {
            block,
            hash: HashBytes(bytes[80..112].try_into().expect("32 bytes")),
            boc: bytes[112..].to_vec(),
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
