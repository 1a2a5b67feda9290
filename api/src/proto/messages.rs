//! The messages of the protobuf variant (api.md §7), written by hand with prost's derives: package `rpc`,
//! messages `Request`, `Response` and `Error`, with the field numbers of the wire.

use bytes::Bytes;

/// `google.protobuf.Empty`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Empty {}

/// `rpc.Request`: one call.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// The call (oneof `call`, fields 1–16).
    #[prost(
        oneof = "request::Call",
        tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16"
    )]
    pub call: Option<request::Call>,
}

/// The nested messages of `rpc.Request`.
pub mod request {
    use bytes::Bytes;

    /// `GetLibraryCell`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetLibraryCell {
        /// The library cell's hash (32 bytes).
        #[prost(bytes = "bytes", tag = "1")]
        pub hash: Bytes,
    }

    /// `GetContractState`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetContractState {
        /// The address: workchain byte, then 32 bytes of id.
        #[prost(bytes = "bytes", tag = "1")]
        pub address: Bytes,
        /// The lt the client already has.
        #[prost(uint64, optional, tag = "2")]
        pub last_transaction_lt: Option<u64>,
    }

    /// `GetTransaction` (also the request of `get_transaction_block_id`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTransaction {
        /// The transaction hash (32 bytes).
        #[prost(bytes = "bytes", tag = "1")]
        pub id: Bytes,
    }

    /// `GetDstTransaction`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetDstTransaction {
        /// The inbound message hash (32 bytes).
        #[prost(bytes = "bytes", tag = "1")]
        pub message_hash: Bytes,
    }

    /// `GetTransactionsList`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTransactionsList {
        /// The account address (33 bytes).
        #[prost(bytes = "bytes", tag = "1")]
        pub account: Bytes,
        /// The inclusive upper bound of lt.
        #[prost(uint64, optional, tag = "2")]
        pub last_transaction_lt: Option<u64>,
        /// Transactions at most (≤ 100).
        #[prost(uint32, tag = "3")]
        pub limit: u32,
    }

    /// `GetAccountsByCodeHash`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetAccountsByCodeHash {
        /// The code hash (32 bytes).
        #[prost(bytes = "bytes", tag = "1")]
        pub code_hash: Bytes,
        /// The exclusive start address (33 bytes).
        #[prost(bytes = "bytes", optional, tag = "2")]
        pub continuation: Option<Bytes>,
        /// Addresses at most (≤ 100).
        #[prost(uint32, tag = "3")]
        pub limit: u32,
    }

    /// `SendMessage`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SendMessage {
        /// The message BOC.
        #[prost(bytes = "bytes", tag = "1")]
        pub message: Bytes,
    }

    /// `GetKeyBlockProof`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetKeyBlockProof {
        /// The key block's seqno.
        #[prost(uint32, tag = "1")]
        pub seqno: u32,
    }

    /// `GetBlock`: a block id by its parts.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetBlock {
        /// Workchain.
        #[prost(int32, tag = "1")]
        pub workchain: i32,
        /// Shard prefix.
        #[prost(uint64, tag = "2")]
        pub shard: u64,
        /// Seqno.
        #[prost(uint32, tag = "3")]
        pub seqno: u32,
        /// Root hash (32 bytes).
        #[prost(bytes = "bytes", tag = "4")]
        pub root_hash: Bytes,
        /// File hash (32 bytes).
        #[prost(bytes = "bytes", tag = "5")]
        pub file_hash: Bytes,
    }

    /// The oneof `call`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Call {
        /// 1.
        #[prost(message, tag = "1")]
        GetCapabilities(super::Empty),
        /// 2.
        #[prost(message, tag = "2")]
        GetLatestKeyBlock(super::Empty),
        /// 3.
        #[prost(message, tag = "3")]
        GetBlockchainConfig(super::Empty),
        /// 4.
        #[prost(message, tag = "4")]
        GetStatus(super::Empty),
        /// 5.
        #[prost(message, tag = "5")]
        GetTimings(super::Empty),
        /// 6.
        #[prost(message, tag = "6")]
        GetContractState(GetContractState),
        /// 7.
        #[prost(message, tag = "7")]
        GetTransaction(GetTransaction),
        /// 8.
        #[prost(message, tag = "8")]
        GetDstTransaction(GetDstTransaction),
        /// 9.
        #[prost(message, tag = "9")]
        GetTransactionsList(GetTransactionsList),
        /// 10.
        #[prost(message, tag = "10")]
        GetAccountsByCodeHash(GetAccountsByCodeHash),
        /// 11.
        #[prost(message, tag = "11")]
        SendMessage(SendMessage),
        /// 12.
        #[prost(message, tag = "12")]
        GetLibraryCell(GetLibraryCell),
        /// 13.
        #[prost(message, tag = "13")]
        GetTransactionBlockId(GetTransaction),
        /// 14.
        #[prost(message, tag = "14")]
        GetKeyBlockProof(GetKeyBlockProof),
        /// 15.
        #[prost(message, tag = "15")]
        GetBlockProof(GetBlock),
        /// 16.
        #[prost(message, tag = "16")]
        GetBlockData(GetBlock),
    }
}

