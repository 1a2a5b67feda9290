//! The node's side of the account and chain API (api.md, served by `regolith-api`): accounts, the config and
//! libraries from the newest applied states ([`NewestStates`], which the pipeline publishes after every
//! group), key blocks and their proofs from storage, and sendMessage through the node's external-message
//! relay; transactions and accounts by code hash from the transactions index ([`crate::tx_index`]). A node
//! without the index (`api.transactions_index: false`) answers its methods -32002 as stock does, except
//! getAccountsByCodeHash (nekoton's `check_connection`), answered from the newest states.
//!
//! `POST /v1/messages`, the node's own endpoint for a message BOC (binary or base64), is served beside the API
//! on the same server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Bytes as BodyBytes;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use bytes::Bytes;
use regolith_api::index::{IndexError, TransactionsIndex};
use regolith_api::{
    AccountLookup, ApiBackend, BackendError, BackendFeatures, BackendFuture, ConfigSnapshot,
    ExternalMessage, GenTimings, KeyBlockProof, McTimings, NodeStatus,
};
use regolith_state::{ChainStates, NewestStates};
use regolith_storage::Storage;
use tycho_types::cell::{Cell, CellBuilder, HashBytes};
use tycho_types::models::{BlockId, ShardStateUnsplit, StdAddr};

use crate::external_messages::{ExternalRelay, SubmitError};

/// What the API reads from a running node.
pub struct NodeApi {
    storage: Storage,
    newest: NewestStates,
    synced: Arc<AtomicBool>,
    relay: Arc<ExternalRelay>,
    index: Option<TransactionsIndex>,
}

impl NodeApi {
    /// The data source over the node's storage, its newest states, its "synced to the peers' tip" flag, its
    /// relay of external messages and its transactions index (`None`: the index methods answer -32002).
    pub fn new(
        storage: Storage,
        newest: NewestStates,
        synced: Arc<AtomicBool>,
        relay: Arc<ExternalRelay>,
        index: Option<TransactionsIndex>,
    ) -> Arc<Self> {
        Arc::new(Self {
            storage,
            newest,
            synced,
            relay,
            index,
        })
    }

    /// Runs `read` on the index on a blocking thread.
    async fn with_index<T: Send + 'static>(
        &self,
        read: impl FnOnce(&TransactionsIndex) -> Result<T, IndexError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let index = self.index.clone().ok_or(BackendError::NotSupported)?;
        tokio::task::spawn_blocking(move || read(&index))
            .await
            .map_err(|e| internal("the transactions index", e))?
            .map_err(|e| internal("the transactions index", e))
    }

    fn states(&self) -> Result<Arc<ChainStates>, BackendError> {
        self.newest.get().ok_or(BackendError::NotReady)
    }
}

fn internal(what: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Internal(format!("{what}: {e}"))
}

fn parse_state(root: &Cell, id: &BlockId) -> Result<ShardStateUnsplit, BackendError> {
    root.parse::<ShardStateUnsplit>()
        .map_err(|e| internal(&format!("the state of {id}"), e))
}

fn mc_state(states: &ChainStates) -> Result<ShardStateUnsplit, BackendError> {
    parse_state(&states.mc().root, &states.mc().id)
}

impl ApiBackend for NodeApi {
    fn features(&self) -> BackendFeatures {
        BackendFeatures {
            transactions_index: self.index.is_some(),
            block_data: false,
            accounts_by_code_hash: true,
        }
    }

