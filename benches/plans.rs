//! Plan execution figures, each measured within one run:
//!
//! 1. plan timing against the critical path (a 16-wide fan-out, a diamond with unequal
//!    branches, a 10-step chain) through a real `planmux demo chaos` child, beside a
//!    wave-by-wave baseline (a barrier per dependency level) built here for comparison;
//! 2. scheduler scaling: chains and fan-outs of 10 … 10,000 steps against an in-process
//!    instant tool, µs per step and validation time, with a chart;
//! 3. start-up of five servers versus the slowest alone, and planmux's memory idle and
//!    after 10,000 calls.
//!
//! `cargo bench --features bench --bench plans`; under `cargo test` it runs a quick version
//! (short sleeps, small plans) only to check that it still works.
#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use planmux::config::Config;
use planmux::downstream::Downstreams;
use planmux::exec::{InvokeError, Invoker, Quiet, RunStatus, Settings, run};
use planmux::plan::{
    Limits, PlannedStep, StepId, ToolOutcome, ToolSpec, ValidatedPlan, prepare, schedule,
    tool_outcome,
};
use planmux::runner::PlanCalls;
use plotters::prelude::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_planmux");

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let mut report = serde_json::Map::new();
    report.insert("timing".into(), timing(quick).await?);
    report.insert("scaling".into(), scaling(quick).await?);
    report.insert("startup_memory".into(), startup_and_memory(quick).await?);
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&out)?;
    std::fs::write(
        out.join("plans.json"),
        serde_json::to_string_pretty(&Value::Object(report))?,
    )?;
    Ok(())
}

// ---- 1. plan timing against the critical path ----

fn config(text: &str) -> anyhow::Result<Config> {
    Ok(Config::parse(
        text,
        "bench.toml",
        &std::env::temp_dir(),
        &|_| None,
    )?)
}

fn chaos_config() -> String {
    format!(
        "[proxy]\nmax_concurrency = 32\n[servers.chaos]\ncommand = \"{BIN}\"\nargs = [\"demo\", \"chaos\"]\n"
    )
}

fn sleep_step(id: &str, ms: u64, after: &[&str]) -> Value {
    let mut args = json!({"ms": ms});
    for (i, dep) in after.iter().enumerate() {
        args[format!("after{i}")] = json!(format!("$ref:{dep}.slept_ms"));
    }
    json!({"id": id, "tool": "chaos__sleep", "args": args})
}

/// (name, plan, critical path in ms)
fn timing_plans(unit: u64) -> Vec<(&'static str, Value, u64)> {
    let fan: Vec<Value> = (0..16)
        .map(|i| sleep_step(&format!("f{i:02}"), 10 * unit, &[]))
        .collect();
    let diamond = vec![
        sleep_step("a", 2 * unit, &[]),
        sleep_step("b", 8 * unit, &["a"]),
        sleep_step("c", 2 * unit, &["a"]),
        sleep_step("d", 2 * unit, &["c"]),
        sleep_step("e", 2 * unit, &["b", "d"]),
    ];
    let chain: Vec<Value> = (0..10)
        .map(|i| {
            let prev = format!("c{}", i.max(1) - 1);
            if i == 0 {
                sleep_step("c0", unit, &[])
            } else {
                sleep_step(&format!("c{i}"), unit, &[&prev])
            }
        })
        .collect();
    vec![
        (
            "16-wide fan-out",
            json!({"steps": fan, "outputs": []}),
            10 * unit,
        ),
        (
            "diamond, unequal branches",
            json!({"steps": diamond, "outputs": ["e"]}),
            12 * unit,
        ),
        (
            "10-step chain",
            json!({"steps": chain, "outputs": ["c9"]}),
            10 * unit,
        ),
    ]
}