/// `rpc.Response`: one result.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    /// The result (oneof `result`, fields 1–15).
    #[prost(
        oneof = "response::Result",
        tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15"
    )]
    pub result: Option<response::Result>,
}

/// The nested messages of `rpc.Response`.
pub mod response {
    use bytes::Bytes;

    /// `GetRawTransaction`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetRawTransaction {
        /// The transaction BOC, if found.
        #[prost(bytes = "bytes", optional, tag = "1")]
        pub transaction: Option<Bytes>,
    }

    /// `GetTransactionsList`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTransactionsList {
        /// Transaction BOCs, newest first.
        #[prost(bytes = "bytes", repeated, tag = "1")]
        pub transactions: Vec<Bytes>,
    }

    /// `GetTimings` (fields 2 and 5 are reserved).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTimings {
        /// Seqno of the last masterchain block.
        #[prost(uint32, tag = "1")]
        pub last_mc_block_seqno: u32,
        /// Its gen_utime.
        #[prost(uint32, tag = "3")]
        pub last_mc_utime: u32,
        /// now − last_mc_utime.
        #[prost(int64, tag = "4")]
        pub mc_time_diff: i64,
        /// The smallest lt of the index (absent on a state-only node).
        #[prost(uint64, optional, tag = "6")]
        pub smallest_known_lt: Option<u64>,
    }

    /// `GetStatus`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetStatus {
        /// Startup has finished.
        #[prost(bool, tag = "1")]
        pub ready: bool,
    }

    /// `GetCapabilities`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetCapabilities {
        /// Method names.
        #[prost(string, repeated, tag = "1")]
        pub capabilities: Vec<String>,
    }

    /// `GetLatestKeyBlock`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetLatestKeyBlock {
        /// The key block BOC.
        #[prost(bytes = "bytes", tag = "1")]
        pub block: Bytes,
    }

    /// `GetBlockchainConfig`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetBlockchainConfig {
        /// The global id.
        #[prost(int32, tag = "1")]
        pub global_id: i32,
        /// The config BOC.
        #[prost(bytes = "bytes", tag = "2")]
        pub config: Bytes,
        /// Seqno of the key block of the config.
        #[prost(uint32, tag = "3")]
        pub seqno: u32,
    }

    /// `GetAccountsByCodeHash`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetAccountsByCodeHash {
        /// Addresses of 33 bytes.
        #[prost(bytes = "bytes", repeated, tag = "1")]
        pub account: Vec<Bytes>,
    }

    /// `GetLibraryCell`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetLibraryCell {
        /// The cell BOC, if found.
        #[prost(bytes = "bytes", optional, tag = "1")]
        pub cell: Option<Bytes>,
    }

    /// `GetContractState`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetContractState {
        /// The state (oneof `state`).
        #[prost(oneof = "get_contract_state::State", tags = "1, 2, 3")]
        pub state: Option<get_contract_state::State>,
    }

    /// The nested messages of `GetContractState`.
    pub mod get_contract_state {
        use bytes::Bytes;

        /// `Timings`.
        #[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
        pub struct Timings {
            /// gen_lt.
            #[prost(uint64, tag = "1")]
            pub gen_lt: u64,
            /// gen_utime.
            #[prost(uint32, tag = "2")]
            pub gen_utime: u32,
        }

        /// `NotExist`.
        #[derive(Clone, PartialEq, prost::Message)]
        pub struct NotExist {
            /// oneof `gen_timings`.
            #[prost(oneof = "not_exist::GenTimings", tags = "2, 3")]
            pub gen_timings: Option<not_exist::GenTimings>,
        }

        /// The oneof of `NotExist`.
        pub mod not_exist {
            /// oneof `gen_timings`.
            #[derive(Clone, PartialEq, prost::Oneof)]
            pub enum GenTimings {
                /// Known timings.
                #[prost(message, tag = "2")]
                Known(super::Timings),
                /// Unknown timings (never sent).
                #[prost(message, tag = "3")]
                Unknown(crate::proto::messages::Empty),
            }
        }

        /// `Exists`.
        #[derive(Clone, PartialEq, prost::Message)]
        pub struct Exists {
            /// The account cell BOC (without its tag bit).
            #[prost(bytes = "bytes", tag = "1")]
            pub account: Bytes,
            /// The timings.
            #[prost(message, optional, tag = "2")]
            pub gen_timings: Option<Timings>,
            /// oneof `last_transaction_id`.
            #[prost(oneof = "exists::LastTransactionId", tags = "3, 4")]
            pub last_transaction_id: Option<exists::LastTransactionId>,
        }

        /// The nested messages of `Exists`.
        pub mod exists {
            use bytes::Bytes;

            /// `Exact`.
            #[derive(Clone, PartialEq, prost::Message)]
            pub struct Exact {
                /// lt.
                #[prost(uint64, tag = "1")]
                pub lt: u64,
                /// Hash (32 bytes).
                #[prost(bytes = "bytes", tag = "2")]
                pub hash: Bytes,
            }

            /// `Inexact` (never sent).
            #[derive(Clone, PartialEq, prost::Message)]
            pub struct Inexact {
                /// latest_lt.
                #[prost(uint64, tag = "1")]
                pub latest_lt: u64,
            }

            /// oneof `last_transaction_id`.
            #[derive(Clone, PartialEq, prost::Oneof)]
            pub enum LastTransactionId {
                /// Exact.
                #[prost(message, tag = "3")]
                Exact(Exact),
                /// Inexact.
                #[prost(message, tag = "4")]
                Inexact(Inexact),
            }
        }

        /// oneof `state`.
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum State {
            /// No account.
            #[prost(message, tag = "1")]
            NotExists(NotExist),
            /// The account.
            #[prost(message, tag = "2")]
            Exists(Exists),
            /// Not changed since the given lt.
            #[prost(message, tag = "3")]
            Unchanged(Timings),
        }
    }

    /// `BlockId`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BlockId {
        /// Workchain.
        #[prost(int32, tag = "1")]
        pub workchain: i32,
        /// Shard prefix.
        #[prost(uint64, tag = "2")]
        pub shard: u64,
        /// Seqno.
        #[prost(uint32, tag = "3")]
        pub seqno: u32,
        /// Root hash.
        #[prost(bytes = "bytes", tag = "4")]
        pub root_hash: Bytes,
        /// File hash.
        #[prost(bytes = "bytes", tag = "5")]
        pub file_hash: Bytes,
    }

    /// `GetTransactionBlockId`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTransactionBlockId {
        /// The block, if the transaction is known.
        #[prost(message, optional, tag = "1")]
        pub block_id: Option<BlockId>,
    }

    /// `KeyBlockProof`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyBlockProof {
        /// The proof BOC.
        #[prost(bytes = "bytes", tag = "1")]
        pub proof: Bytes,
        /// The key block.
        #[prost(message, optional, tag = "2")]
        pub block_id: Option<BlockId>,
    }

    /// `GetKeyBlockProof`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetKeyBlockProof {
        /// The proof, if that seqno is a stored key block.
        #[prost(message, optional, tag = "1")]
        pub key_block: Option<KeyBlockProof>,
    }

    /// `BlockProof`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BlockProof {
        /// The proof BOC, if found.
        #[prost(bytes = "bytes", optional, tag = "1")]
        pub proof: Option<Bytes>,
    }

    /// `BlockData`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BlockData {
        /// The block BOC, if found.
        #[prost(bytes = "bytes", optional, tag = "1")]
        pub data: Option<Bytes>,
    }

    /// oneof `result`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Result {
        /// 1: getTransaction, getDstTransaction.
        #[prost(message, tag = "1")]
        GetRawTransaction(GetRawTransaction),
        /// 2.
        #[prost(message, tag = "2")]
        GetTransactionsList(GetTransactionsList),
        /// 3.
        #[prost(message, tag = "3")]
        GetTimings(GetTimings),
        /// 4.
        #[prost(message, tag = "4")]
        GetStatus(GetStatus),
        /// 5.
        #[prost(message, tag = "5")]
        GetCapabilities(GetCapabilities),
        /// 6.
        #[prost(message, tag = "6")]
        GetLatestKeyBlock(GetLatestKeyBlock),
        /// 7.
        #[prost(message, tag = "7")]
        GetBlockchainConfig(GetBlockchainConfig),
        /// 8.
        #[prost(message, tag = "8")]
        GetAccounts(GetAccountsByCodeHash),
        /// 9.
        #[prost(message, tag = "9")]
        GetContractState(GetContractState),
        /// 10.
        #[prost(message, tag = "10")]
        SendMessage(super::Empty),
        /// 11.
        #[prost(message, tag = "11")]
        GetLibraryCell(GetLibraryCell),
        /// 12.
        #[prost(message, tag = "12")]
        GetTransactionBlockId(GetTransactionBlockId),
        /// 13.
        #[prost(message, tag = "13")]
        GetKeyBlockProof(GetKeyBlockProof),
        /// 14.
        #[prost(message, tag = "14")]
        GetBlockProof(BlockProof),
        /// 15.
        #[prost(message, tag = "15")]
        GetBlockData(BlockData),
    }
}

/// `rpc.Error`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Error {
    /// The code of api.md §2.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// The message.
    #[prost(string, tag = "2")]
    pub message: String,
}

impl Response {
    /// A response carrying `result`.
    pub fn with(result: response::Result) -> Self {
        Self {
            result: Some(result),
        }
    }
}

impl Request {
    /// A request of `call`.
    pub fn of(call: request::Call) -> Self {
        Self { call: Some(call) }
    }
}

/// A 33-byte address of the protobuf wire: the workchain byte, then the id.
pub(crate) fn address_bytes(addr: &tycho_types::models::StdAddr) -> Bytes {
    let mut out = Vec::with_capacity(33);
    out.push(addr.workchain as u8);
    out.extend_from_slice(addr.address.as_slice());
    out.into()
}
