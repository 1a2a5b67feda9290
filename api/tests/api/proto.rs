//! The protobuf variant (api.md §7): a round trip of several methods over HTTP/1.1 (nekoton's ProtoClient)
//! and h2c, and its errors with HTTP 422.

use std::net::SocketAddr;

use bytes::Bytes;
use hyper::http::{Method, StatusCode};
use prost::Message as _;
use regolith_api::proto::messages::response::get_contract_state as cs;
use regolith_api::proto::messages::{request, response, Empty, Error, Request, Response};
use tycho_types::boc::Boc;
use tycho_types::cell::HashBytes;
use tycho_types::models::StdAddr;

use crate::chain_backend::{chain, ChainBackend};
use crate::client::{send, Wire, BOTH};
use crate::start;

fn address(a: &StdAddr) -> Bytes {
    let mut out = vec![a.workchain as u8];
    out.extend_from_slice(a.address.as_slice());
    out.into()
}

/// Sends `call` and returns the result, or the error with HTTP 422.
async fn rpc(addr: SocketAddr, wire: Wire, body: Bytes) -> Result<response::Result, Error> {
    let reply = send(
        addr,
        wire,
        Method::POST,
        "/proto",
        Some("application/x-protobuf"),
        body,
    )
    .await;
    assert_eq!(reply.headers["content-type"], "application/x-protobuf");
    match reply.status {
        StatusCode::OK => Ok(Response::decode(reply.body).unwrap().result.unwrap()),
        StatusCode::UNPROCESSABLE_ENTITY => Err(Error::decode(reply.body).unwrap()),
        other => panic!("HTTP {other}"),
    }
}

async fn call(
    addr: SocketAddr,
    wire: Wire,
    call: request::Call,
) -> Result<response::Result, Error> {
    rpc(addr, wire, Request::of(call).encode_to_vec().into()).await
}

