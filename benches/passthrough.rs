//! Passthrough at the physical limit: the same `tools/call`, straight to a server and
//! through each proxy, all driven by one client (rmcp's) in one run, interleaved so that
//! machine noise hits every arm alike.
//!
//! - **Latency**: server-everything's `echo` (run by the Node that tests/interop pins) over
//!   each arm: direct (stdio); a byte copier, the floor of any stdio proxy (this binary
//!   copying bytes both ways, reading none); planmux over stdio and over streamable HTTP;
//!   and the peers, each in front of its own server-everything over stdio: fastmcp's
//!   proxy (stdio, PyPI), supergateway and mcp-proxy (streamable HTTP, npm). Each round
//!   alternates the arms call by call. Per arm: median and p90 over every round, and the
//!   ratio to direct (the median over rounds of that round's median ratio). The headline,
//!   on its own line, is planmux over direct on stdio (target ≤ 1.15). The chaos demo's
//!   `echo`, direct, through the copier and through planmux, is a second table: it shows
//!   planmux's own share of the time.
//! - **Throughput**: each arm's one session with 1 caller, then with 10 callers at once.
//! - **Large answers**: the chaos demo's `bytes` (20 MB of text) direct, through the
//!   copier and through planmux (target ≤ 1.2).
//! - **Start-up** of the default config.
//!
//! The peers are pinned in tests/interop (package.json, requirements-peers.txt) and
//! installed by scripts/install-interop. A peer that is not installed, or does not start,
//! prints one line saying why it is skipped; one that fails a call leaves the later tables.
//! Each process's stderr goes to target/bench/passthrough-<server>-<arm>.log.
//!
//! `cargo bench --features bench --bench passthrough` runs it in full (about a minute
//! here); `-- --quick` and `cargo test` run one short round, to check it still works;
//! `-- --latency` runs only the server-everything latency table (under a minute).
#![allow(clippy::print_stdout)]

#[path = "passthrough/arms.rs"]
mod arms;
#[path = "common/peers.rs"]
mod peers;

use std::time::{Duration, Instant};

use arms::{Arm, BIN, Route, Server, Setup, echo_args, start_arms, stdio_session, text};
use rmcp::model::JsonObject;
use serde_json::json;

/// The throughput table's caller counts, all on one session.
const CALLERS: [usize; 2] = [1, 10];

/// How much each part runs: `cargo test` and `-- --quick` only check that it still works.
struct Sizes {
    /// Interleaved latency rounds.
    rounds: usize,
    /// Timed calls per arm per round.
    calls: usize,
    /// Untimed calls per arm before the first round: connections, caches and JITs warm up.
    warmup: usize,
    /// Calls per arm for each caller count of the throughput table.
    throughput: usize,
    /// The large answer, in bytes.
    answer_bytes: usize,
    /// Large-answer calls per arm.
    answer_calls: usize,
    /// Start-ups of the default config.
    startups: usize,
}

impl Sizes {
    /// What `cargo test` runs.
    const QUICK: Sizes = Sizes {
        rounds: 1,
        calls: 20,
        warmup: 4,
        throughput: 20,
        answer_bytes: 1_000_000,
        answer_calls: 1,
        startups: 2,
    };
    /// What `cargo bench` runs.
    const FULL: Sizes = Sizes {
        rounds: 5,
        calls: 300,
        warmup: 60,
        throughput: 2_000,
        answer_bytes: 20_000_000,
        answer_calls: 15,
        startups: 10,
    };
}

/// One arm's latency table entry: its calls round by round, or why it dropped out.
#[derive(Default)]
struct Row {
    /// Microseconds per call, one list per round.
    rounds: Vec<Vec<f64>>,
    /// Set when a peer failed a call: its later calls are skipped and its row says why.
    failed: Option<String>,
}

impl Row {
    /// Every round's calls together, sorted.
    fn all(&self) -> Vec<f64> {
        let mut all: Vec<f64> = self.rounds.concat();
        all.sort_by(f64::total_cmp);
        all
    }

    /// Each round's median.
    fn medians(&self) -> Vec<f64> {
        let sorted = |round: &Vec<f64>| {
            let mut round = round.clone();
            round.sort_by(f64::total_cmp);
            round
        };
        self.rounds
            .iter()
            .map(|r| percentile(&sorted(r), 0.5))
            .collect()
    }

    /// Against `direct`: the median over rounds of this round's median over direct's, so
    /// a round the machine slowed down for every arm counts once, not by its size.
    fn ratio(&self, direct: &Row) -> f64 {
        let pairs = self.medians().into_iter().zip(direct.medians());
        let mut ratios: Vec<f64> = pairs.map(|(arm, direct)| arm / direct).collect();
        ratios.sort_by(f64::total_cmp);
        percentile(&ratios, 0.5)
    }
}

