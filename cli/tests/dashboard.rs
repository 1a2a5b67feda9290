//! The Grafana dashboard (`docs/grafana/regolith.json`) names only metrics a running node exports: a node
//! that synced the fixture chain from another one, served RPC and ran its GC is scraped, and every metric
//! in a panel's query (and in the template variable's `label_values`) must be on its `/metrics` page.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{edit_node_config, metric_value, metrics_page, spawn_run, stop_within};
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_rpc::proto::{self, rpc};
use regolith_rpc::RawOverlayClient;
use regolith_test_support::{archive_1_arg, archive_1_bytes, free_tcp_port, wait_for, wait_until};
use serde_json::Value;
use tycho_network::PeerInfo;

fn dashboard_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/grafana/regolith.json")
}

/// PromQL words that are not metric names when they stand alone.
const KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
];

/// The metric names a PromQL expression selects: identifiers that are not functions or aggregations
/// (followed by `(`), not keywords, not label names (inside `{…}` or the label list of `by`/`without`/`on`/
/// `ignoring`/`group_*`), not strings, durations (`[…]`), numbers or `$variables`.
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    let skip_string = |i: &mut usize| {
        let quote = chars[*i];
        *i += 1;
        while *i < chars.len() && chars[*i] != quote {
            if chars[*i] == '\\' {
                *i += 1;
            }
            *i += 1;
        }
        *i += 1;
    };
    // Skips from an opening bracket to its closing one, strings included.
    let skip_group = |i: &mut usize, open: char, close: char| {
        let mut depth = 0;
        while *i < chars.len() {
            match chars[*i] {
                '"' | '\'' | '`' => {
                    skip_string(i);
                    continue;
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        *i += 1;
                        return;
                    }
                }
                _ => {}
            }
            *i += 1;
        }
    };
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let is_part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => skip_string(&mut i),
            '{' => skip_group(&mut i, '{', '}'),
            '[' => skip_group(&mut i, '[', ']'),
            '$' => {
                i += 1;
                if i < chars.len() && chars[i] == '{' {
                    skip_group(&mut i, '{', '}');
                } else {
                    while i < chars.len() && is_part(chars[i]) {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                // A number, or a duration such as `5m` after `offset`.
                while i < chars.len() && (is_part(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            c if is_start(c) => {
                let start = i;
                while i < chars.len() && is_part(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                let followed_by_paren = next < chars.len() && chars[next] == '(';
                let lower = word.to_ascii_lowercase();
                // `sum by (…) (…)`: an aggregation whose grouping comes first.
                let rest: String = chars[next..]
                    .iter()
                    .collect::<String>()
                    .to_ascii_lowercase();
                let grouping_follows = ["by", "without"].iter().any(|k| {
                    rest.strip_prefix(k)
                        .is_some_and(|r| r.trim_start().starts_with('('))
                });
                if matches!(
                    lower.as_str(),
                    "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
                ) {
                    // Its label list.
                    if followed_by_paren {
                        i = next;
                        skip_group(&mut i, '(', ')');
                    }
                } else if followed_by_paren
                    || grouping_follows
                    || KEYWORDS.contains(&lower.as_str())
                {
                    // A function, an aggregation or an operator keyword.
                } else {
                    names.push(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

#[test]
fn the_query_parser_finds_metrics_and_only_metrics() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (method, le) (rate(regolith_rpc_request_seconds_bucket{instance=~"$instance", a="}"}[$__rate_interval])))"#
        ),
        ["regolith_rpc_request_seconds_bucket"]
    );
    assert_eq!(
        metric_names(
            "sum(rate(a_total[5m] offset 1h)) / on (instance) group_left (x) b_count > bool 0 or c"
        ),
        ["a_total", "b_count", "c"]
    );
    assert_eq!(metric_names("up{job='x'} * 2e3 + nan"), ["up"]);
    assert_eq!(
        metric_names("max without (peer) (x) - count by(a)(y) + sum(z) by (b)"),
        ["x", "y", "z"]
    );
}

/// Every metric the dashboard uses, by where it is used.
fn dashboard_metrics(dashboard: &Value) -> HashMap<String, Vec<String>> {
    fn walk(panels: &Value, out: &mut HashMap<String, Vec<String>>, exprs: &mut usize) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("?").to_string();
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"]
                    .as_str()
                    .unwrap_or_else(|| panic!("panel {title:?}: a target without expr"));
                *exprs += 1;
                let names = metric_names(expr);
                assert!(!names.is_empty(), "panel {title:?}: no metric in {expr:?}");
                for name in names {
                    out.entry(name).or_default().push(title.clone());
                }
            }
            walk(&panel["panels"], out, exprs);
        }
    }
    let mut out = HashMap::new();
    let mut exprs = 0;
    walk(&dashboard["panels"], &mut out, &mut exprs);
    assert!(exprs >= 20, "only {exprs} queries in the dashboard");
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = match &variable["query"] {
            Value::String(q) => q.clone(),
            Value::Object(o) => o
                .get("query")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            _ => continue,
        };
        if let Some(args) = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
        {
            let selector = args.rsplit_once(',').map_or(args, |(s, _)| s);
            for name in metric_names(selector) {
                out.entry(name)
                    .or_default()
                    .push(format!("variable {}", variable["name"]));
            }
        }
    }
    out
}

/// The dashboard is one Grafana can import, on any Prometheus data source.
fn check_shape(dashboard: &Value) {
    assert!(
        dashboard["schemaVersion"].as_u64().unwrap() >= 36,
        "schemaVersion"
    );
    assert!(
        dashboard["__inputs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "DS_PROMETHEUS" && i["pluginId"] == "prometheus"),
        "a DS_PROMETHEUS input"
    );
    let mut ids = BTreeSet::new();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "panel ids unique"
        );
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${DS_PROMETHEUS}",
            "{}",
            panel["title"]
        );
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"]["uid"], "${DS_PROMETHEUS}");
        }
    }
}

