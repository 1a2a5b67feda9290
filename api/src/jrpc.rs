//! The JSON-RPC front end (api.md §2–§4): the envelope and its errors, the parameters and results of every
//! method in the JSON encodings of §3. Every answer is HTTP 200 with `application/json` (api.md §2, §10.7).

use std::time::Instant;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tycho_types::cell::HashBytes;
use tycho_types::models::{BlockId, StdAddr};

use crate::backend::{GenTimings, McTimings};
use crate::encoding::{
    base64_encode, deserialize_block_id, deserialize_message_boc, deserialize_optional_lt,
    serialize_block_id, serialize_u64_string,
};
use crate::error::ApiError;
use crate::methods::{Api, ContractState, Method};

const JSONRPC_VERSION: &str = "2.0";
const PROTOCOL: &str = "jrpc";

/// Handles one JSON-RPC request body and returns the JSON answer.
pub(crate) async fn handle(api: &Api, body: Result<Bytes, String>) -> Bytes {
    let started = Instant::now();
    let (id, method, outcome) = match body {
        Ok(body) => answer(api, &body).await,
        // api.md §2: an unreadable body is -32700 with a null id.
        Err(reason) => (None, None, Err(ApiError::parse(reason))),
    };
    let method_label = method.map_or(crate::metrics::NO_METHOD, Method::name);
    let (bytes, code) = match outcome {
        Ok((id, result)) => (result_bytes(id, &result), None),
        Err(e) => (error_bytes(id, &e), Some(e.code)),
    };
    if let Some(code) = code {
        tracing::debug!(method = method_label, code, "JSON-RPC error answer");
    }
    crate::metrics::record(PROTOCOL, method_label, code, started.elapsed());
    bytes
}

/// The envelope (api.md §2): all four fields required, `id` an i64 (§10.4: a string or a float is -32600),
/// `params` kept raw until the method is known; unknown top-level keys are ignored.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: std::borrow::Cow<'a, str>,
    id: i64,
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    params: &'a RawValue,
}

/// The id when known, the method when known, and the id with the result or the error.
type Answer = (
    Option<i64>,
    Option<Method>,
    Result<(i64, Box<RawValue>), ApiError>,
);

async fn answer(api: &Api, body: &[u8]) -> Answer {
    let envelope: Envelope<'_> = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(e) => {
            // api.md §2: syntax and EOF errors are -32700, a wrong shape (an array included) -32600, both
            // with a null id.
            let error = match e.classify() {
                serde_json::error::Category::Data => ApiError::invalid_request(e.to_string()),
                _ => ApiError::parse(e.to_string()),
            };
            return (None, None, Err(error));
        }
    };
    let id = Some(envelope.id);
    if envelope.jsonrpc != JSONRPC_VERSION {
        // api.md §2: the typo is the wire's.
        return (
            id,
            None,
            Err(ApiError::invalid_request("invalid jronrpc version")),
        );
    }
    let Some(method) = Method::from_name(&envelope.method) else {
        // The subscription methods are listed by getCapabilities (api.md §4) but not served here.
        if crate::methods::is_subscription(&envelope.method) {
            return (id, None, Err(ApiError::not_supported()));
        }
        return (id, None, Err(ApiError::unknown_method()));
    };
    let result = call(api, method, envelope.params.get()).await;
    (id, Some(method), result.map(|r| (envelope.id, r)))
}

/// Parses `params` for `method` (-32602 with serde's text on failure, api.md §2) and runs it.
fn params<'de, T: Deserialize<'de>>(raw: &'de str) -> Result<T, ApiError> {
    serde_json::from_str(raw).map_err(|e| ApiError::invalid_params(e.to_string()))
}

fn to_raw<T: Serialize>(value: &T) -> Result<Box<RawValue>, ApiError> {
    serde_json::value::to_raw_value(value).map_err(ApiError::bad_response)
}

