//! The modules of the ledger import one another without a cycle (issue #13: `db` → `records` → `decision`
//! → `db` was one). The graph is read from the `use crate::…` lines of `src/*.rs`, test modules excluded.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name → the crate modules its non-test code imports.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .map(|line| format!("{line}\n"))
            .collect();
        let mut imports = BTreeSet::new();
        for statement in code.split(';') {
            let statement = statement.trim();
            let Some(rest) = statement
                .strip_prefix("use crate::")
                .or_else(|| statement.strip_prefix("pub(crate) use crate::"))
            else {
                continue;
            };
            // `use crate::a::{..}` or `use crate::{a::X, b::{..}}`: the first segment of each path.
            let rest = rest.trim();
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0;
                let mut segment = String::new();
                let mut at_start = true;
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => at_start = true,
                        c if at_start && (c.is_alphanumeric() || c == '_') => segment.push(c),
                        _ if at_start && !segment.is_empty() => {
                            imports.insert(std::mem::take(&mut segment));
                            at_start = false;
                        }
                        _ => {}
                    }
                }
                if !segment.is_empty() {
                    imports.insert(segment);
                }
            } else {
                let first: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                imports.insert(first);
            }
        }
        imports.remove(&module);
        graph.insert(module, imports);
    }
    graph
}

/// A cycle of the graph, if it has one (depth-first search).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|n| n == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_ledger_modules_import_one_another_without_a_cycle() {
    let graph = import_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The reader sees the imports it must: a broken parser would find no edges and pass vacuously.
    assert!(graph["decision"].contains("db"), "{graph:?}");
    assert!(graph["records"].contains("decision"), "{graph:?}");
    assert!(graph["db"].contains("tables"), "{graph:?}");
    assert_eq!(find_cycle(&graph), None, "{graph:?}");
}

#[test]
fn the_cycle_search_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("db", &["records"][..]),
        ("records", &["decision"]),
        ("decision", &["db", "outcome"]),
        ("outcome", &[]),
    ]
    .into_iter()
    .map(|(m, deps)| {
        (
            m.to_string(),
            deps.iter().map(ToString::to_string).collect(),
        )
    })
    .collect();
    assert_eq!(
        find_cycle(&graph),
        Some(vec![
            "db".into(),
            "records".into(),
            "decision".into(),
            "db".into()
        ])
    );
}