/// The series names on a metrics page, and the type of each family (`# TYPE`).
fn exported(page: &str) -> (BTreeSet<String>, HashMap<String, String>) {
    let mut series = BTreeSet::new();
    let mut types = HashMap::new();
    let body = page.split_once("\r\n\r\n").map_or(page, |(_, b)| b);
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some(ty)) = (parts.next(), parts.next()) {
                types.insert(name.to_string(), ty.to_string());
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let name = line.split(['{', ' ']).next().unwrap();
            series.insert(name.to_string());
        }
    }
    (series, types)
}

/// The dashboard metrics the page does not export as the query uses them: a `_bucket` series of a
/// histogram family, `_sum`/`_count` of a histogram or summary, any other name as a series of its own.
fn not_exported(wanted: &HashMap<String, Vec<String>>, page: &str) -> Vec<String> {
    let (series, types) = exported(page);
    let mut missing = Vec::new();
    for (name, used_in) in wanted {
        let family_ok = |suffix: &str, kinds: &[&str]| {
            name.strip_suffix(suffix).is_none_or(|family| {
                types
                    .get(family)
                    .is_some_and(|ty| kinds.contains(&ty.as_str()))
            })
        };
        let ok = series.contains(name)
            && family_ok("_bucket", &["histogram"])
            && family_ok("_sum", &["histogram", "summary"])
            && family_ok("_count", &["histogram", "summary"]);
        if !ok {
            missing.push(format!("{name} (in {})", used_in.join(", ")));
        }
    }
    missing.sort();
    missing
}

