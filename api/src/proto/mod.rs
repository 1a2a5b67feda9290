//! The protobuf variant of the API (api.md §7): `rpc.Request` in, `rpc.Response` or `rpc.Error` out, with
//! `Content-Type: application/x-protobuf` both ways.
//!
//! **Error status.** api.md §7 leaves it open: Tycho sends `rpc.Error` with HTTP 200, which nekoton's
//! `ProtoClient` cannot decode ("failed to decode Protobuf message"), while it decodes `rpc.Error` on
//! HTTP 422 and shows the server's message. This implementation sends every `rpc.Error` with **HTTP 422
//! Unprocessable Entity**; results go with HTTP 200.
//!
//! Encodings (api.md §7): addresses are 33 bytes (workchain byte, then id), hashes 32 raw bytes, BOCs raw
//! bytes, lt `uint64`; a wrong length is -32602 (`invalid address`, `invalid hash`, …); `limit` is checked
//! first; no `call` is -32601, an undecodable body -32700.

pub mod messages;

use std::time::Instant;

use bytes::Bytes;
use prost::Message as _;
use tycho_types::cell::HashBytes;
use tycho_types::models::{BlockId, ShardIdent, StdAddr};

use self::messages::response::get_contract_state as cs;
use self::messages::{request, response, Empty, Request, Response};
use crate::backend::GenTimings;
use crate::error::ApiError;
use crate::methods::{Api, ContractState, Method};

const PROTOCOL: &str = "proto";

/// The answer to one protobuf request: whether it is an error (HTTP 422) and its encoded body.
pub(crate) struct ProtoAnswer {
    pub(crate) is_error: bool,
    pub(crate) body: Bytes,
}

/// Handles one protobuf request body.
pub(crate) async fn handle(api: &Api, body: Result<Bytes, String>) -> ProtoAnswer {
    let started = Instant::now();
    let (method, outcome) = match body {
        Ok(body) => match Request::decode(body) {
            Ok(request) => match request.call {
                Some(call) => {
                    let method = method_of(&call);
                    (Some(method), call_method(api, call).await)
                }
                None => (None, Err(ApiError::unknown_method())),
            },
            Err(e) => (None, Err(ApiError::parse(e.to_string()))),
        },
        Err(reason) => (None, Err(ApiError::parse(reason))),
    };
    let label = method.map_or(crate::metrics::NO_METHOD, Method::name);
    let (answer, code) = match outcome {
        Ok(result) => (
            ProtoAnswer {
                is_error: false,
                body: Response::with(result).encode_to_vec().into(),
            },
            None,
        ),
        Err(e) => {
            tracing::debug!(method = label, code = e.code, "protobuf error answer");
            let code = e.code;
            let body = messages::Error {
                code,
                message: e.message.into_owned(),
            }
            .encode_to_vec()
            .into();
            (
                ProtoAnswer {
                    is_error: true,
                    body,
                },
                Some(code),
            )
        }
    };
    crate::metrics::record(PROTOCOL, label, code, started.elapsed());
    answer
}

fn method_of(call: &request::Call) -> Method {
    use request::Call;
    match call {
        Call::GetCapabilities(_) => Method::GetCapabilities,
        Call::GetLatestKeyBlock(_) => Method::GetLatestKeyBlock,
        Call::GetBlockchainConfig(_) => Method::GetBlockchainConfig,
        Call::GetStatus(_) => Method::GetStatus,
        Call::GetTimings(_) => Method::GetTimings,
        Call::GetContractState(_) => Method::GetContractState,
        Call::GetTransaction(_) => Method::GetTransaction,
        Call::GetDstTransaction(_) => Method::GetDstTransaction,
        Call::GetTransactionsList(_) => Method::GetTransactionsList,
        Call::GetAccountsByCodeHash(_) => Method::GetAccountsByCodeHash,
        Call::SendMessage(_) => Method::SendMessage,
        Call::GetLibraryCell(_) => Method::GetLibraryCell,
        Call::GetTransactionBlockId(_) => Method::GetTransactionBlockId,
        Call::GetKeyBlockProof(_) => Method::GetKeyBlockProof,
        Call::GetBlockProof(_) => Method::GetBlockProof,
        Call::GetBlockData(_) => Method::GetBlockData,
    }
}

fn parse_address(bytes: &[u8]) -> Result<StdAddr, ApiError> {
    if bytes.len() != 33 {
        return Err(ApiError::invalid_params("invalid address"));
    }
    let mut id = [0u8; 32];
    id.copy_from_slice(&bytes[1..]);
    Ok(StdAddr::new(bytes[0] as i8, HashBytes(id)))
}

fn parse_hash(bytes: &[u8], what: &'static str) -> Result<HashBytes, ApiError> {
    <[u8; 32]>::try_from(bytes)
        .map(HashBytes)
        .map_err(|_| ApiError::invalid_params(what))
}

fn parse_block_id(block: &request::GetBlock) -> Result<BlockId, ApiError> {
    let shard = ShardIdent::new(block.workchain, block.shard)
        .ok_or_else(|| ApiError::invalid_params("invalid shard"))?;
    Ok(BlockId {
        shard,
        seqno: block.seqno,
        root_hash: parse_hash(&block.root_hash, "invalid root hash")?,
        file_hash: parse_hash(&block.file_hash, "invalid file hash")?,
    })
}

fn block_id_message(id: &BlockId) -> response::BlockId {
    response::BlockId {
        workchain: id.shard.workchain(),
        shard: id.shard.prefix(),
        seqno: id.seqno,
        root_hash: Bytes::copy_from_slice(id.root_hash.as_slice()),
        file_hash: Bytes::copy_from_slice(id.file_hash.as_slice()),
    }
}