/// The `p` quantile of sorted values, by nearest rank; 0 for none.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// The latency table's figures: a warm-up round whose times are dropped, then the rounds.
async fn latency(arms: &[Arm], sizes: &Sizes) -> anyhow::Result<Vec<Row>> {
    let mut rows: Vec<Row> = arms.iter().map(|_| Row::default()).collect();
    round(arms, &mut rows, sizes.warmup).await?;
    rows.iter_mut().for_each(|row| row.rounds.clear());
    for _ in 0..sizes.rounds {
        round(arms, &mut rows, sizes.calls).await?;
    }
    Ok(rows)
}

/// One round of `calls` echoes per arm, the arms taking turns call by call; call `i`
/// starts with arm `i mod n`, so that no arm always runs first (on a machine the previous
/// call left warmer, or busier).
async fn round(arms: &[Arm], rows: &mut [Row], calls: usize) -> anyhow::Result<()> {
    rows.iter_mut()
        .for_each(|row| row.rounds.push(Vec::with_capacity(calls)));
    let args = echo_args();
    for i in 0..calls {
        for k in 0..arms.len() {
            let at = (i + k) % arms.len();
            record(&arms[at], &args, &mut rows[at]).await?;
        }
    }
    Ok(())
}

/// Times one echo into `row`'s current round. A peer's failure ends its row; planmux's or
/// the server's ends the bench.
async fn record(arm: &Arm, args: &JsonObject, row: &mut Row) -> anyhow::Result<()> {
    if row.failed.is_some() {
        return Ok(());
    }
    match arm.timed("echo", args).await {
        Ok((took, _)) => {
            if let Some(round) = row.rounds.last_mut() {
                round.push(micros(took));
            }
        }
        Err(e) if arm.route.is_peer() => row.failed = Some(format!("{e:#}")),
        Err(e) => return Err(e.context(arm.route.label())),
    }
    Ok(())
}

/// A duration in microseconds.
fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Prints a latency table; the first arm is direct.
fn print_latency(title: &str, arms: &[Arm], rows: &[Row]) {
    println!("\n{title}\n");
    println!("| arm | median µs | p90 µs | × direct |");
    println!("| --- | --- | --- | --- |");
    for (arm, row) in arms.iter().zip(rows) {
        if let Some(why) = &row.failed {
            println!("| {} | failed: {why} | – | – |", arm.route.label());
            continue;
        }
        let all = row.all();
        let (p50, p90) = (percentile(&all, 0.5), percentile(&all, 0.9));
        println!(
            "| {} | {p50:.1} | {p90:.1} | {:.2} |",
            arm.route.label(),
            row.ratio(&rows[0])
        );
    }
}

/// The figure, on its own line: planmux against server-everything, both on stdio.
fn print_headline(arms: &[Arm], rows: &[Row]) {
    let Some(at) = arms.iter().position(|arm| arm.route == Route::Planmux) else {
        return;
    };
    let ratio = rows[at].ratio(&rows[0]);
    println!(
        "\nheadline: planmux/direct, server-everything echo over stdio: {ratio:.3} (median of {} round ratios; target ≤ 1.15)",
        rows[at].rounds.len()
    );
}

/// The arms that did not fail a call; the others are closed.
async fn without_failed(arms: Vec<Arm>, rows: &[Row]) -> Vec<Arm> {
    let mut kept = Vec::new();
    for (arm, row) in arms.into_iter().zip(rows) {
        match row.failed {
            None => kept.push(arm),
            Some(_) => arm.close().await,
        }
    }
    kept
}

/// Calls per second on the arm's one session: `callers` loops at once, `calls` in all.
async fn throughput(arm: &Arm, callers: usize, calls: usize) -> anyhow::Result<f64> {
    let args = &echo_args();
    let each = (calls / callers).max(1);
    let caller = move |_: usize| async move {
        for _ in 0..each {
            arm.send(arm.params("echo", args)).await?;
        }
        anyhow::Ok(())
    };
    let started = Instant::now();
    futures::future::try_join_all((0..callers).map(caller)).await?;
    Ok((each * callers) as f64 / started.elapsed().as_secs_f64())
}

/// Measures and prints the throughput table: every arm with each of `CALLERS`; the first
/// arm is direct.
async fn print_throughput(arms: &[Arm], calls: usize) -> anyhow::Result<()> {
    let mut table: Vec<Vec<Result<f64, String>>> = arms.iter().map(|_| Vec::new()).collect();
    for callers in CALLERS {
        for (arm, cells) in arms.iter().zip(&mut table) {
            cells.push(match throughput(arm, callers, calls).await {
                Ok(rate) => Ok(rate),
                Err(e) if arm.route.is_peer() => Err(format!("{e:#}")),
                Err(e) => return Err(e.context(arm.route.label())),
            });
        }
    }
    println!("\nthroughput: server-everything echo, {calls} calls per cell on one session\n");
    println!("| arm | 1 caller calls/s | × direct | 10 callers calls/s | × direct |");
    println!("| --- | --- | --- | --- | --- |");
    for (arm, cells) in arms.iter().zip(&table) {
        let shown: Vec<String> = cells.iter().zip(&table[0]).map(throughput_cell).collect();
        println!("| {} | {} |", arm.route.label(), shown.join(" | "));
    }
    Ok(())
}

