//! `bench sync --profile`: where a syncing child's CPU went. `perf record` samples the whole machine while the
//! child runs; `perf report` keeps the child's samples (every thread of its pid) and each symbol is put in
//! one of the categories docs/benchmarks.md uses ("Where a block-mode sync's CPU goes").

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};

/// Samples per second and CPU.
const FREQUENCY: &str = "400";

/// Whether a sample's shared object and symbol belong to a category.
type Test = fn(&str, &str) -> bool;

/// The categories, in print order: a symbol goes to the first whose test it passes.
const CATEGORIES: &[(&str, Test)] = &[
    ("kernel (syscalls, page faults, the disk)", |dso, _| {
        dso.starts_with("[kernel")
    }),
    ("zstd (component frames, archives)", |_, sym| {
        sym.starts_with("ZSTD_") || sym.starts_with("HUF_") || sym.contains("zstd")
    }),
    ("RocksDB", |dso, sym| {
        sym.contains("rocksdb::") || dso.contains("rocksdb")
    }),
    ("ed25519: the proofs' signatures", |_, sym| {
        sym.contains("ed25519") || sym.contains("curve25519")
    }),
    ("allocator", |_, sym| {
        let name = sym.trim_start_matches('_');
        [
            "malloc",
            "free",
            "cfree",
            "realloc",
            "calloc",
            "int_malloc",
            "int_free",
            "mi_",
            "rust_alloc",
            "rust_dealloc",
            "rust_realloc",
            "unlink_chunk",
        ]
        .iter()
        .any(|p| name.starts_with(p))
    }),
    ("memcpy, memset, memcmp", |_, sym| {
        sym.contains("memmove")
            || sym.contains("memcpy")
            || sym.contains("memset")
            || sym.contains("memcmp")
    }),
    ("SHA-256 of the cells", |_, sym| {
        sym.contains("sha2::") || sym.contains("sha256")
    }),
    ("tycho-types: BOC, cells, the block checks", |_, sym| {
        sym.contains("tycho_types")
    }),
    ("QUIC and TLS", |_, sym| {
        sym.contains("quinn") || sym.contains("rustls") || sym.contains("ring::")
    }),
    ("metrics rendering", |_, sym| sym.contains("metrics")),
];

/// A running `perf record` of the whole machine.
pub(super) struct Recording {
    perf: Child,
    file: PathBuf,
}

impl Recording {
    /// Starts `perf record -a` into `dir/perf.data`.
    pub(super) fn start(dir: &Path) -> Result<Self> {
        let file = dir.join("perf.data");
        let perf = Command::new("perf")
            .args(["record", "-a", "-F", FREQUENCY, "-o"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("--profile needs `perf` (Debian: linux-perf)")?;
        Ok(Self { perf, file })
    }

    /// Stops the recording and returns the share of each category among the samples of `pid`.
    pub(super) fn finish(mut self, pid: u32) -> Result<Vec<(&'static str, f64)>> {
        // SAFETY: kill only sends a signal to our child; SIGINT makes perf write its file and exit.
        unsafe { libc::kill(self.perf.id() as i32, libc::SIGINT) };
        let status = self.perf.wait()?;
        if !status.success() && !self.file.exists() {
            bail!("perf record failed ({status})");
        }
        let out = Command::new("perf")
            .args([
                "report",
                "--stdio",
                "--no-children",
                "--sort",
                "dso,sym",
                "--percent-limit",
                "0",
            ])
            .arg("--pid")
            .arg(pid.to_string())
            .arg("-i")
            .arg(&self.file)
            .stderr(Stdio::null())
            .output()
            .context("running perf report")?;
        if !out.status.success() {
            bail!("perf report failed ({})", out.status);
        }
        Ok(categorize(&String::from_utf8_lossy(&out.stdout)))
    }
}

/// The share of each category (and "everything else") in `perf report --sort dso,sym` output.
fn categorize(report: &str) -> Vec<(&'static str, f64)> {
    let mut shares = vec![0.0; CATEGORIES.len() + 1];
    for line in report.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // "12.34%  dso  [.] symbol"
        let mut parts = line.split_whitespace();
        let Some(percent) = parts
            .next()
            .and_then(|p| p.strip_suffix('%'))
            .and_then(|p| p.parse::<f64>().ok())
        else {
            continue;
        };
        let dso = parts.next().unwrap_or("");
        let sym: String = parts.skip(1).collect::<Vec<_>>().join(" ");
        let at = CATEGORIES
            .iter()
            .position(|(_, test)| test(dso, &sym))
            .unwrap_or(CATEGORIES.len());
        shares[at] += percent;
    }
    let total: f64 = shares.iter().sum();
    CATEGORIES
        .iter()
        .map(|(name, _)| *name)
        .chain(std::iter::once("everything else"))
        .zip(shares)
        .map(|(name, share)| {
            (
                name,
                if total > 0.0 {
                    share * 100.0 / total
                } else {
                    0.0
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_go_to_their_categories() {
        let report = "\
# comment
    40.00%  [kernel.kallsyms]  [k] clear_page_erms
    20.00%  regolith  [.] rocksdb::MemTable::Get
    10.00%  regolith  [.] ZSTD_compressBlock_doubleFast
     5.00%  libc.so.6  [.] _int_free
     5.00%  libc.so.6  [.] __memmove_avx512_unaligned_erms
     5.00%  regolith  [.] tycho_types::boc::ser::BocHeader<S>::encode
     5.00%  regolith  [.] sha2::sha256::x86::digest_blocks
    10.00%  regolith  [.] regolith_node::apply::something
";
        let shares: std::collections::HashMap<_, _> = categorize(report).into_iter().collect();
        assert_eq!(shares["kernel (syscalls, page faults, the disk)"], 40.0);
        assert_eq!(shares["RocksDB"], 20.0);
        assert_eq!(shares["zstd (component frames, archives)"], 10.0);
        assert_eq!(shares["allocator"], 5.0);
        assert_eq!(shares["memcpy, memset, memcmp"], 5.0);
        assert_eq!(shares["tycho-types: BOC, cells, the block checks"], 5.0);
        assert_eq!(shares["SHA-256 of the cells"], 5.0);
        assert_eq!(shares["everything else"], 10.0);
    }
}