fn timings(t: GenTimings) -> cs::Timings {
    cs::Timings {
        gen_lt: t.gen_lt,
        gen_utime: t.gen_utime,
    }
}

fn boc(cell: &tycho_types::cell::Cell) -> Bytes {
    tycho_types::boc::Boc::encode(cell).into()
}

async fn call_method(api: &Api, call: request::Call) -> Result<response::Result, ApiError> {
    use request::Call;
    use response::Result as R;
    Ok(match call {
        Call::GetCapabilities(Empty {}) => R::GetCapabilities(response::GetCapabilities {
            // api.md §7: no `sub*` and no `stream`.
            capabilities: api
                .capabilities(false)
                .into_iter()
                .map(str::to_owned)
                .collect(),
        }),
        Call::GetLatestKeyBlock(Empty {}) => R::GetLatestKeyBlock(response::GetLatestKeyBlock {
            block: api.latest_key_block().await?,
        }),
        Call::GetBlockchainConfig(Empty {}) => {
            let config = api.blockchain_config().await?;
            R::GetBlockchainConfig(response::GetBlockchainConfig {
                global_id: config.global_id,
                config: boc(&config.config),
                seqno: config.seqno,
            })
        }
        Call::GetStatus(Empty {}) => R::GetStatus(response::GetStatus {
            ready: api.status().await?,
        }),
        Call::GetTimings(Empty {}) => {
            let t = api.timings().await?;
            R::GetTimings(response::GetTimings {
                last_mc_block_seqno: t.last_mc_block_seqno,
                last_mc_utime: t.last_mc_utime,
                mc_time_diff: t.mc_time_diff,
                smallest_known_lt: t.smallest_known_lt,
            })
        }
        Call::GetContractState(p) => {
            let address = parse_address(&p.address)?;
            // api.md §7: always `known` timings and `exact` ids.
            let state = match api.contract_state(&address, p.last_transaction_lt).await? {
                ContractState::NotExists { timings: t } => cs::State::NotExists(cs::NotExist {
                    gen_timings: Some(cs::not_exist::GenTimings::Known(timings(t))),
                }),
                ContractState::Exists {
                    account,
                    timings: t,
                    last_transaction_lt,
                    last_transaction_hash,
                } => cs::State::Exists(cs::Exists {
                    account: boc(&account),
                    gen_timings: Some(timings(t)),
                    last_transaction_id: Some(cs::exists::LastTransactionId::Exact(
                        cs::exists::Exact {
                            lt: last_transaction_lt,
                            hash: Bytes::copy_from_slice(last_transaction_hash.as_slice()),
                        },
                    )),
                }),
                ContractState::Unchanged { timings: t } => cs::State::Unchanged(timings(t)),
            };
            R::GetContractState(response::GetContractState { state: Some(state) })
        }
        Call::GetTransaction(p) => {
            let hash = parse_hash(&p.id, "invalid hash")?;
            R::GetRawTransaction(response::GetRawTransaction {
                transaction: api.transaction(&hash).await?,
            })
        }
        Call::GetDstTransaction(p) => {
            let hash = parse_hash(&p.message_hash, "invalid hash")?;
            R::GetRawTransaction(response::GetRawTransaction {
                transaction: api.dst_transaction(&hash).await?,
            })
        }
        Call::GetTransactionsList(p) => {
            // api.md §7: `limit` is checked first.
            crate::methods::check_limit_first(p.limit)?;
            let account = parse_address(&p.account)?;
            R::GetTransactionsList(response::GetTransactionsList {
                transactions: api
                    .transactions(&account, p.last_transaction_lt, p.limit)
                    .await?,
            })
        }
        Call::GetAccountsByCodeHash(p) => {
            crate::methods::check_limit_first(p.limit)?;
            let code_hash = parse_hash(&p.code_hash, "invalid hash")?;
            let continuation = p.continuation.as_deref().map(parse_address).transpose()?;
            let list = api
                .accounts_by_code_hash(&code_hash, continuation.as_ref(), p.limit)
                .await?;
            R::GetAccounts(response::GetAccountsByCodeHash {
                account: list.iter().map(messages::address_bytes).collect(),
            })
        }
        Call::SendMessage(p) => {
            api.send_message(p.message).await?;
            R::SendMessage(Empty {})
        }
        Call::GetLibraryCell(p) => {
            let hash = parse_hash(&p.hash, "invalid hash")?;
            R::GetLibraryCell(response::GetLibraryCell {
                cell: api.library_cell(&hash).await?.map(|c| boc(&c)),
            })
        }
        Call::GetTransactionBlockId(p) => {
            let hash = parse_hash(&p.id, "invalid hash")?;
            R::GetTransactionBlockId(response::GetTransactionBlockId {
                block_id: api
                    .transaction_block_id(&hash)
                    .await?
                    .as_ref()
                    .map(block_id_message),
            })
        }
        Call::GetKeyBlockProof(p) => R::GetKeyBlockProof(response::GetKeyBlockProof {
            key_block: api
                .key_block_proof(p.seqno)
                .await?
                .map(|k| response::KeyBlockProof {
                    proof: k.proof,
                    block_id: Some(block_id_message(&k.block_id)),
                }),
        }),
        Call::GetBlockProof(p) => {
            api.check_supported(Method::GetBlockProof)?;
            let id = parse_block_id(&p)?;
            R::GetBlockProof(response::BlockProof {
                proof: api.block_proof(&id).await?,
            })
        }
        Call::GetBlockData(p) => {
            api.check_supported(Method::GetBlockData)?;
            let id = parse_block_id(&p)?;
            R::GetBlockData(response::BlockData {
                data: api.block_data(&id).await?,
            })
        }
    })
}