    fn status(&self) -> BackendFuture<'_, NodeStatus> {
        Box::pin(async move {
            let timings = match self.newest.get_with_time() {
                Some((states, published)) => {
                    let mc = mc_state(&states)?;
                    // api.md §4: now − the block's time, as of when the block was applied.
                    Some(McTimings {
                        last_mc_block_seqno: states.mc().id.seqno,
                        last_mc_utime: mc.gen_utime,
                        mc_time_diff: i64::from(published) - i64::from(mc.gen_utime),
                        smallest_known_lt: match &self.index {
                            Some(index) => Some(
                                index
                                    .smallest_known_lt()
                                    .map_err(|e| internal("the transactions index", e))?,
                            ),
                            None => None,
                        },
                    })
                }
                None => None,
            };
            Ok(NodeStatus {
                ready: timings.is_some() && self.synced.load(Ordering::Acquire),
                timings,
            })
        })
    }

    fn blockchain_config(&self) -> BackendFuture<'_, Option<ConfigSnapshot>> {
        Box::pin(async move {
            let Some(states) = self.newest.get() else {
                return Ok(None);
            };
            let mc = mc_state(&states)?;
            let Some(extra) = mc
                .load_custom()
                .map_err(|e| internal("the mc state's extra", e))?
            else {
                return Err(internal("the mc state", "it has no mc extra"));
            };
            // The config of the newest key block is the mc state's: it changes only at key blocks.
            let seqno = match &extra.last_key_block {
                Some(key_block) => key_block.seqno,
                None => 0,
            };
            let config = CellBuilder::build_from(&extra.config)
                .map_err(|e| internal("encoding the config", e))?;
            Ok(Some(ConfigSnapshot {
                global_id: mc.global_id,
                seqno,
                config,
            }))
        })
    }

    fn latest_key_block(&self) -> BackendFuture<'_, Option<Bytes>> {
        Box::pin(async move {
            let Some(handle) = self
                .storage
                .handles()
                .find_last_key_block()
                .map_err(|e| internal("the key-block index", e))?
                .filter(|h| h.has_data() && h.id().seqno > 0)
            else {
                return Ok(None);
            };
            let data = self
                .storage
                .components()
                .load_block_data_raw(&handle)
                .await
                .map_err(|e| internal(&format!("key block {}", handle.id()), e))?;
            Ok(Some(Bytes::from(data)))
        })
    }

    fn account_state<'a>(&'a self, address: &'a StdAddr) -> BackendFuture<'a, AccountLookup> {
        Box::pin(async move {
            let states = self.states()?;
            let mc = mc_state(&states)?;
            // api.md §6: the shard whose range holds the account, in the newest mc block's tops; no such
            // shard is "not ready", as stock answers.
            let chain = states.chain_of(address).ok_or(BackendError::NotReady)?;
            let id = chain.id;
            let state = if id.is_masterchain() {
                mc.clone()
            } else {
                parse_state(&chain.root, &id)?
            };
            let accounts = state
                .load_accounts()
                .map_err(|e| internal(&format!("the accounts of {id}"), e))?;
            let entry = accounts
                .get(address.address)
                .map_err(|e| internal(&format!("account {address} in {id}"), e))?
                .map(|(_, account)| account);
            // api.md §6: the timings of the shard block or of the mc block, whichever has the larger lt.
            let timings = if state.gen_lt >= mc.gen_lt {
                GenTimings {
                    gen_lt: state.gen_lt,
                    gen_utime: state.gen_utime,
                }
            } else {
                GenTimings {
                    gen_lt: mc.gen_lt,
                    gen_utime: mc.gen_utime,
                }
            };
            Ok(AccountLookup { timings, entry })
        })
    }

    fn library_cell<'a>(&'a self, hash: &'a HashBytes) -> BackendFuture<'a, Option<Cell>> {
        Box::pin(async move {
            let states = self.states()?;
            let mc = mc_state(&states)?;
            let found = mc
                .libraries
                .get(hash)
                .map_err(|e| internal(&format!("library {hash}"), e))?;
            Ok(found.map(|descr| descr.lib))
        })
    }

    fn key_block_proof(&self, seqno: u32) -> BackendFuture<'_, Option<KeyBlockProof>> {
        Box::pin(async move {
            let Some(handle) = self
                .storage
                .handles()
                .load_key_block_handle(seqno)
                .map_err(|e| internal("the key-block index", e))?
                .filter(regolith_storage::BlockHandle::has_proof)
            else {
                return Ok(None);
            };
            let proof = self
                .storage
                .components()
                .load_block_proof_raw(&handle)
                .await
                .map_err(|e| internal(&format!("the proof of {}", handle.id()), e))?;
            Ok(Some(KeyBlockProof {
                block_id: *handle.id(),
                proof: Bytes::from(proof),
            }))
        })
    }

    fn block_proof<'a>(&'a self, _block_id: &'a BlockId) -> BackendFuture<'a, Option<Bytes>> {
        Box::pin(async { Err(BackendError::NotSupported) })
    }

    fn block_data<'a>(&'a self, _block_id: &'a BlockId) -> BackendFuture<'a, Option<Bytes>> {
        Box::pin(async { Err(BackendError::NotSupported) })
    }

    fn transactions<'a>(
        &'a self,
        account: &'a StdAddr,
        last_lt: Option<u64>,
        limit: u8,
    ) -> BackendFuture<'a, Vec<Bytes>> {
        let account = account.clone();
        Box::pin(self.with_index(move |index| index.transactions(&account, last_lt, limit)))
    }

    fn transaction<'a>(&'a self, hash: &'a HashBytes) -> BackendFuture<'a, Option<Bytes>> {
        let hash = *hash;
        Box::pin(self.with_index(move |index| index.transaction(&hash)))
    }

    fn dst_transaction<'a>(
        &'a self,
        message_hash: &'a HashBytes,
    ) -> BackendFuture<'a, Option<Bytes>> {
        let hash = *message_hash;
        Box::pin(self.with_index(move |index| index.dst_transaction(&hash)))
    }

    fn transaction_block_id<'a>(
        &'a self,
        hash: &'a HashBytes,
    ) -> BackendFuture<'a, Option<BlockId>> {
        let hash = *hash;
        Box::pin(self.with_index(move |index| index.transaction_block_id(&hash)))
    }

    fn accounts_by_code_hash<'a>(
        &'a self,
        code_hash: &'a HashBytes,
        continuation: Option<&'a StdAddr>,
        limit: u8,
    ) -> BackendFuture<'a, Vec<StdAddr>> {
        let (code_hash, continuation) = (*code_hash, continuation.cloned());
        Box::pin(async move {
            if self.index.is_some() {
                return self
                    .with_index(move |index| {
                        index.accounts_by_code_hash(&code_hash, continuation.as_ref(), limit)
                    })
                    .await;
            }
            let states = self.states()?;
            tokio::task::spawn_blocking(move || {
                scan_code_hash(&states, &code_hash, continuation.as_ref(), limit)
            })
            .await
            .map_err(|e| internal("the code-hash scan", e))?
        })
    }

    fn send_message(&self, message: ExternalMessage) -> BackendFuture<'_, ()> {
        Box::pin(async move {
            match self.relay.submit(&message.boc, "api").await {
                Ok(_) => Ok(()),
                Err(SubmitError::NotReady) => Err(BackendError::NotReady),
                Err(SubmitError::Invalid(reason)) => Err(BackendError::Internal(reason)),
            }
        })
    }
}

