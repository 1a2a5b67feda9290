//! The methods of api.md §4, apart from their wire form: each takes decoded parameters, asks the backend and
//! returns a typed result or an [`ApiError`]. The JSON-RPC and protobuf front ends only translate.

use std::sync::Arc;

use bytes::Bytes;
use tycho_types::cell::{Cell, CellBuilder, HashBytes};
use tycho_types::models::{BlockId, StdAddr};

use crate::backend::{
    ApiBackend, BackendFeatures, ConfigSnapshot, GenTimings, KeyBlockProof, McTimings,
};
use crate::error::ApiError;
use crate::ext_message::check_external_message;

/// The largest `limit` of the list methods (api.md §4, §10.5).
pub(crate) const MAX_LIMIT: u32 = 100;

/// Every method of api.md §4 this crate serves, by its wire name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Method {
    GetCapabilities,
    GetLatestKeyBlock,
    GetBlockchainConfig,
    GetStatus,
    GetTimings,
    GetContractState,
    SendMessage,
    GetLibraryCell,
    GetKeyBlockProof,
    GetBlockProof,
    GetBlockData,
    GetTransactionsList,
    GetTransaction,
    GetDstTransaction,
    GetAccountsByCodeHash,
    GetTransactionBlockId,
}

impl Method {
    /// Every method, in the order of the capabilities list.
    pub(crate) const ALL: [Method; 16] = [
        Method::GetCapabilities,
        Method::GetLatestKeyBlock,
        Method::GetBlockchainConfig,
        Method::GetStatus,
        Method::GetTimings,
        Method::GetContractState,
        Method::SendMessage,
        Method::GetLibraryCell,
        Method::GetKeyBlockProof,
        Method::GetBlockProof,
        Method::GetBlockData,
        Method::GetTransactionsList,
        Method::GetTransaction,
        Method::GetDstTransaction,
        Method::GetAccountsByCodeHash,
        Method::GetTransactionBlockId,
    ];

    /// The camelCase wire name (api.md §2: matched case-sensitively).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Method::GetCapabilities => "getCapabilities",
            Method::GetLatestKeyBlock => "getLatestKeyBlock",
            Method::GetBlockchainConfig => "getBlockchainConfig",
            Method::GetStatus => "getStatus",
            Method::GetTimings => "getTimings",
            Method::GetContractState => "getContractState",
            Method::SendMessage => "sendMessage",
            Method::GetLibraryCell => "getLibraryCell",
            Method::GetKeyBlockProof => "getKeyBlockProof",
            Method::GetBlockProof => "getBlockProof",
            Method::GetBlockData => "getBlockData",
            Method::GetTransactionsList => "getTransactionsList",
            Method::GetTransaction => "getTransaction",
            Method::GetDstTransaction => "getDstTransaction",
            Method::GetAccountsByCodeHash => "getAccountsByCodeHash",
            Method::GetTransactionBlockId => "getTransactionBlockId",
        }
    }

    /// The method with this wire name.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    fn needs_index(self) -> bool {
        matches!(
            self,
            Method::GetTransactionsList
                | Method::GetTransaction
                | Method::GetDstTransaction
                | Method::GetAccountsByCodeHash
                | Method::GetTransactionBlockId
        )
    }

    fn needs_block_data(self) -> bool {
        matches!(self, Method::GetBlockProof | Method::GetBlockData)
    }
}

/// The subscription entries of the JSON capabilities list (api.md §4 getCapabilities, group 4).
const SUBSCRIPTION_CAPABILITIES: [&str; 6] = [
    "subSubscribe",
    "subUnsubscribe",
    "subUnsubscribeAll",
    "subStatus",
    "subListSubscriptions",
    "stream",
];

/// Whether `name` is one of the subscription entries of the capabilities list (not served: -32002).
pub(crate) fn is_subscription(name: &str) -> bool {
    SUBSCRIPTION_CAPABILITIES.contains(&name)
}

/// A getContractState answer (api.md §4).
#[derive(Debug, Clone)]
pub(crate) enum ContractState {
    NotExists {
        timings: GenTimings,
    },
    Exists {
        /// The account cell without its leading tag bit (api.md §4, §10.3).
        account: Cell,
        timings: GenTimings,
        last_transaction_lt: u64,
        last_transaction_hash: HashBytes,
    },
    Unchanged {
        timings: GenTimings,
    },
}