async fn call(api: &Api, method: Method, raw: &str) -> Result<Box<RawValue>, ApiError> {
    match method {
        Method::GetCapabilities => {
            params::<EmptyParams>(raw)?;
            to_raw(&api.capabilities(true))
        }
        Method::GetLatestKeyBlock => {
            params::<EmptyParams>(raw)?;
            let block = api.latest_key_block().await?;
            to_raw(&LatestKeyBlock {
                block: base64_encode(&block),
            })
        }
        Method::GetBlockchainConfig => {
            params::<EmptyParams>(raw)?;
            let config = api.blockchain_config().await?;
            // api.md §10.8: the whole config cell (address + params reference), `seqno` the key block's.
            to_raw(&BlockchainConfig {
                global_id: config.global_id,
                seqno: config.seqno,
                config: base64_encode(&tycho_types::boc::Boc::encode(&config.config)),
            })
        }
        Method::GetStatus => {
            params::<EmptyParams>(raw)?;
            to_raw(&Status {
                ready: api.status().await?,
            })
        }
        Method::GetTimings => {
            params::<EmptyParams>(raw)?;
            to_raw(&Timings::from(api.timings().await?))
        }
        Method::GetContractState => {
            let p: ContractStateParams = params(raw)?;
            let state = api
                .contract_state(&p.address, p.last_transaction_lt)
                .await?;
            to_raw(&ContractStateResult::from(&state))
        }
        Method::SendMessage => {
            let p: SendMessageParams = params(raw)?;
            api.send_message(p.message).await?;
            to_raw(&())
        }
        Method::GetLibraryCell => {
            let p: LibraryCellParams = params(raw)?;
            let cell = api.library_cell(&p.hash).await?;
            to_raw(&LibraryCell {
                cell: cell.map(|c| base64_encode(&tycho_types::boc::Boc::encode(&c))),
            })
        }
        Method::GetKeyBlockProof => {
            let p: KeyBlockProofParams = params(raw)?;
            match api.key_block_proof(p.seqno).await? {
                Some(proof) => to_raw(&KeyBlockProofResult {
                    block_id: proof.block_id,
                    proof: base64_encode(&proof.proof),
                }),
                // api.md §4: `{"proof":null}` with no `blockId` key.
                None => to_raw(&NoProof { proof: () }),
            }
        }
        Method::GetBlockProof => {
            api.check_supported(method)?;
            let p: BlockParams = params(raw)?;
            let proof = api.block_proof(&p.block_id).await?;
            to_raw(&BlockProof {
                proof: proof.map(|b| base64_encode(&b)),
            })
        }
        Method::GetBlockData => {
            api.check_supported(method)?;
            let p: BlockParams = params(raw)?;
            let data = api.block_data(&p.block_id).await?;
            to_raw(&BlockData {
                data: data.map(|b| base64_encode(&b)),
            })
        }
        Method::GetTransactionsList => {
            let p: TransactionsListParams = params(raw)?;
            let list = api
                .transactions(&p.account, p.last_transaction_lt, u32::from(p.limit))
                .await?;
            to_raw(&list.iter().map(|b| base64_encode(b)).collect::<Vec<_>>())
        }
        Method::GetTransaction => {
            let p: TransactionParams = params(raw)?;
            let tx = api.transaction(&p.id).await?;
            to_raw(&tx.map(|b| base64_encode(&b)))
        }
        Method::GetDstTransaction => {
            let p: DstTransactionParams = params(raw)?;
            let tx = api.dst_transaction(&p.message_hash).await?;
            to_raw(&tx.map(|b| base64_encode(&b)))
        }
        Method::GetTransactionBlockId => {
            let p: TransactionParams = params(raw)?;
            let id = api.transaction_block_id(&p.id).await?;
            to_raw(&id.map(|block_id| TransactionBlockId { block_id }))
        }
        Method::GetAccountsByCodeHash => {
            let p: AccountsByCodeHashParams = params(raw)?;
            let list = api
                .accounts_by_code_hash(&p.code_hash, p.continuation.as_ref(), u32::from(p.limit))
                .await?;
            to_raw(&list)
        }
    }
}

fn result_bytes(id: i64, result: &RawValue) -> Bytes {
    #[derive(Serialize)]
    struct Ok<'a> {
        jsonrpc: &'static str,
        id: i64,
        result: &'a RawValue,
    }
    match serde_json::to_vec(&Ok {
        jsonrpc: JSONRPC_VERSION,
        id,
        result,
    }) {
        Ok(bytes) => bytes.into(),
        Err(e) => error_bytes(Some(id), &ApiError::bad_response(e)),
    }
}

/// `{"jsonrpc":"2.0","id":<id or null>,"error":{"code":…,"message":…}}`, no `data` (api.md §2).
fn error_bytes(id: Option<i64>, error: &ApiError) -> Bytes {
    #[derive(Serialize)]
    struct ErrorBody<'a> {
        code: i32,
        message: &'a str,
    }
    #[derive(Serialize)]
    struct Failure<'a> {
        jsonrpc: &'static str,
        id: Option<i64>,
        error: ErrorBody<'a>,
    }
    let failure = Failure {
        jsonrpc: JSONRPC_VERSION,
        id,
        error: ErrorBody {
            code: error.code,
            message: &error.message,
        },
    };
    // Serialising plain integers and a string cannot fail; should it, the client still gets JSON.
    serde_json::to_vec(&failure)
        .map(Bytes::from)
        .unwrap_or_else(|_| {
            Bytes::from_static(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32006,"message":"failed to serialize response"}}"#)
        })
}

// === Parameters (api.md §4; unknown keys are ignored, §10.4) ===

/// `null` or an object (api.md §2 parameterless methods, §10.4: `params: null` must be accepted).
struct EmptyParams;