/// The baseline planmux improves on: run the plan level by level, each level's steps
/// concurrently, waiting for the whole level before starting the next.
async fn run_in_waves(plan: &ValidatedPlan, invoker: &Arc<PlanCalls>) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut outputs: HashMap<StepId, Value> = HashMap::new();
    let errors = HashMap::new();
    for level in schedule(plan).levels() {
        let calls = level.iter().map(|id| {
            let args = plan.resolve_args_from(id, &outputs, &errors);
            let step = plan.step(id).cloned();
            let invoker = invoker.clone();
            async move {
                let step = step.ok_or_else(|| anyhow::anyhow!("no step"))?;
                let args = args.map_err(|missing| anyhow::anyhow!("{missing}"))?;
                let result = invoker
                    .invoke("waves", &step, args, CancellationToken::new())
                    .await;
                match result.map(|r| tool_outcome(&r)) {
                    Ok(ToolOutcome::Success(value)) => Ok((step.id.clone(), value)),
                    other => Err(anyhow::anyhow!(
                        "step {} failed in the wave baseline: {other:?}",
                        step.id
                    )),
                }
            }
        });
        for done in futures::future::join_all(calls).await {
            let (id, value) = done?;
            outputs.insert(id, value);
        }
    }
    Ok(started.elapsed())
}

async fn timing(quick: bool) -> anyhow::Result<Value> {
    let unit = if quick { 10 } else { 100 };
    let config = config(&chaos_config())?;
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let specs = downstreams.catalog().tool_specs().to_vec();
    let settings = Settings::from_config(&config);
    let calls = Arc::new(PlanCalls::new(downstreams.clone(), None));
    println!("\n## Plan timing against the critical path (chaos over stdio, unit {unit} ms)");
    println!(
        "{:<28} {:>9} {:>10} {:>10} {:>12} {:>12} {:>14}",
        "plan", "critical", "planmux", "waves", "planmux/cp", "waves/cp", "planmux/waves"
    );
    let mut rows = Vec::new();
    for (name, plan, critical) in timing_plans(unit) {
        let plan = prepare(&plan, &specs, &Limits::default())
            .map_err(|i| anyhow::anyhow!("{name}: {}", planmux::plan::render_issues(&i)))?;
        // Interleave, best of three each, to keep machine noise off one side.
        let (mut ours, mut waves) = (Duration::MAX, Duration::MAX);
        for _ in 0..3 {
            let started = Instant::now();
            let record = run(
                &plan,
                calls.clone(),
                &settings,
                &Quiet,
                CancellationToken::new(),
            )
            .await;
            anyhow::ensure!(
                record.status == RunStatus::Succeeded,
                "{name}: {:?}",
                record.status
            );
            ours = ours.min(started.elapsed());
            waves = waves.min(run_in_waves(&plan, &calls).await?);
        }
        let cp = Duration::from_millis(critical);
        let ratio = |d: Duration| d.as_secs_f64() / cp.as_secs_f64();
        println!(
            "{name:<28} {:>7} ms {:>7.1} ms {:>7.1} ms {:>12.3} {:>12.3} {:>14.3}",
            critical,
            ours.as_secs_f64() * 1e3,
            waves.as_secs_f64() * 1e3,
            ratio(ours),
            ratio(waves),
            ours.as_secs_f64() / waves.as_secs_f64()
        );
        rows.push(json!({"plan": name, "critical_ms": critical, "planmux_ms": ours.as_secs_f64() * 1e3,
            "waves_ms": waves.as_secs_f64() * 1e3, "planmux_over_critical": ratio(ours),
            "waves_over_critical": ratio(waves), "planmux_over_waves": ours.as_secs_f64() / waves.as_secs_f64()}));
    }
    downstreams.shutdown().await;
    Ok(Value::Array(rows))
}

// ---- 2. scheduler scaling ----

/// A tool that answers at once with its arguments, so only planmux's own work is timed.
struct Instant0;

impl Invoker for Instant0 {
    async fn invoke(
        &self,
        _run: &str,
        _step: &PlannedStep,
        args: Value,
        _cancel: CancellationToken,
    ) -> Result<Value, InvokeError> {
        Ok(json!({"content": [], "structuredContent": args}))
    }
}

fn instant_specs() -> Vec<ToolSpec> {
    vec![ToolSpec {
        exported: "t__echo".into(),
        server: "t".into(),
        tool: "echo".into(),
        input_schema: json!({"type": "object", "properties": {"n": {"type": "integer"}, "prev": {}}}),
        output_schema: None,
        read_only: true,
        idempotent: true,
        tier: planmux::policy::Tier::Read,
    }]
}

fn scaling_plan(n: usize, chain: bool) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut args = json!({"n": i});
            if chain && i > 0 {
                args["prev"] = json!(format!("$ref:s{}.n", i - 1));
            }
            json!({"id": format!("s{i}"), "tool": "t__echo", "args": args})
        })
        .collect();
    json!({"steps": steps, "outputs": [format!("s{}", n - 1)]})
}

