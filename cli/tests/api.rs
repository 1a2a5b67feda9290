//! The account API against a real wallet library: `nekoton` (PyPI; `scripts/install-deps.sh` installs it)
//! drives a `regolith run` that synced a generated chain from a serving node, over its `JrpcTransport` (h2c)
//! and its `ProtoTransport` (HTTP/1.1), unchanged. Every account of the chain is read and compared with the
//! generator's own state files of the tip.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use regolith_formats::persistent_state::{parse_state_object_name, StateObject, StatePart};
use regolith_storage::StateKind;
use regolith_test_support::{free_tcp_port, free_udp_port, wait_until, zerostate_path};
use serde_json::{json, Value};
use tycho_types::models::ShardStateUnsplit;

const TIP: u32 = 40;

/// What nekoton is asked and prints: the connection, the config, the signature id and every account.
const CLIENT: &str = r#"
import asyncio, json, sys
import nekoton as nt

async def main():
    url, kind, expected_path = sys.argv[1], sys.argv[2], sys.argv[3]
    expected = json.load(open(expected_path))
    transport = nt.JrpcTransport(url) if kind == "jrpc" else nt.ProtoTransport(url)
    await transport.check_connection()
    config = await transport.get_blockchain_config()
    out = {
        "global_id": config.global_id,
        "config_address": str(config.config_address),
        "signature_id": await transport.get_signature_id(),
        "accounts": [],
    }
    for account in expected["accounts"]:
        state = await transport.get_account_state(nt.Address(account["address"]))
        if state is None:
            out["accounts"].append({"address": account["address"], "missing": True})
            continue
        out["accounts"].append({
            "address": account["address"],
            "balance": str(state.balance.to_nano()),
            "last_trans_lt": state.last_trans_lt,
        })
    absent = await transport.get_account_state(nt.Address(expected["absent"]))
    out["absent_is_none"] = absent is None
    # Every account with the most common code, 7 a page.
    code_accounts, continuation = [], None
    while True:
        page = await transport.get_accounts_by_code_hash(
            bytes.fromhex(expected["code_hash"]), continuation=continuation, limit=7)
        code_accounts += [str(a) for a in page]
        if len(page) < 7:
            break
        continuation = page[-1]
    out["code_accounts"] = code_accounts
    print(json.dumps(out))

asyncio.run(main())
"#;

