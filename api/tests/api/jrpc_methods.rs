//! Every JSON-RPC method of api.md §4 against the real chain, with the encodings of §3 and the details of §10.

use std::net::SocketAddr;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use hyper::http::Method;
use serde_json::{json, Value};
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellBuilder, HashBytes};
use tycho_types::models::{Account, BlockchainConfig, StdAddr, Transaction};

use crate::chain_backend::{chain, ChainBackend};
use crate::client::{call_error, result, send, Wire, BOTH};
use crate::start;

fn cell_of(base64: &Value) -> Cell {
    let bytes = STANDARD.decode(base64.as_str().unwrap()).unwrap();
    Boc::decode(bytes).unwrap()
}

fn b64(bytes: &[u8]) -> Value {
    Value::String(STANDARD.encode(bytes))
}

/// The raw text of a call's answer (for key order).
async fn raw(addr: SocketAddr, method: &str, params: Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let reply = send(
        addr,
        Wire::H2c,
        Method::POST,
        "/",
        Some("application/json"),
        Bytes::from(body),
    )
    .await;
    String::from_utf8(reply.body.to_vec()).unwrap()
}

#[tokio::test]
async fn get_contract_state_gives_every_account_with_its_balance_and_last_transaction() {
    let chain = chain();
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    let mut checked = 0;
    let mut funded = 0;
    for address in chain.addresses() {
        let state = chain.state_of(&address).unwrap();
        let (depth_balance, entry) = state.accounts.get(address.address).unwrap().unwrap();
        let timings =
            json!({"genLt": state.state.gen_lt.to_string(), "genUtime": state.state.gen_utime});
        for wire in BOTH {
            let got = result(
                addr,
                wire,
                "getContractState",
                json!({"address": address.to_string()}),
            )
            .await;
            assert_eq!(got["type"], "exists", "{address}: {got}");
            // api.md §10.2: timings in every variant, genLt a string, genUtime a number.
            assert_eq!(got["timings"], timings);
            assert_eq!(
                got["lastTransactionId"],
                json!({"isExact": true, "lt": entry.last_trans_lt.to_string(), "hash": entry.last_trans_hash.to_string()})
            );
            // api.md §10.3: the account cell without its tag bit; with the bit back it is the state's cell.
            let account_cell = cell_of(&got["account"]);
            let mut tagged = CellBuilder::new();
            tagged.store_bit_one().unwrap();
            tagged
                .store_slice(account_cell.as_slice().unwrap())
                .unwrap();
            assert_eq!(
                tagged.build().unwrap().repr_hash(),
                entry.account.inner().repr_hash(),
                "{address}"
            );
            let account = account_cell.parse::<Account>().unwrap();
            assert_eq!(account.balance, depth_balance.balance, "{address}");
            if account.balance.tokens.into_inner() > 0 {
                funded += 1;
            }
            assert_eq!(
                account.last_trans_lt,
                entry.last_trans_lt.max(account.last_trans_lt)
            );
        }
        // The newest indexed transaction of the account is the one the state names.
        if let Some(txs) = chain
            .transactions
            .get(&(address.workchain, address.address))
        {
            let (lt, newest) = txs.iter().next_back().unwrap();
            assert_eq!(
                (newest.hash, *lt),
                (entry.last_trans_hash, entry.last_trans_lt)
            );
            checked += 1;
        }

        // `unchanged` iff last_trans_lt ≤ lastTransactionLt; nekoton's snake_case key is ignored.
        let lt = entry.last_trans_lt;
        let unchanged = result(
            addr,
            Wire::Http1,
            "getContractState",
            json!({"address": address.to_string(), "lastTransactionLt": lt.to_string()}),
        )
        .await;
        assert_eq!(unchanged, json!({"type": "unchanged", "timings": timings}));
        let later = result(
            addr,
            Wire::Http1,
            "getContractState",
            json!({"address": address.to_string(), "lastTransactionLt": (lt + 1000).to_string()}),
        )
        .await;
        assert_eq!(later["type"], "unchanged");
        if lt > 0 {
            let older = result(
                addr,
                Wire::Http1,
                "getContractState",
                json!({"address": address.to_string(), "lastTransactionLt": (lt - 1).to_string()}),
            )
            .await;
            assert_eq!(older["type"], "exists");
        }
        let snake = result(
            addr,
            Wire::Http1,
            "getContractState",
            json!({"address": address.to_string(), "last_transaction_lt": lt.to_string()}),
        )
        .await;
        assert_eq!(snake["type"], "exists");
    }
    assert!(checked >= 12, "only {checked} accounts with transactions");
    assert!(funded >= 2 * 12, "only {funded} funded answers");

    // `type` is the first key of each shape (api.md §4).
    let some = chain.addresses()[0].to_string();
    let text = raw(addr, "getContractState", json!({"address": some})).await;
    assert!(
        text.contains(r#""result":{"type":"exists","account":""#),
        "{text}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn get_contract_state_of_a_missing_account_is_not_exists_with_timings() {
    let chain = chain();
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    for workchain in [0i8, -1] {
        let address = StdAddr::new(workchain, HashBytes([0x11; 32]));
        assert!(chain.entry(&address).is_none());
        let state = chain.state_of(&address).unwrap();
        let text = raw(
            addr,
            "getContractState",
            json!({"address": address.to_string()}),
        )
        .await;
        assert_eq!(
            text,
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{"type":"notExists","timings":{{"genLt":"{}","genUtime":{}}}}}}}"#,
                state.state.gen_lt, state.state.gen_utime
            )
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn get_contract_state_rejects_bad_parameters() {
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    let good = chain().addresses()[0].to_string();
    for wire in BOTH {
        for params in [
            json!({"address": "0:zz"}),
            json!({"address": "0:1234"}),
            json!({"address": "EQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAM9c"}),
            json!({"address": 5}),
            json!({}),
            json!(null),
            json!({"address": good, "lastTransactionLt": 100}),
            json!({"address": good, "lastTransactionLt": "x"}),
        ] {
            let (code, message) = call_error(addr, wire, "getContractState", params.clone()).await;
            assert_eq!(code, -32602, "{params}: {message}");
        }
        // Quirk of api.md §4: a workchain with no shard is -32001.
        let other = StdAddr::new(5, HashBytes([1; 32])).to_string();
        let (code, message) =
            call_error(addr, wire, "getContractState", json!({"address": other})).await;
        assert_eq!((code, message.as_str()), (-32001, "not ready"));
    }
    server.shutdown().await;
}

#[tokio::test]
async fn get_transactions_list_is_newest_first_with_an_inclusive_bound_and_pages_backwards() {
    let chain = chain();
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    let ((workchain, id), txs) = chain
        .transactions
        .iter()
        .max_by_key(|(_, txs)| txs.len())
        .unwrap();
    assert!(txs.len() >= 4, "{} transactions", txs.len());
    let account = StdAddr::new(*workchain, *id).to_string();
    let newest_first: Vec<Value> = txs.values().rev().map(|t| b64(&t.boc)).collect();
    for wire in BOTH {
        let all = result(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": account, "limit": 100, "lastTransactionLt": null}),
        )
        .await;
        assert_eq!(all, Value::Array(newest_first.clone()));
        let absent = result(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": account, "limit": 100}),
        )
        .await;
        assert_eq!(absent, all);
        // The bound is inclusive (≤ lt).
        let second: Vec<_> = txs.values().rev().collect();
        let bounded = result(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": account, "limit": 2, "lastTransactionLt": second[1].lt.to_string()}),
        )
        .await;
        assert_eq!(bounded, Value::Array(newest_first[1..3].to_vec()));
        assert_eq!(
            result(
                addr,
                wire,
                "getTransactionsList",
                json!({"account": account, "limit": 0})
            )
            .await,
            json!([])
        );
    }
    // nekoton pages backwards through prev_trans_lt.
    let mut paged = Vec::new();
    let mut bound: Option<u64> = None;
    loop {
        let page = result(addr, Wire::H2c, "getTransactionsList",
            json!({"account": account, "limit": 1, "lastTransactionLt": bound.map(|b| b.to_string())})).await;
        let page = page.as_array().unwrap().clone();
        assert_eq!(page.len(), 1);
        let tx = cell_of(&page[0]).parse::<Transaction>().unwrap();
        paged.push(page[0].clone());
        if tx.prev_trans_lt == 0 || paged.len() == txs.len() {
            break;
        }
        bound = Some(tx.prev_trans_lt);
    }
    assert_eq!(paged, newest_first);

    let unknown = StdAddr::new(0, HashBytes([0x22; 32])).to_string();
    assert_eq!(
        result(
            addr,
            Wire::Http1,
            "getTransactionsList",
            json!({"account": unknown, "limit": 10})
        )
        .await,
        json!([])
    );
    for wire in BOTH {
        let (code, message) = call_error(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": account, "limit": 101}),
        )
        .await;
        assert_eq!((code, message.as_str()), (-32004, "limit is too large"));
        let (code, _) = call_error(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": account, "limit": 255}),
        )
        .await;
        assert_eq!(code, -32004);
        let (code, _) = call_error(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": account, "limit": 256}),
        )
        .await;
        assert_eq!(code, -32602);
        let (code, _) = call_error(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": account, "limit": -1}),
        )
        .await;
        assert_eq!(code, -32602);
        let (code, _) = call_error(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": account, "limit": 5, "lastTransactionLt": 5}),
        )
        .await;
        assert_eq!(code, -32602);
        let (code, _) = call_error(
            addr,
            wire,
            "getTransactionsList",
            json!({"account": "0:00", "limit": 5}),
        )
        .await;
        assert_eq!(code, -32602);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn transactions_are_found_by_hash_and_by_inbound_message_with_their_block() {
    let chain = chain();
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    let mut with_in_msg = 0;
    for txs in chain.transactions.values() {
        for tx in txs.values() {
            let hash = tx.hash.to_string();
            assert_eq!(
                result(addr, Wire::H2c, "getTransaction", json!({"id": hash})).await,
                b64(&tx.boc)
            );
            // Hashes in either case (api.md §3).
            assert_eq!(
                result(
                    addr,
                    Wire::Http1,
                    "getTransaction",
                    json!({"id": hash.to_uppercase()})
                )
                .await,
                b64(&tx.boc)
            );
            assert_eq!(
                result(
                    addr,
                    Wire::H2c,
                    "getTransactionBlockId",
                    json!({"id": hash})
                )
                .await,
                json!({"blockId": tx.block.to_string()})
            );
            if let Some(in_msg) = tx.in_msg_hash {
                with_in_msg += 1;
                let found = result(
                    addr,
                    Wire::H2c,
                    "getDstTransaction",
                    json!({"messageHash": in_msg.to_string()}),
                )
                .await;
                assert_eq!(found, b64(&tx.boc));
            }
        }
    }
    assert!(with_in_msg > 0);
    let unknown = HashBytes([0x33; 32]).to_string();
    for wire in BOTH {
        assert_eq!(
            result(addr, wire, "getTransaction", json!({"id": unknown})).await,
            Value::Null
        );
        assert_eq!(
            result(
                addr,
                wire,
                "getDstTransaction",
                json!({"messageHash": unknown})
            )
            .await,
            Value::Null
        );
        assert_eq!(
            result(addr, wire, "getTransactionBlockId", json!({"id": unknown})).await,
            Value::Null
        );
        let (code, _) = call_error(addr, wire, "getTransaction", json!({"id": "abcd"})).await;
        assert_eq!(code, -32602);
        let (code, _) = call_error(addr, wire, "getDstTransaction", json!({"id": unknown})).await;
        assert_eq!(code, -32602);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn accounts_by_code_hash_are_ordered_by_unsigned_workchain_and_page_exclusively() {
    let chain = chain();
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    let (code_hash, expected) = chain
        .code_hashes
        .iter()
        .max_by_key(|(_, list)| list.len())
        .unwrap();
    let expected: Vec<Value> = expected
        .iter()
        .map(|a| Value::String(a.to_string()))
        .collect();
    // The generated wallets of the masterchain and the shards share their code: workchain 0 comes first.
    assert!(expected[0].as_str().unwrap().starts_with("0:"));
    assert!(expected
        .last()
        .unwrap()
        .as_str()
        .unwrap()
        .starts_with("-1:"));
    let all = result(
        addr,
        Wire::H2c,
        "getAccountsByCodeHash",
        json!({"codeHash": code_hash.to_string(), "limit": 100, "continuation": null}),
    )
    .await;
    assert_eq!(all, Value::Array(expected.clone()));
    let mut paged = Vec::new();
    let mut continuation = Value::Null;
    loop {
        let page = result(
            addr,
            Wire::Http1,
            "getAccountsByCodeHash",
            json!({"codeHash": code_hash.to_string(), "limit": 5, "continuation": continuation}),
        )
        .await;
        let page = page.as_array().unwrap().clone();
        if page.is_empty() {
            break;
        }
        continuation = page.last().unwrap().clone();
        paged.extend(page);
    }
    assert_eq!(paged, expected);
    let unknown = HashBytes([0x44; 32]).to_string();
    assert_eq!(
        result(
            addr,
            Wire::H2c,
            "getAccountsByCodeHash",
            json!({"codeHash": unknown, "limit": 1})
        )
        .await,
        json!([])
    );
    assert_eq!(
        result(
            addr,
            Wire::H2c,
            "getAccountsByCodeHash",
            json!({"codeHash": unknown, "limit": 0})
        )
        .await,
        json!([])
    );
    let (code, message) = call_error(
        addr,
        Wire::H2c,
        "getAccountsByCodeHash",
        json!({"codeHash": unknown, "limit": 101}),
    )
    .await;
    assert_eq!((code, message.as_str()), (-32004, "limit is too large"));
    let (code, _) = call_error(
        addr,
        Wire::H2c,
        "getAccountsByCodeHash",
        json!({"codeHash": unknown, "limit": 1, "continuation": "0:12"}),
    )
    .await;
    assert_eq!(code, -32602);
    server.shutdown().await;
}

#[tokio::test]
async fn config_key_block_proofs_timings_and_capabilities() {
    let chain = chain();
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    let (last_key_seqno, last_key_id) = chain.key_blocks.iter().next_back().unwrap();
    for wire in BOTH {
        let config = result(addr, wire, "getBlockchainConfig", Value::Null).await;
        assert_eq!(config["globalId"], chain.global_id);
        assert_eq!(config["seqno"], *last_key_seqno);
        let cell = cell_of(&config["config"]);
        assert_eq!(cell.repr_hash(), chain.config.repr_hash());
        // The address-plus-reference layout with params 8, 15 and 34 (api.md §10.8).
        let parsed = cell.parse::<BlockchainConfig>().unwrap();
        for param in [8, 15, 34] {
            assert!(parsed.params.contains_raw(param).unwrap(), "param {param}");
        }

        let block = result(addr, wire, "getLatestKeyBlock", json!({})).await;
        assert_eq!(block, json!({"block": b64(&chain.blocks[last_key_id].0)}));

        let proof = result(
            addr,
            wire,
            "getKeyBlockProof",
            json!({"seqno": last_key_seqno}),
        )
        .await;
        assert_eq!(
            proof,
            json!({"blockId": last_key_id.to_string(), "proof": b64(&chain.blocks[last_key_id].1)})
        );
        // Not a key block: `{"proof":null}` without `blockId`.
        let text = raw(
            addr,
            "getKeyBlockProof",
            json!({"seqno": last_key_seqno - 1}),
        )
        .await;
        assert_eq!(text, r#"{"jsonrpc":"2.0","id":1,"result":{"proof":null}}"#);
        let (code, _) = call_error(
            addr,
            wire,
            "getKeyBlockProof",
            json!({"seqno": last_key_seqno.to_string()}),
        )
        .await;
        assert_eq!(code, -32602);

        let timings = raw(addr, "getTimings", Value::Null).await;
        assert_eq!(
            timings,
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{"lastMcBlockSeqno":{},"lastMcUtime":{},"mcTimeDiff":7,"smallestKnownLt":0}}}}"#,
                chain.last_mc.seqno, chain.last_mc_utime
            )
        );
        assert_eq!(
            result(
                addr,
                wire,
                "getLibraryCell",
                json!({"hash": HashBytes([1; 32]).to_string()})
            )
            .await,
            json!({"cell": null})
        );

        let (id, (data, proof)) = chain.blocks.iter().next().unwrap();
        let id = id.to_string();
        assert_eq!(
            result(addr, wire, "getBlockProof", json!({"blockId": id})).await,
            json!({"proof": b64(proof)})
        );
        assert_eq!(
            result(addr, wire, "getBlockData", json!({"blockId": id})).await,
            json!({"data": b64(data)})
        );
        let (code, _) = call_error(addr, wire, "getBlockData", json!({"blockId": "0:80:1"})).await;
        assert_eq!(code, -32602);

        let capabilities = result(addr, wire, "getCapabilities", Value::Null).await;
        assert_eq!(
            capabilities,
            json!([
                "getCapabilities",
                "getLatestKeyBlock",
                "getBlockchainConfig",
                "getStatus",
                "getTimings",
                "getContractState",
                "sendMessage",
                "getLibraryCell",
                "getKeyBlockProof",
                "getBlockProof",
                "getBlockData",
                "getTransactionsList",
                "getTransaction",
                "getDstTransaction",
                "getAccountsByCodeHash",
                "getTransactionBlockId",
                "subSubscribe",
                "subUnsubscribe",
                "subUnsubscribeAll",
                "subStatus",
                "subListSubscriptions",
                "stream"
            ])
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn send_message_checks_in_order_and_hands_a_valid_message_to_the_node() {
    let backend = ChainBackend::full();
    let server = start(backend.clone()).await;
    let addr = server.local_addr();
    for (i, wire) in BOTH.into_iter().enumerate() {
        let boc = regolith_test_support::external_message(i as u32);
        assert_eq!(
            result(addr, wire, "sendMessage", json!({"message": b64(&boc)})).await,
            Value::Null
        );
        let sent = backend.sent.lock().unwrap().last().cloned().unwrap();
        assert_eq!(sent.boc.as_ref(), &boc[..]);
        assert_eq!(sent.hash, *Boc::decode(&boc).unwrap().repr_hash());

        let cases = [
            (json!({"message": "!!!"}), -32602, "invalid base64"),
            (
                json!({"message": STANDARD.encode(vec![0u8; 70_000])}),
                -32602,
                "slice is too big",
            ),
            (
                json!({"message": b64(b"not a boc")}),
                -32003,
                "invalid message BOC",
            ),
            (
                json!({"message": b64(&Boc::encode(CellBuilder::build_from(7u32).unwrap()))}),
                -32003,
                "invalid message",
            ),
            (json!({"message": 5}), -32602, "invalid type"),
        ];
        for (params, code, message) in cases {
            let (got_code, got_message) =
                call_error(addr, wire, "sendMessage", params.clone()).await;
            assert_eq!(got_code, code, "{params}: {got_message}");
            assert!(
                got_message.starts_with(message),
                "{got_message} is not {message}"
            );
        }
    }
    assert_eq!(backend.sent.lock().unwrap().len(), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn a_state_only_node_answers_32002_for_the_index_and_block_methods() {
    let server = start(ChainBackend::state_only()).await;
    let addr = server.local_addr();
    let account = chain().addresses()[0].to_string();
    let hash = HashBytes([5; 32]).to_string();
    let block = chain().last_mc.to_string();
    for wire in BOTH {
        for (method, params) in [
            (
                "getTransactionsList",
                json!({"account": account, "limit": 1}),
            ),
            ("getTransaction", json!({"id": hash})),
            ("getDstTransaction", json!({"messageHash": hash})),
            ("getTransactionBlockId", json!({"id": hash})),
            // nekoton's check_connection (api.md §5).
            (
                "getAccountsByCodeHash",
                json!({"limit": 1, "continuation": null, "codeHash": hash}),
            ),
            ("getBlockProof", json!({"blockId": block})),
            ("getBlockData", json!({"blockId": block})),
        ] {
            let (code, message) = call_error(addr, wire, method, params).await;
            assert_eq!(
                (code, message.as_str()),
                (-32002, "method not supported"),
                "{method}"
            );
        }
        assert_eq!(
            result(addr, wire, "getCapabilities", json!({})).await,
            json!([
                "getCapabilities",
                "getLatestKeyBlock",
                "getBlockchainConfig",
                "getStatus",
                "getTimings",
                "getContractState",
                "sendMessage",
                "getLibraryCell",
                "getKeyBlockProof",
                "subSubscribe",
                "subUnsubscribe",
                "subUnsubscribeAll",
                "subStatus",
                "subListSubscriptions",
                "stream"
            ])
        );
        assert_eq!(
            result(addr, wire, "getContractState", json!({"address": account})).await["type"],
            "exists"
        );
        let timings = result(addr, wire, "getTimings", Value::Null).await;
        assert_eq!(timings["smallestKnownLt"], Value::Null);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn before_initialisation_the_state_methods_are_not_ready() {
    let server = start(ChainBackend::not_ready()).await;
    let addr = server.local_addr();
    let account = chain().addresses()[0].to_string();
    for wire in BOTH {
        assert_eq!(
            result(addr, wire, "getStatus", Value::Null).await,
            json!({"ready": false})
        );
        for (method, params) in [
            ("getTimings", Value::Null),
            ("getBlockchainConfig", Value::Null),
            ("getLatestKeyBlock", Value::Null),
            ("getContractState", json!({"address": account})),
        ] {
            let (code, message) = call_error(addr, wire, method, params).await;
            assert_eq!((code, message.as_str()), (-32001, "not ready"), "{method}");
        }
    }
    server.shutdown().await;
}