async fn scaling(quick: bool) -> anyhow::Result<Value> {
    let sizes: &[usize] = if quick {
        &[10, 100, 1000]
    } else {
        &[10, 100, 1000, 10_000]
    };
    let specs = instant_specs();
    let limits = Limits {
        max_plan_steps: 20_000,
        ..Limits::default()
    };
    let settings = Settings {
        max_concurrency: 64,
        ..Settings::default()
    };
    let invoker = Arc::new(Instant0);
    println!("\n## Scheduler scaling (in-process instant tool)");
    println!(
        "{:<8} {:>7} {:>14} {:>14} {:>14} {:>14}",
        "shape", "steps", "validate µs/st", "run µs/step", "total µs/st", "run total ms"
    );
    let mut rows = Vec::new();
    for chain in [true, false] {
        for &n in sizes {
            let value = scaling_plan(n, chain);
            let reps = (10_000 / n).clamp(1, 50);
            let (mut validate, mut execute) = (Duration::MAX, Duration::MAX);
            for _ in 0..reps {
                let started = Instant::now();
                let plan = prepare(&value, &specs, &limits)
                    .map_err(|i| anyhow::anyhow!("{}", planmux::plan::render_issues(&i)))?;
                validate = validate.min(started.elapsed());
                let started = Instant::now();
                let record = run(
                    &plan,
                    invoker.clone(),
                    &settings,
                    &Quiet,
                    CancellationToken::new(),
                )
                .await;
                execute = execute.min(started.elapsed());
                anyhow::ensure!(record.status == RunStatus::Succeeded, "scaling run failed");
            }
            let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
            let shape = if chain { "chain" } else { "fan-out" };
            println!(
                "{shape:<8} {n:>7} {:>14.2} {:>14.2} {:>14.2} {:>14.2}",
                per(validate),
                per(execute),
                per(validate + execute),
                execute.as_secs_f64() * 1e3
            );
            rows.push(
                json!({"shape": shape, "steps": n, "validate_us_per_step": per(validate),
                "run_us_per_step": per(execute), "total_us_per_step": per(validate + execute)}),
            );
        }
    }
    if !quick {
        draw_scaling(&rows)?;
    }
    Ok(Value::Array(rows))
}

fn draw_scaling(rows: &[Value]) -> anyhow::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("scaling.svg");
    let root = SVGBackend::new(&path, (720, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    // Leave room above the target line, so it shows even when every point is below it.
    let max_us = (rows
        .iter()
        .filter_map(|r| r["total_us_per_step"].as_f64())
        .fold(1.0, f64::max)
        * 1.3)
        .max(25.0);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "planmux scheduler: µs per step (validation + run)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d((10f64..10_000f64).log_scale(), 0f64..max_us)?;
    chart
        .configure_mesh()
        .x_desc("steps in the plan")
        .y_desc("µs per step")
        .draw()?;
    let series = [
        ("chain", "total_us_per_step", RED),
        ("fan-out", "total_us_per_step", BLUE),
        ("chain", "run_us_per_step", RGBColor(240, 150, 150)),
        ("fan-out", "run_us_per_step", RGBColor(150, 150, 240)),
    ];
    for (shape, field, color) in series {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r["shape"] == shape)
            .filter_map(|r| Some((r["steps"].as_f64()?, r[field].as_f64()?)))
            .collect();
        let label = format!(
            "{shape}, {}",
            if field == "run_us_per_step" {
                "run only"
            } else {
                "validate + run"
            }
        );
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)).point_size(3))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .draw_series(LineSeries::new(
            vec![(10.0, 20.0), (10_000.0, 20.0)],
            BLACK.stroke_width(1),
        ))?
        .label("target: 20 µs per step")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    println!("chart: {}", path.display());
    Ok(())
}