/// A throughput cell and its ratio to direct's (the same caller count).
fn throughput_cell(cell: (&Result<f64, String>, &Result<f64, String>)) -> String {
    match cell {
        (Ok(rate), Ok(direct)) => format!("{rate:.0} | {:.2}", rate / direct),
        (Ok(rate), Err(_)) => format!("{rate:.0} | –"),
        (Err(why), _) => format!("failed: {why} | –"),
    }
}

/// The server-everything tables: latency (and the headline), then throughput unless only
/// the latency is asked for.
async fn everything(setup: &Setup, sizes: &Sizes, only_latency: bool) -> anyhow::Result<()> {
    if !setup.everything.is_file() {
        println!("server-everything: skipped: not installed (scripts/install-interop installs it)");
        return Ok(());
    }
    let arms = start_arms(&Route::ALL, Server::Everything, setup).await?;
    let rows = latency(&arms, sizes).await?;
    let title = format!(
        "server-everything echo: {} round(s) of {} calls per arm, interleaved",
        sizes.rounds, sizes.calls
    );
    print_latency(&title, &arms, &rows);
    print_headline(&arms, &rows);
    let arms = without_failed(arms, &rows).await;
    if !only_latency {
        print_throughput(&arms, sizes.throughput).await?;
    }
    for arm in arms {
        arm.close().await;
    }
    Ok(())
}

/// The chaos demo tables: echo latency, then large answers, direct, through the copier
/// and through planmux.
async fn chaos(setup: &Setup, sizes: &Sizes) -> anyhow::Result<()> {
    let arms = start_arms(
        &[Route::Direct, Route::Copier, Route::Planmux],
        Server::Chaos,
        setup,
    )
    .await?;
    let rows = latency(&arms, sizes).await?;
    print_latency(
        "chaos demo echo (planmux's own share of the time)",
        &arms,
        &rows,
    );
    large_answers(&arms, sizes).await?;
    for arm in arms {
        arm.close().await;
    }
    Ok(())
}

/// `bytes` through each arm in turn (the first is direct), `answer_calls` calls each,
/// rotating which goes first; prints the median and the ratio to direct.
async fn large_answers(arms: &[Arm], sizes: &Sizes) -> anyhow::Result<()> {
    let n = sizes.answer_bytes;
    let mut args = JsonObject::new();
    args.insert("n".into(), json!(n));
    let mut times: Vec<Vec<f64>> = arms.iter().map(|_| Vec::new()).collect();
    for i in 0..sizes.answer_calls {
        for k in 0..arms.len() {
            let at = (i + k) % arms.len();
            let (took, result) = arms[at].timed("bytes", &args).await?;
            let got = text(&result).len();
            anyhow::ensure!(got == n, "{}: {got} bytes, not {n}", arms[at].route.label());
            times[at].push(took.as_secs_f64() * 1e3);
        }
    }
    println!(
        "\nlarge answers: chaos demo bytes, {n} bytes, {} call(s) per arm, interleaved\n",
        sizes.answer_calls
    );
    println!("| arm | median ms | × direct |");
    println!("| --- | --- | --- |");
    let medians: Vec<f64> = times
        .iter_mut()
        .map(|t| {
            t.sort_by(f64::total_cmp);
            percentile(t, 0.5)
        })
        .collect();
    for (arm, median) in arms.iter().zip(&medians) {
        println!(
            "| {} | {median:.1} | {:.2} |",
            arm.route.label(),
            median / medians[0]
        );
    }
    println!("(target: planmux ≤ 1.2 × direct)");
    Ok(())
}

/// Start-up of the built-in default config: spawn to a listed catalog.
async fn startup(sizes: &Sizes) -> anyhow::Result<()> {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/servers.toml");
    let mut times = Vec::new();
    for _ in 0..sizes.startups {
        let mut command = std::process::Command::new(BIN);
        command.args(["serve", "--config", config]);
        let started = Instant::now();
        let (session, process) = stdio_session(command, "passthrough-startup").await?;
        let tools = session.list_all_tools().await?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(!tools.is_empty(), "the default config lists no tools");
        let _ = session.cancel().await;
        drop(process);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "\ndefault config start-up (spawn → initialize → tools/list): median {:.1} ms over {} runs",
        percentile(&times, 0.5),
        sizes.startups
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    if std::env::var_os(arms::COPIER).is_some() {
        return arms::copy_both_ways();
    }
    // rmcp's reqwest client needs a TLS provider, as the binary's (src/main.rs).
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Runtime::new()?.block_on(run())
}

/// The bench itself.
async fn run() -> anyhow::Result<()> {
    // `cargo bench` passes --bench; under `cargo test` (CI) this only checks it still runs.
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let sizes = if quick { Sizes::QUICK } else { Sizes::FULL };
    let setup = Setup::new()?;
    // `-- --latency`: only the server-everything latency table, for a quicker look.
    if args.iter().any(|a| a == "--latency") {
        return everything(&setup, &sizes, true).await;
    }
    everything(&setup, &sizes, false).await?;
    chaos(&setup, &sizes).await?;
    startup(&sizes).await?;
    Ok(())
}