/// Active accounts whose code has `code_hash`, read from the newest states in the order of api.md §4
/// (workchain as an unsigned byte, then account id), strictly after `continuation`, at most `limit`: for a
/// node without the transactions index. It walks every account of the states: linear in the accounts.
fn scan_code_hash(
    states: &ChainStates,
    code_hash: &HashBytes,
    continuation: Option<&StdAddr>,
    limit: u8,
) -> Result<Vec<StdAddr>, BackendError> {
    let mut chains: Vec<&regolith_state::ChainState> =
        states.shards().iter().chain([states.mc()]).collect();
    chains.sort_by_key(|s| (s.id.shard.workchain() as u8, s.id.shard.prefix()));
    let after = continuation.map(|c| (c.workchain as u8, c.address));
    let mut found = Vec::new();
    for chain in chains {
        let workchain = chain.id.shard.workchain() as i8;
        let state = parse_state(&chain.root, &chain.id)?;
        let accounts = state
            .load_accounts()
            .map_err(|e| internal(&format!("the accounts of {}", chain.id), e))?;
        for item in accounts.iter() {
            let (id, _, shard_account) =
                item.map_err(|e| internal(&format!("the accounts of {}", chain.id), e))?;
            if after.is_some_and(|after| (workchain as u8, id) <= after) {
                continue;
            }
            let account = shard_account
                .load_account()
                .map_err(|e| internal(&format!("account {workchain}:{id}"), e))?;
            let Some(account) = account else { continue };
            let tycho_types::models::AccountState::Active(init) = &account.state else {
                continue;
            };
            if init.code.as_ref().map(|c| c.repr_hash()) != Some(code_hash) {
                continue;
            }
            found.push(StdAddr::new(workchain, id));
            if found.len() >= usize::from(limit) {
                return Ok(found);
            }
        }
    }
    Ok(found)
}

/// The route of `POST /v1/messages` (a message BOC, binary or base64; the answer is JSON), served beside the
/// API.
pub fn messages_route(relay: Arc<ExternalRelay>) -> axum::Router {
    axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move |body: BodyBytes| {
            let relay = relay.clone();
            async move {
                let (status, value) = crate::external_messages::answer(&relay, &body).await;
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                (
                    status,
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    value.to_string(),
                )
                    .into_response()
            }
        }),
    )
}
