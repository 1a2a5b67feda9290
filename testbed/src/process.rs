//! A fresh `regolith run` child process for the benchmarks that measure a node as a user runs it: its data
//! dir is initialised from a zerostate and bootstraps from given peers; the benchmark watches it through its
//! metrics endpoint and reads its peak RSS from /proc.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use regolith_node::config::DataDir;
use regolith_node::files::{write_json, write_secret_json};

/// A local TCP port free at the time of the call.
pub fn free_tcp_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The value of a metric line `NAME{LABELS} VALUE` (or `NAME VALUE`) whose labels contain `label`.
pub fn metric(text: &str, name: &str, label: Option<&str>) -> Option<f64> {
    metric_values(text, name, label).next()
}

/// The sum of every line of a metric (all label sets).
pub fn metric_sum(text: &str, name: &str) -> f64 {
    metric_values(text, name, None).sum()
}

fn metric_values<'a>(
    text: &'a str,
    name: &'a str,
    label: Option<&'a str>,
) -> impl Iterator<Item = f64> + 'a {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(move |l| {
            l.starts_with(name)
                && matches!(l.as_bytes().get(name.len()), Some(b' ' | b'{'))
                && label.is_none_or(|label| l.contains(label))
        })
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse().ok()))
}

/// Initialises `work` from `zerostate` for a node that listens on loopback (port 0), serves metrics on a
/// free port, discovers quickly, bootstraps from `peers` (signed peer infos), boots as `boot` says and, with
/// `archives` false, syncs block by block. Returns the data dir and the metrics address.
pub fn prepare(
    work: &Path,
    zerostate: &Path,
    peers: Vec<serde_json::Value>,
    archives: bool,
    boot: regolith_node::boot::cold_boot::BootConfig,
) -> Result<(DataDir, SocketAddr)> {
    let data = DataDir::new(work);
    regolith_node::init::init(&data, zerostate, &Default::default())?;
    let metrics_address = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()?));
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.node_config())?)?;
    let (overlay, dht) = regolith_rpc::network::quick_discovery();
    config["listen_address"] = "127.0.0.1:0".into();
    config["metrics_address"] = metrics_address.to_string().into();
    config["overlay"] = serde_json::to_value(overlay)?;
    config["dht"] = serde_json::to_value(dht)?;
    config["sync"] = serde_json::json!({ "archives": archives });
    config["boot"] = serde_json::to_value(boot)?;
    write_secret_json(&data.node_config(), &config)?;
    let mut global: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.global_config())?)?;
    global["bootstrap_peers"] = serde_json::Value::Array(peers);
    write_json(&data.global_config(), &global)?;
    Ok((data, metrics_address))
}

/// A running `regolith run` child (stopped with SIGTERM by [`RunningNode::stop`]).
pub struct RunningNode {
    child: Child,
    /// Its pid.
    pub pid: u32,
    /// Its metrics address.
    pub metrics: SocketAddr,
}

impl RunningNode {
    /// Starts `exe --data DATA run`, its stderr into `DATA/run.log`.
    pub fn spawn(exe: &Path, data: &DataDir, metrics: SocketAddr) -> Result<Self> {
        let log = std::fs::File::create(data.root.join("run.log"))?;
        let child = node_command(exe, &data.root)
            .env("RUST_LOG", "info,tycho_network=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start regolith run")?;
        Ok(Self {
            pid: child.id(),
            child,
            metrics,
        })
    }

    /// Its metrics page, `None` while it does not answer.
    pub fn scrape(&self) -> Option<String> {
        scrape_metrics(self.metrics)
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Result<Option<std::process::ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// Its peak RSS (VmHWM), MiB.
    pub fn peak_rss_mib(&self) -> Result<f64> {
        Ok(process_usage(self.pid)?.2)
    }

    /// The CPU seconds (user and system, every thread) it has used so far.
    pub fn cpu_seconds(&self) -> Result<f64> {
        Ok(process_usage(self.pid)?.0)
    }

    /// The bytes it has caused to be written to storage so far (`write_bytes` of /proc/PID/io: RocksDB's WAL,
    /// flushes and compactions, archive files), page-cache writeback included.
    pub fn written_bytes(&self) -> Result<u64> {
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.pid))?;
        io.lines()
            .find_map(|l| l.strip_prefix("write_bytes:"))
            .context("no write_bytes in /proc/PID/io")?
            .trim()
            .parse()
            .context("malformed write_bytes in /proc/PID/io")
    }

    /// SIGTERM, then waits up to 60 s for the exit (SIGKILL after that).
    pub async fn stop(mut self) -> Result<()> {
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// utime + stime of a process (seconds) and its VmRSS and VmHWM (MiB).
pub fn process_usage(pid: u32) -> Result<(f64, f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("malformed /proc/PID/stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> Result<f64> {
        Ok(fields
            .get(i)
            .context("short /proc/PID/stat")?
            .parse::<f64>()?)
    };
    // utime and stime are fields 14 and 15 of stat(5), i.e. 12 and 13 after the name and the state.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = (ticks(11)? + ticks(12)?) / hz;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |name: &str| -> f64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((cpu, kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0))
}

/// `EXE --data DATA run` as a child that dies with this process, even when this process is killed: no
/// orphaned nodes.
pub fn node_command(exe: &Path, data: &Path) -> Command {
    let mut command = Command::new(exe);
    // SAFETY: the closure only calls prctl, which is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    command.arg("--data").arg(data).arg("run");
    command
}

/// The Prometheus text page of a node's metrics endpoint, `None` while it does not answer.
pub fn scrape_metrics(metrics: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&metrics, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {metrics}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}
