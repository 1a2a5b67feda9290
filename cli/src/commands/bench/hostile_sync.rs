//! `regolith bench sync --hostile`: a fresh `regolith run` child syncs from the testbed's forging peer, for every
//! attack, alone and beside an honest peer; one row per run.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use regolith_testbed::forger::Attack;
use regolith_testbed::hostile_sync::{run_victim, ForgingPeer};

/// `regolith bench sync --hostile`: every attack, alone and beside an honest peer, next to the honest-only
/// figure. Prints one row per run.
pub(super) async fn bench(fixtures: &Path, json: bool) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the regolith binary")?;
    let mut ip = 60u8;
    for attack in std::iter::once(Attack::None).chain(Attack::ALL) {
        let forger = ForgingPeer::start(fixtures, [127, 0, 0, ip], attack).await?;
        let honest = ForgingPeer::start(fixtures, [127, 0, 0, ip + 1], Attack::None).await?;
        ip += 2;
        for with_honest in [false, true] {
            if attack == Attack::None && with_honest {
                continue;
            }
            let work = tempfile::tempdir()?;
            let target = if with_honest {
                100
            } else {
                forger.reachable_alone
            };
            let run = run_victim(
                &exe,
                fixtures,
                work.path(),
                attack,
                &forger,
                with_honest.then_some(&honest),
                target,
                Duration::from_secs(300),
            )
            .await?;
            if json {
                println!("{}", serde_json::to_string(&run)?);
            } else {
                println!(
                    "{:<28} {:<12} mc {:>3}/{:<3} {:>7.1} s  peak RSS {:>6.1} MiB  forger: {:>5} queries, {:>4} forged, score {}{}  honest score {}",
                    format!("{attack:?}"),
                    if with_honest { "with honest" } else { "forger alone" },
                    run.reached,
                    run.target,
                    run.seconds,
                    run.peak_rss_mib,
                    run.forger_queries,
                    run.forged,
                    run.forger_score.map_or("none (dropped)".into(), |s| format!("{s:.0}")),
                    if run.forger_banned { ", banned" } else { "" },
                    run.honest_score.map_or("-".into(), |s| format!("{s:.0}")),
                );
            }
        }
        forger.node.shutdown().await;
        honest.node.shutdown().await;
    }
    Ok(())
}