/// The API over one backend: the methods of api.md §4 with their checks and limits.
pub(crate) struct Api {
    backend: Arc<dyn ApiBackend>,
    features: BackendFeatures,
}

impl Api {
    pub(crate) fn new(backend: Arc<dyn ApiBackend>) -> Self {
        let features = backend.features();
        Self { backend, features }
    }

    /// -32002 for a method this node does not serve (api.md §2, §6 Modes).
    pub(crate) fn check_supported(&self, method: Method) -> Result<(), ApiError> {
        let without_index =
            method == Method::GetAccountsByCodeHash && self.features.accounts_by_code_hash;
        if (method.needs_index() && !self.features.transactions_index && !without_index)
            || (method.needs_block_data() && !self.features.block_data)
        {
            return Err(ApiError::not_supported());
        }
        Ok(())
    }

    /// The capabilities list, in the order of api.md §4; the subscription entries only for JSON.
    pub(crate) fn capabilities(&self, with_subscriptions: bool) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = [
            Method::GetCapabilities,
            Method::GetLatestKeyBlock,
            Method::GetBlockchainConfig,
            Method::GetStatus,
            Method::GetTimings,
            Method::GetContractState,
            Method::SendMessage,
            Method::GetLibraryCell,
            Method::GetKeyBlockProof,
        ]
        .iter()
        .map(|m| m.name())
        .collect();
        if self.features.block_data {
            out.extend([Method::GetBlockProof.name(), Method::GetBlockData.name()]);
        }
        if self.features.accounts_by_code_hash && !self.features.transactions_index {
            out.push(Method::GetAccountsByCodeHash.name());
        }
        if self.features.transactions_index {
            out.extend(
                [
                    Method::GetTransactionsList,
                    Method::GetTransaction,
                    Method::GetDstTransaction,
                    Method::GetAccountsByCodeHash,
                    Method::GetTransactionBlockId,
                ]
                .iter()
                .map(|m| m.name()),
            );
        }
        if with_subscriptions {
            out.extend(SUBSCRIPTION_CAPABILITIES);
        }
        out
    }

    pub(crate) async fn latest_key_block(&self) -> Result<Bytes, ApiError> {
        self.backend
            .latest_key_block()
            .await?
            .ok_or_else(ApiError::not_ready)
    }

    pub(crate) async fn blockchain_config(&self) -> Result<ConfigSnapshot, ApiError> {
        self.backend
            .blockchain_config()
            .await?
            .ok_or_else(ApiError::not_ready)
    }

    pub(crate) async fn status(&self) -> Result<bool, ApiError> {
        Ok(self.backend.status().await?.ready)
    }

    /// -32001 while not ready (api.md §4 getTimings).
    pub(crate) async fn timings(&self) -> Result<McTimings, ApiError> {
        let status = self.backend.status().await?;
        match status.timings {
            Some(timings) if status.ready => Ok(timings),
            _ => Err(ApiError::not_ready()),
        }
    }

    /// api.md §4 getContractState: `unchanged` iff the entry exists and its `last_trans_lt` ≤ the given lt;
    /// `notExists` for no entry or `account_none`; otherwise the account cell without its tag bit.
    pub(crate) async fn contract_state(
        &self,
        address: &StdAddr,
        last_transaction_lt: Option<u64>,
    ) -> Result<ContractState, ApiError> {
        let lookup = self.backend.account_state(address).await?;
        let timings = lookup.timings;
        let Some(entry) = lookup.entry else {
            return Ok(ContractState::NotExists { timings });
        };
        if last_transaction_lt.is_some_and(|lt| entry.last_trans_lt <= lt) {
            return Ok(ContractState::Unchanged { timings });
        }
        let cell = entry.account.inner();
        let mut slice = cell
            .as_slice()
            .map_err(|e| ApiError::internal(format!("account cell: {e}")))?;
        // account_none$0 / account$1 (api.md §10.3: the `account` BOC is what follows the tag bit).
        let exists = slice
            .load_bit()
            .map_err(|e| ApiError::internal(format!("account cell: {e}")))?;
        if !exists {
            return Ok(ContractState::NotExists { timings });
        }
        let account = CellBuilder::build_from(slice)
            .map_err(|e| ApiError::internal(format!("account cell: {e}")))?;
        Ok(ContractState::Exists {
            account,
            timings,
            last_transaction_lt: entry.last_trans_lt,
            last_transaction_hash: entry.last_trans_hash,
        })
    }

    pub(crate) async fn library_cell(&self, hash: &HashBytes) -> Result<Option<Cell>, ApiError> {
        Ok(self.backend.library_cell(hash).await?)
    }

    pub(crate) async fn key_block_proof(
        &self,
        seqno: u32,
    ) -> Result<Option<KeyBlockProof>, ApiError> {
        Ok(self.backend.key_block_proof(seqno).await?)
    }

    pub(crate) async fn block_proof(&self, id: &BlockId) -> Result<Option<Bytes>, ApiError> {
        self.check_supported(Method::GetBlockProof)?;
        Ok(self.backend.block_proof(id).await?)
    }

    pub(crate) async fn block_data(&self, id: &BlockId) -> Result<Option<Bytes>, ApiError> {
        self.check_supported(Method::GetBlockData)?;
        Ok(self.backend.block_data(id).await?)
    }

    /// api.md §4 getTransactionsList: > 100 is -32004, 0 is `[]`.
    pub(crate) async fn transactions(
        &self,
        account: &StdAddr,
        last_lt: Option<u64>,
        limit: u32,
    ) -> Result<Vec<Bytes>, ApiError> {
        let Some(limit) = checked_limit(limit)? else {
            return Ok(Vec::new());
        };
        self.check_supported(Method::GetTransactionsList)?;
        let mut list = self.backend.transactions(account, last_lt, limit).await?;
        list.truncate(usize::from(limit));
        Ok(list)
    }

    pub(crate) async fn transaction(&self, hash: &HashBytes) -> Result<Option<Bytes>, ApiError> {
        self.check_supported(Method::GetTransaction)?;
        Ok(self.backend.transaction(hash).await?)
    }

    pub(crate) async fn dst_transaction(
        &self,
        message_hash: &HashBytes,
    ) -> Result<Option<Bytes>, ApiError> {
        self.check_supported(Method::GetDstTransaction)?;
        Ok(self.backend.dst_transaction(message_hash).await?)
    }

    pub(crate) async fn transaction_block_id(
        &self,
        hash: &HashBytes,
    ) -> Result<Option<BlockId>, ApiError> {
        self.check_supported(Method::GetTransactionBlockId)?;
        Ok(self.backend.transaction_block_id(hash).await?)
    }

    /// api.md §4 getAccountsByCodeHash: the limits of getTransactionsList; `continuation` is exclusive.
    pub(crate) async fn accounts_by_code_hash(
        &self,
        code_hash: &HashBytes,
        continuation: Option<&StdAddr>,
        limit: u32,
    ) -> Result<Vec<StdAddr>, ApiError> {
        let Some(limit) = checked_limit(limit)? else {
            return Ok(Vec::new());
        };
        self.check_supported(Method::GetAccountsByCodeHash)?;
        let mut list = self
            .backend
            .accounts_by_code_hash(code_hash, continuation, limit)
            .await?;
        list.truncate(usize::from(limit));
        Ok(list)
    }

    /// api.md §4 sendMessage step 2 and 3: checks the message, hands it to the node, does not wait.
    pub(crate) async fn send_message(&self, boc: Bytes) -> Result<(), ApiError> {
        let message = check_external_message(boc)?;
        tracing::debug!(hash = %message.hash, dst = %message.dst, "external message accepted");
        Ok(self.backend.send_message(message).await?)
    }
}

/// -32004 above 100: the protobuf variant checks `limit` before any other parameter (api.md §7).
pub(crate) fn check_limit_first(limit: u32) -> Result<(), ApiError> {
    checked_limit(limit).map(|_| ())
}

/// `Some(limit)` for 1..=100, `None` for 0, -32004 above 100 (api.md §4, §10.5).
fn checked_limit(limit: u32) -> Result<Option<u8>, ApiError> {
    if limit > MAX_LIMIT {
        return Err(ApiError::limit_too_large());
    }
    Ok((limit > 0).then_some(limit as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_case_sensitively() {
        for method in Method::ALL {
            assert_eq!(Method::from_name(method.name()), Some(method));
        }
        assert_eq!(Method::from_name("GetStatus"), None);
        assert_eq!(Method::from_name("getstatus"), None);
    }

    #[test]
    fn limits() {
        assert_eq!(checked_limit(0), Ok(None));
        assert_eq!(checked_limit(1), Ok(Some(1)));
        assert_eq!(checked_limit(100), Ok(Some(100)));
        assert_eq!(checked_limit(101), Err(ApiError::limit_too_large()));
    }
}