impl<'de> Deserialize<'de> for EmptyParams {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Empty {}
        <Option<Empty>>::deserialize(d).map(|_| Self)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContractStateParams {
    address: StdAddr,
    // api.md §4: nekoton's snake_case `last_transaction_lt` is an unknown key, ignored like any other.
    #[serde(default, deserialize_with = "deserialize_optional_lt")]
    last_transaction_lt: Option<u64>,
}

#[derive(Deserialize)]
struct SendMessageParams {
    #[serde(deserialize_with = "deserialize_message_boc")]
    message: Bytes,
}

#[derive(Deserialize)]
struct LibraryCellParams {
    hash: HashBytes,
}

/// api.md §4: `seqno` is a number (the docs' string is wrong, §9).
#[derive(Deserialize)]
struct KeyBlockProofParams {
    seqno: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockParams {
    #[serde(deserialize_with = "deserialize_block_id")]
    block_id: BlockId,
}

/// api.md §4, §10.5: `limit` is a u8, so above 255 is -32602 and 101..=255 is -32004; the bound is
/// inclusive and the list newest first (the backend's contract).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TransactionsListParams {
    account: StdAddr,
    limit: u8,
    #[serde(default, deserialize_with = "deserialize_optional_lt")]
    last_transaction_lt: Option<u64>,
}

/// api.md §10.6: hashes are hex in either case (tycho-types' serde form), never base64.
#[derive(Deserialize)]
struct TransactionParams {
    id: HashBytes,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DstTransactionParams {
    message_hash: HashBytes,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AccountsByCodeHashParams {
    code_hash: HashBytes,
    limit: u8,
    #[serde(default)]
    continuation: Option<StdAddr>,
}

// === Results (api.md §4; key order as there) ===

#[derive(Serialize)]
struct LatestKeyBlock {
    block: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BlockchainConfig {
    global_id: i32,
    seqno: u32,
    config: String,
}

#[derive(Serialize)]
struct Status {
    ready: bool,
}

/// api.md §10.2: `smallestKnownLt` is a number here, unlike every other lt.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Timings {
    last_mc_block_seqno: u32,
    last_mc_utime: u32,
    mc_time_diff: i64,
    smallest_known_lt: Option<u64>,
}

impl From<McTimings> for Timings {
    fn from(t: McTimings) -> Self {
        Self {
            last_mc_block_seqno: t.last_mc_block_seqno,
            last_mc_utime: t.last_mc_utime,
            mc_time_diff: t.mc_time_diff,
            smallest_known_lt: t.smallest_known_lt,
        }
    }
}

/// api.md §4 `TM`, §10.2: `genLt` a string, `genUtime` a number.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TimingsJson {
    #[serde(serialize_with = "serialize_u64_string")]
    gen_lt: u64,
    gen_utime: u32,
}

impl From<GenTimings> for TimingsJson {
    fn from(t: GenTimings) -> Self {
        Self {
            gen_lt: t.gen_lt,
            gen_utime: t.gen_utime,
        }
    }
}

/// api.md §10.2, §10.6: `lt` a string, `hash` lowercase hex (tycho-types' serde form of a hash).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LastTransactionId {
    is_exact: bool,
    #[serde(serialize_with = "serialize_u64_string")]
    lt: u64,
    hash: HashBytes,
}

/// api.md §4, §10.2: `type` is the first key, `timings` is in every variant.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum ContractStateResult {
    NotExists {
        timings: TimingsJson,
    },
    #[serde(rename_all = "camelCase")]
    Exists {
        account: String,
        timings: TimingsJson,
        last_transaction_id: LastTransactionId,
    },
    Unchanged {
        timings: TimingsJson,
    },
}

impl From<&ContractState> for ContractStateResult {
    fn from(state: &ContractState) -> Self {
        match state {
            ContractState::NotExists { timings } => Self::NotExists {
                timings: (*timings).into(),
            },
            ContractState::Exists {
                account,
                timings,
                last_transaction_lt,
                last_transaction_hash,
            } => Self::Exists {
                account: base64_encode(&tycho_types::boc::Boc::encode(account)),
                timings: (*timings).into(),
                last_transaction_id: LastTransactionId {
                    is_exact: true,
                    lt: *last_transaction_lt,
                    hash: *last_transaction_hash,
                },
            },
            ContractState::Unchanged { timings } => Self::Unchanged {
                timings: (*timings).into(),
            },
        }
    }
}

#[derive(Serialize)]
struct LibraryCell {
    cell: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KeyBlockProofResult {
    #[serde(serialize_with = "serialize_block_id")]
    block_id: BlockId,
    proof: String,
}

#[derive(Serialize)]
struct NoProof {
    proof: (),
}

#[derive(Serialize)]
struct BlockProof {
    proof: Option<String>,
}

#[derive(Serialize)]
struct BlockData {
    data: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TransactionBlockId {
    #[serde(serialize_with = "serialize_block_id")]
    block_id: BlockId,
}