#[tokio::test]
async fn methods_round_trip_over_protobuf() {
    let chain = chain();
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    for wire in BOTH {
        // Capabilities without the subscription entries.
        let Ok(response::Result::GetCapabilities(caps)) =
            call(addr, wire, request::Call::GetCapabilities(Empty {})).await
        else {
            panic!("getCapabilities");
        };
        assert_eq!(caps.capabilities.len(), 16);
        assert!(caps
            .capabilities
            .iter()
            .all(|c| !c.starts_with("sub") && c != "stream"));

        assert_eq!(
            call(addr, wire, request::Call::GetStatus(Empty {})).await,
            Ok(response::Result::GetStatus(response::GetStatus {
                ready: true
            }))
        );
        assert_eq!(
            call(addr, wire, request::Call::GetTimings(Empty {})).await,
            Ok(response::Result::GetTimings(response::GetTimings {
                last_mc_block_seqno: chain.last_mc.seqno,
                last_mc_utime: chain.last_mc_utime,
                mc_time_diff: 7,
                smallest_known_lt: Some(0),
            }))
        );
        let Ok(response::Result::GetBlockchainConfig(config)) =
            call(addr, wire, request::Call::GetBlockchainConfig(Empty {})).await
        else {
            panic!("getBlockchainConfig");
        };
        assert_eq!(config.global_id, chain.global_id);
        assert_eq!(
            Boc::decode(&config.config).unwrap().repr_hash(),
            chain.config.repr_hash()
        );

        // Every account: the same account cell and last transaction as the state's.
        for a in chain.addresses() {
            let entry = chain.entry(&a).unwrap();
            let state = chain.state_of(&a).unwrap();
            let timings = cs::Timings {
                gen_lt: state.state.gen_lt,
                gen_utime: state.state.gen_utime,
            };
            let got = call(
                addr,
                wire,
                request::Call::GetContractState(request::GetContractState {
                    address: address(&a),
                    last_transaction_lt: None,
                }),
            )
            .await;
            let Ok(response::Result::GetContractState(response::GetContractState {
                state: Some(cs::State::Exists(exists)),
            })) = got
            else {
                panic!("{a}: {got:?}");
            };
            assert_eq!(exists.gen_timings, Some(timings));
            assert_eq!(
                exists.last_transaction_id,
                Some(cs::exists::LastTransactionId::Exact(cs::exists::Exact {
                    lt: entry.last_trans_lt,
                    hash: Bytes::copy_from_slice(entry.last_trans_hash.as_slice()),
                }))
            );
            let account = Boc::decode(&exists.account)
                .unwrap()
                .parse::<tycho_types::models::Account>()
                .unwrap();
            assert_eq!(Some(account), entry.load_account().unwrap());

            let unchanged = call(
                addr,
                wire,
                request::Call::GetContractState(request::GetContractState {
                    address: address(&a),
                    last_transaction_lt: Some(entry.last_trans_lt),
                }),
            )
            .await;
            assert_eq!(
                unchanged,
                Ok(response::Result::GetContractState(
                    response::GetContractState {
                        state: Some(cs::State::Unchanged(timings))
                    }
                ))
            );
        }
        let missing = StdAddr::new(0, HashBytes([0x66; 32]));
        let Ok(response::Result::GetContractState(response::GetContractState {
            state: Some(cs::State::NotExists(not)),
        })) = call(
            addr,
            wire,
            request::Call::GetContractState(request::GetContractState {
                address: address(&missing),
                last_transaction_lt: None,
            }),
        )
        .await
        else {
            panic!("notExists");
        };
        assert!(matches!(
            not.gen_timings,
            Some(cs::not_exist::GenTimings::Known(_))
        ));

        // Transactions, newest first, and accounts by code hash as 33-byte addresses.
        let ((workchain, id), txs) = chain
            .transactions
            .iter()
            .max_by_key(|(_, t)| t.len())
            .unwrap();
        let got = call(
            addr,
            wire,
            request::Call::GetTransactionsList(request::GetTransactionsList {
                account: address(&StdAddr::new(*workchain, *id)),
                last_transaction_lt: None,
                limit: 100,
            }),
        )
        .await;
        let expected: Vec<Bytes> = txs.values().rev().map(|t| t.boc.clone()).collect();
        assert_eq!(
            got,
            Ok(response::Result::GetTransactionsList(
                response::GetTransactionsList {
                    transactions: expected
                }
            ))
        );
        let tx = txs.values().next().unwrap();
        assert_eq!(
            call(
                addr,
                wire,
                request::Call::GetTransaction(request::GetTransaction {
                    id: Bytes::copy_from_slice(tx.hash.as_slice())
                })
            )
            .await,
            Ok(response::Result::GetRawTransaction(
                response::GetRawTransaction {
                    transaction: Some(tx.boc.clone())
                }
            ))
        );
        let Ok(response::Result::GetTransactionBlockId(block)) = call(
            addr,
            wire,
            request::Call::GetTransactionBlockId(request::GetTransaction {
                id: Bytes::copy_from_slice(tx.hash.as_slice()),
            }),
        )
        .await
        else {
            panic!("getTransactionBlockId");
        };
        let block = block.block_id.unwrap();
        assert_eq!(
            (block.workchain, block.shard, block.seqno),
            (
                tx.block.shard.workchain(),
                tx.block.shard.prefix(),
                tx.block.seqno
            )
        );

        let (code_hash, holders) = chain
            .code_hashes
            .iter()
            .max_by_key(|(_, l)| l.len())
            .unwrap();
        let got = call(
            addr,
            wire,
            request::Call::GetAccountsByCodeHash(request::GetAccountsByCodeHash {
                code_hash: Bytes::copy_from_slice(code_hash.as_slice()),
                continuation: Some(address(&holders[0])),
                limit: 100,
            }),
        )
        .await;
        let expected: Vec<Bytes> = holders[1..].iter().map(address).collect();
        assert_eq!(
            got,
            Ok(response::Result::GetAccounts(
                response::GetAccountsByCodeHash { account: expected }
            ))
        );

        let (seqno, key_block) = chain.key_blocks.iter().next_back().unwrap();
        let Ok(response::Result::GetKeyBlockProof(proof)) = call(
            addr,
            wire,
            request::Call::GetKeyBlockProof(request::GetKeyBlockProof { seqno: *seqno }),
        )
        .await
        else {
            panic!("getKeyBlockProof");
        };
        let proof = proof.key_block.unwrap();
        assert_eq!(proof.proof, chain.blocks[key_block].1);
        assert_eq!(proof.block_id.unwrap().seqno, *seqno);

        let message = Bytes::from(regolith_test_support::external_message(9));
        assert_eq!(
            call(
                addr,
                wire,
                request::Call::SendMessage(request::SendMessage { message })
            )
            .await,
            Ok(response::Result::SendMessage(Empty {}))
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn protobuf_errors_go_with_http_422_and_the_codes_of_section_2() {
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    let some = chain().addresses()[0].clone();
    for wire in BOTH {
        let code = |r: Result<response::Result, Error>| r.map(|_| ()).unwrap_err();
        // No call: -32601; not protobuf: -32700.
        let e = code(rpc(addr, wire, Bytes::new()).await);
        assert_eq!(e.code, -32601);
        let e = code(rpc(addr, wire, Bytes::from_static(&[0xff, 0xff, 0xff])).await);
        assert_eq!(e.code, -32700);
        // Wrong lengths: -32602.
        let e = code(
            call(
                addr,
                wire,
                request::Call::GetContractState(request::GetContractState {
                    address: Bytes::from_static(&[0; 32]),
                    last_transaction_lt: None,
                }),
            )
            .await,
        );
        assert_eq!((e.code, e.message.as_str()), (-32602, "invalid address"));
        let e = code(
            call(
                addr,
                wire,
                request::Call::GetTransaction(request::GetTransaction {
                    id: Bytes::from_static(&[1; 31]),
                }),
            )
            .await,
        );
        assert_eq!((e.code, e.message.as_str()), (-32602, "invalid hash"));
        // The limit is checked first: a bad address with limit 101 is -32004.
        let e = code(
            call(
                addr,
                wire,
                request::Call::GetTransactionsList(request::GetTransactionsList {
                    account: Bytes::from_static(&[0; 3]),
                    last_transaction_lt: None,
                    limit: 101,
                }),
            )
            .await,
        );
        assert_eq!((e.code, e.message.as_str()), (-32004, "limit is too large"));
        let ok = call(
            addr,
            wire,
            request::Call::GetTransactionsList(request::GetTransactionsList {
                account: address(&some),
                last_transaction_lt: None,
                limit: 0,
            }),
        )
        .await;
        assert_eq!(
            ok,
            Ok(response::Result::GetTransactionsList(
                response::GetTransactionsList {
                    transactions: vec![]
                }
            ))
        );
        // A rejected message: -32003.
        let e = code(
            call(
                addr,
                wire,
                request::Call::SendMessage(request::SendMessage {
                    message: Bytes::from_static(b"junk"),
                }),
            )
            .await,
        );
        assert_eq!(
            (e.code, e.message.as_str()),
            (-32003, "invalid message BOC")
        );
    }
    server.shutdown().await;
    // Not ready: -32001.
    let server = start(ChainBackend::not_ready()).await;
    let e = call(
        server.local_addr(),
        Wire::Http1,
        request::Call::GetTimings(Empty {}),
    )
    .await
    .unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (-32001, "not ready"));
    server.shutdown().await;
}