fn python() -> String {
    std::env::var("REGOLITH_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Every account of the generator's newest shard states (the tip's, a persistent key block): address,
/// balance in nano, the lt of its last transaction, and the code hash of an active one.
fn expected_accounts(chain: &Path) -> (Vec<Value>, Vec<(u8, String, String)>, i32) {
    let dir = chain.join("states");
    let mut newest: std::collections::BTreeMap<String, (u32, PathBuf)> = Default::default();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let Some(StateObject::State(id, StateKind::Shard, StatePart::Unsplit)) =
            parse_state_object_name(&name)
        else {
            continue;
        };
        let shard = format!("{}", id.shard);
        if newest
            .get(&shard)
            .is_none_or(|(seqno, _)| id.seqno > *seqno)
        {
            newest.insert(shard, (id.seqno, dir.join(&name)));
        }
    }
    let mut accounts = Vec::new();
    let mut codes = Vec::new();
    let mut global_id = 0;
    for (_, path) in newest.values() {
        let raw = zstd::decode_all(std::fs::File::open(path).unwrap()).unwrap();
        let root = tycho_types::boc::Boc::decode(&raw).unwrap();
        let state = root.parse::<ShardStateUnsplit>().unwrap();
        global_id = state.global_id;
        let workchain = state.shard_ident.workchain();
        for item in state.load_accounts().unwrap().iter() {
            let (id, _, shard_account) = item.unwrap();
            let Some(account) = shard_account.load_account().unwrap() else {
                continue;
            };
            if let tycho_types::models::AccountState::Active(init) = &account.state {
                if let Some(code) = &init.code {
                    codes.push((
                        workchain as i8 as u8,
                        id.to_string(),
                        code.repr_hash().to_string(),
                    ));
                }
            }
            accounts.push(json!({
                "address": format!("{workchain}:{id}"),
                "balance": account.balance.tokens.into_inner().to_string(),
                "last_trans_lt": account.last_trans_lt,
            }));
        }
    }
    (accounts, codes, global_id)
}

#[test]
fn nekoton_reads_every_account_of_a_synced_node_over_jrpc_and_protobuf() {
    let dir = tempfile::tempdir().unwrap();
    let chain = dir.path().join("chain");
    let base = zerostate_path();
    ok(
        &dir.path().join("unused"),
        &[
            "chain",
            "generate",
            "--out",
            chain.to_str().unwrap(),
            "--base-zerostate",
            base.to_str().unwrap(),
            "--mc-blocks",
            &TIP.to_string(),
            "--key-block-every",
            "10",
            "--shards",
            "2",
            "--messages",
            "4",
            "--accounts",
            "20",
            "--seed",
            "31",
        ],
    );
    let zerostate = chain.join("zerostate.boc");
    let (accounts, codes, global_id) = expected_accounts(&chain);
    // The most common code and its accounts in the API's order: workchain as an unsigned byte, then id.
    let mut by_code: std::collections::HashMap<&str, usize> = Default::default();
    for (_, _, code) in &codes {
        *by_code.entry(code.as_str()).or_default() += 1;
    }
    let (code_hash, _) = by_code.iter().max_by_key(|(_, n)| **n).unwrap();
    let mut code_accounts: Vec<(u8, &str)> = codes
        .iter()
        .filter(|(_, _, code)| code == code_hash)
        .map(|(wc, id, _)| (*wc, id.as_str()))
        .collect();
    code_accounts.sort_unstable();
    let code_accounts: Vec<String> = code_accounts
        .iter()
        .map(|(wc, id)| format!("{}:{id}", *wc as i8))
        .collect();
    assert!(
        code_accounts.len() > 7,
        "more than one page: {code_accounts:?}"
    );
    // Accounts of the masterchain and of both shards.
    assert!(accounts.len() >= 50, "{} accounts", accounts.len());
    assert!(accounts
        .iter()
        .any(|a| a["address"].as_str().unwrap().starts_with("-1:")));

    let node = |name: &str, api: Option<u16>, peer: Option<&Path>| -> (PathBuf, u16) {
        let data = dir.path().join(name);
        let metrics = free_tcp_port();
        let listen = format!("127.0.0.1:{}", free_udp_port());
        let metrics_arg = format!("127.0.0.1:{metrics}");
        let api_arg = api.map(|port| format!("127.0.0.1:{port}"));
        let mut args = vec![
            "init",
            "--zerostate",
            zerostate.to_str().unwrap(),
            "--listen",
            &listen,
            "--metrics",
            &metrics_arg,
        ];
        if let Some(api) = &api_arg {
            args.extend(["--api", api.as_str()]);
        }
        ok(&data, &args);
        edit_node_config(&data, |config| {
            let (overlay, dht) = regolith_rpc::network::quick_discovery();
            config["overlay"] = serde_json::to_value(overlay).unwrap();
            config["dht"] = serde_json::to_value(dht).unwrap();
            if peer.is_some() {
                config["boot"] = json!({"type": "genesis"});
            }
        });
        if let Some(peer) = peer {
            let path = data.join("global.json");
            let mut global: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let theirs: Value =
                serde_json::from_slice(&std::fs::read(peer.join("global.json")).unwrap()).unwrap();
            global["bootstrap_peers"]
                .as_array_mut()
                .unwrap()
                .push(theirs["bootstrap_peers"][0].clone());
            std::fs::write(&path, global.to_string()).unwrap();
        }
        (data, metrics)
    };
    let (server, _) = node("server", None, None);
    let mut import = vec!["import".to_string(), "--quiet".to_string()];
    let mut archives: Vec<String> = std::fs::read_dir(chain.join("archives"))
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_string())
        .collect();
    archives.sort();
    import.extend(archives);
    let import: Vec<&str> = import.iter().map(String::as_str).collect();
    ok(&server, &import);
    let server_run = spawn_run(&server);

    let api_port = free_tcp_port();
    let (follower, follower_metrics) = node("follower", Some(api_port), Some(&server));
    let follower_run = spawn_run(&follower);
    wait_until(
        "the follower did not sync to the tip",
        Duration::from_secs(300),
        Duration::from_millis(200),
        || metric(follower_metrics, "regolith_sync_last_applied_mc_seqno") == Some(f64::from(TIP)),
    );

    let expected_path = dir.path().join("expected.json");
    let absent = "0:".to_string() + &"ab".repeat(32);
    std::fs::write(
        &expected_path,
        json!({"accounts": accounts, "absent": absent, "code_hash": code_hash}).to_string(),
    )
    .unwrap();
    let script = dir.path().join("client.py");
    std::fs::write(&script, CLIENT).unwrap();
    for (kind, path) in [("jrpc", "/rpc"), ("proto", "/proto")] {
        let url = format!("http://127.0.0.1:{api_port}{path}");
        // The node answers once it is at its peer's tip; nekoton's check_connection asks for that.
        let out = regolith_test_support::wait_for(
            Duration::from_secs(120),
            Duration::from_millis(500),
            || {
                let out = Command::new(python())
                    .arg(&script)
                    .args([&url, kind, expected_path.to_str().unwrap()])
                    .output()
                    .unwrap();
                if out.status.success() {
                    Ok(out)
                } else {
                    Err(String::from_utf8_lossy(&out.stderr).into_owned())
                }
            },
        );
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answer["global_id"], global_id, "{kind}: {answer}");
        assert_eq!(answer["absent_is_none"], true, "{kind}");
        assert_eq!(answer["code_accounts"], json!(code_accounts), "{kind}");
        let got = answer["accounts"].as_array().unwrap();
        assert_eq!(got.len(), accounts.len(), "{kind}");
        for (got, want) in got.iter().zip(&accounts) {
            assert_eq!(got, want, "{kind}");
        }
    }
    stop_within(follower_run.child, Duration::from_secs(60));
    stop_within(server_run.child, Duration::from_secs(60));
}