// ---- 3. start-up and memory ----

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Time to a ready catalog with every server of `entries` versus each alone (best of
/// `reps`): (together, slowest alone, sum of all alone).
async fn startup(
    entries: &[String],
    reps: usize,
) -> anyhow::Result<(Duration, Duration, Duration)> {
    let ready = |text: String| async move {
        let config = config(&text)?;
        let mut best = Duration::MAX;
        for _ in 0..reps {
            let started = Instant::now();
            let downstreams = Downstreams::start(&config, Arc::default()).await;
            best = best.min(started.elapsed());
            anyhow::ensure!(
                downstreams.statuses().iter().all(|s| s.ready),
                "a server failed to start"
            );
            downstreams.shutdown().await;
        }
        anyhow::Ok(best)
    };
    let (mut slowest, mut sum) = (Duration::ZERO, Duration::ZERO);
    for entry in entries {
        let alone = ready(entry.clone()).await?;
        slowest = slowest.max(alone);
        sum += alone;
    }
    Ok((ready(entries.concat()).await?, slowest, sum))
}

async fn startup_and_memory(quick: bool) -> anyhow::Result<Value> {
    println!("\n## Start-up and memory");
    let reps = if quick { 1 } else { 5 };
    let demos = ["metrics", "weather", "files", "chaos", "chaos"];
    let entries: Vec<String> = demos
        .iter()
        .enumerate()
        .map(|(i, demo)| {
            format!("[servers.s{i}]\ncommand = \"{BIN}\"\nargs = [\"demo\", \"{demo}\"]\n")
        })
        .collect();
    let (together, slowest, sum) = startup(&entries, reps).await?;
    // Servers that wait before serving (like `npx` resolving a package): start-up is then
    // I/O, not CPU, and five cost what the slowest costs.
    let scale = if quick { 0.1 } else { 1.0 };
    let waiting: Vec<String> = (1..=5)
        .map(|i| {
            let delay = 0.05 * f64::from(i) * scale;
            format!("[servers.w{i}]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep {delay}; exec {BIN} demo chaos\"]\n")
        })
        .collect();
    let (w_together, w_slowest, w_sum) = startup(&waiting, reps).await?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (label, t, s, a) in [
        ("5 demo servers (CPU-bound start)", together, slowest, sum),
        ("5 servers waiting 50-250 ms", w_together, w_slowest, w_sum),
    ] {
        println!(
            "{label:<34} together {:>7.1} ms | slowest alone {:>7.1} ms | sum alone {:>7.1} ms | together/slowest {:.2} | together/sum {:.2}",
            ms(t),
            ms(s),
            ms(a),
            ms(t) / ms(s),
            ms(t) / ms(a)
        );
    }
    // Memory of a serving planmux (the default config, in-process demos).
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args([
        "serve",
        "--config",
        concat!(env!("CARGO_MANIFEST_DIR"), "/servers.toml"),
    ]);
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let pid = transport.id().ok_or_else(|| anyhow::anyhow!("no pid"))?;
    use rmcp::ServiceExt;
    let client = ().serve(transport).await?;
    client.list_all_tools().await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle = rss_kib(pid).unwrap_or_default();
    let calls = if quick { 500 } else { 10_000 };
    for i in 0..calls {
        let mut params = rmcp::model::CallToolRequestParams::new("chaos__echo");
        params.arguments = Some(serde_json::Map::from_iter([("i".to_string(), json!(i))]));
        client.call_tool(params).await?;
    }
    let plan = json!({"steps": [{"id": "a", "tool": "metrics__list_metrics"}, {"id": "b", "tool": "metrics__query_metric", "args": {"name": "$ref:a.metrics[0].name"}}]});
    for _ in 0..(calls / 100) {
        let mut params = rmcp::model::CallToolRequestParams::new("execute_plan");
        params.arguments = plan.as_object().cloned();
        client.call_tool(params).await?;
    }
    let after = rss_kib(pid).unwrap_or_default();
    client.cancel().await?;
    println!(
        "planmux RSS: idle {:.1} MiB, after {calls} calls and {} plans {:.1} MiB",
        idle as f64 / 1024.0,
        calls / 100,
        after as f64 / 1024.0
    );
    Ok(json!({
        "demo_servers": {"together_ms": ms(together), "slowest_alone_ms": ms(slowest), "sum_alone_ms": ms(sum)},
        "waiting_servers": {"together_ms": ms(w_together), "slowest_alone_ms": ms(w_slowest), "sum_alone_ms": ms(w_sum)},
        "rss_idle_kib": idle, "rss_after_kib": after, "calls": calls
    }))
}