/// Any free QUIC port, discovery periods of seconds (as `regolith devnet` sets them).
fn local_node(config: &mut Value, metrics: Option<u16>) {
    config["listen_address"] = "127.0.0.1:0".into();
    config["metrics_address"] = metrics.map_or(Value::Null, |p| format!("127.0.0.1:{p}").into());
    let (overlay, dht) = regolith_rpc::network::quick_discovery();
    config["overlay"] = serde_json::to_value(overlay).unwrap();
    config["dht"] = serde_json::to_value(dht).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_of_the_dashboard_is_exported_by_a_running_node() {
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard_path()).unwrap()).unwrap();
    check_shape(&dashboard);
    let wanted = dashboard_metrics(&dashboard);

    // Node a holds the fixture chain; node b syncs it from a, with 10-block archives and GC of blocks,
    // archives and the queue every second, so that every GC runs once b has the chain.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    common::init(&a);
    edit_node_config(&a, |c| local_node(c, None));
    common::ok(&a, &["import", "--quiet", &archive_1_arg()]);
    let node_a = spawn_run(&a);

    common::init(&b);
    let metrics_b = free_tcp_port();
    edit_node_config(&b, |c| {
        local_node(c, Some(metrics_b));
        c["storage"]["archives"]["mc_blocks_per_archive"] = 10.into();
        c["storage"]["blocks_gc"] = serde_json::json!({
            "type": "before_safe_distance", "safe_distance": 10, "min_interval": "1s"
        });
        c["storage"]["archives_gc"] = serde_json::json!({
            "type": "before_safe_distance", "safe_distance": 20, "min_interval": "1s"
        });
        c["internal_queue"]["gc_interval"] = "1s".into();
    });
    let global_path = b.join("global.json");
    let mut global: Value =
        serde_json::from_str(&std::fs::read_to_string(&global_path).unwrap()).unwrap();
    global["bootstrap_peers"]
        .as_array_mut()
        .unwrap()
        .push(node_a.peer_info());
    std::fs::write(&global_path, global.to_string()).unwrap();
    let node_b = spawn_run(&b);

    wait_until(
        "node b did not reach mc 100",
        Duration::from_secs(180),
        Duration::from_millis(200),
        || common::metric(metrics_b, "regolith_sync_last_applied_mc_seqno") == Some(100.0),
    );

    // b serves: ping, an unknown query, getArchiveInfo, and getBlockFull / getNextBlockFull of the last
    // blocks of the chain (above b's GC target).
    let info: PeerInfo = serde_json::from_value(node_b.peer_info()).unwrap();
    let client = RawOverlayClient::connect(
        "127.0.0.1:0".parse().unwrap(),
        node_b.overlay_id(),
        Arc::new(info),
        Default::default(),
    )
    .unwrap();
    let query = |body: Vec<u8>| client.query(Bytes::from(body));
    query(tl_proto::serialize(proto::Ping)).await.unwrap();
    assert!(query(vec![9, 9, 9, 9]).await.is_err(), "unknown: no answer");
    query(tl_proto::serialize(rpc::GetArchiveInfo { mc_seqno: 50 }))
        .await
        .unwrap();
    let compressed = archive_1_bytes();
    let mut reader = ArchiveReader::new_compressed(&compressed[..]).unwrap();
    let mut blocks = Vec::new();
    while let Some(entry) = reader.next_entry().unwrap() {
        if entry.ty == ArchiveEntryType::Block {
            blocks.push(entry.block_id);
        }
    }
    for id in &blocks[blocks.len() - 5..] {
        query(tl_proto::serialize(rpc::GetBlockFull { block_id: *id }))
            .await
            .unwrap();
        query(tl_proto::serialize(rpc::GetNextBlockFull {
            prev_block_id: *id,
        }))
        .await
        .unwrap();
    }

    // The GC runs, the queue GC and the neighbour metrics come on their own periods: wait for them.
    let deadline = Instant::now() + Duration::from_secs(120);
    let missing = loop {
        let page = metrics_page(metrics_b).expect("node b's metrics endpoint answers");
        let missing = not_exported(&wanted, &page);
        if missing.is_empty() || Instant::now() > deadline {
            break (missing, page);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    stop_within(node_b.child, Duration::from_secs(60));
    stop_within(node_a.child, Duration::from_secs(60));
    let (missing, page) = missing;
    assert!(
        missing.is_empty(),
        "the dashboard uses metrics node b does not export:\n  {}\n\nits /metrics:\n{page}",
        missing.join("\n  ")
    );
    assert!(
        metric_value(&page, "regolith_rpc_blocks_served_total").is_some_and(|v| v >= 1.0),
        "b served blocks"
    );
}

/// Series that exist only once there is something to label them by: a neighbour (a lone node has none) or
/// a queue partition and shard that GC has bounded.
const LABELLED_BY_WHAT_EXISTS: &[&str] = &[
    "regolith_overlay_neighbour_score",
    "regolith_overlay_neighbour_rtt_seconds",
    "regolith_queue_gc_bound_lt",
];

/// A node's metrics are registered when it starts: a lone node that has done nothing yet (no block, no GC
/// run, no request, no archive) already exports every metric of the dashboard, as 0, so that no panel of a
/// fresh node shows "no data".
#[test]
fn a_fresh_node_exports_every_dashboard_metric_from_its_start() {
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard_path()).unwrap()).unwrap();
    let mut wanted = dashboard_metrics(&dashboard);
    for name in LABELLED_BY_WHAT_EXISTS {
        assert!(
            wanted.remove(*name).is_some(),
            "{name} is no longer on the dashboard: drop it from the list"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    common::init(&data);
    let metrics = free_tcp_port();
    edit_node_config(&data, |c| local_node(c, Some(metrics)));
    // `spawn_run` returns once the node has printed that it serves: its start is over.
    let node = spawn_run(&data);
    let page = wait_for(Duration::from_secs(60), Duration::from_millis(100), || {
        metrics_page(metrics).ok_or_else(|| "the metrics endpoint does not answer".to_owned())
    });
    stop_within(node.child, Duration::from_secs(60));
    let missing = not_exported(&wanted, &page);
    assert!(
        missing.is_empty(),
        "a fresh node does not export:\n  {}\n\nits /metrics:\n{page}",
        missing.join("\n  ")
    );
    for zero in [
        "regolith_archives_committed_total",
        "regolith_gc_runs_total",
        "regolith_gc_blocks_removed_total",
        "regolith_gc_archives_removed_total",
        "regolith_rpc_unknown_queries_total",
    ] {
        assert_eq!(metric_value(&page, zero), Some(0.0), "{zero}");
    }
}
