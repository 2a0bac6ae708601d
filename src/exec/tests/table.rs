//! The scheduler's status rules as one-line cases, and a property: whatever the plan and
//! whenever it is stopped, every step ends in exactly one status, once.

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;

use super::*;

/// A plan in a tiny notation: `a:sleep100 b(a):fail10` is step `a` sleeping 100 ms and
/// step `b`, which reads `a`, failing after 10 ms.
fn notation(steps: &str, extra: Value) -> Value {
    let steps: Vec<Value> = steps
        .split_whitespace()
        .map(|step| {
            let (head, call) = step.split_once(':').unwrap_or((step, "sleep0"));
            let (id, deps) = match head.split_once('(') {
                Some((id, deps)) => (id, deps.trim_end_matches(')')),
                None => (head, ""),
            };
            let split = call
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(call.len());
            let (tool, ms) = call.split_at(split);
            let mut args = json!({"ms": ms.parse::<u64>().unwrap_or(0)});
            for (k, dep) in deps.split(',').filter(|d| !d.is_empty()).enumerate() {
                args[format!("d{k}")] = json!(format!("$ref:{dep}"));
            }
            json!({"id": id, "tool": format!("t__{tool}"), "args": args})
        })
        .collect();
    let mut plan = json!({ "steps": steps });
    if let (Value::Object(plan), Value::Object(extra)) = (&mut plan, extra) {
        plan.extend(extra);
    }
    plan
}

/// Runs the plan and compares `id=status …` and the run's status.
async fn check(steps: &str, extra: Value, expect: &str, run_status: RunStatus) {
    let p = plan(notation(steps, extra));
    let (record, _, _) = exec(&p, &settings()).await;
    let got: Vec<String> = record
        .steps
        .iter()
        .map(|s| format!("{}={}", s.id, s.status.as_str()))
        .collect();
    assert_eq!(got.join(" "), expect, "{steps}");
    assert_eq!(record.status, run_status, "{steps}");
}

#[tokio::test(start_paused = true)]
async fn status_rules() {
    use RunStatus::{Failed, Partial, Succeeded};
    let none = json!({});
    check(
        "a:sleep10 b(a):sleep10",
        none.clone(),
        "a=succeeded b=succeeded",
        Succeeded,
    )
    .await;
    check(
        "a:sleep100 b(a):fail10 c(b):sleep10 d:sleep10",
        none.clone(),
        "a=succeeded b=failed c=skipped d=succeeded",
        Partial,
    )
    .await;
    check(
        "a:fail100 b:sleep500 c(b):sleep10",
        json!({"on_error": "fail_fast"}),
        "a=failed b=cancelled c=skipped",
        Failed,
    )
    .await;
    check(
        "a:fail10 b(a):sleep10",
        json!({"on_error": "continue"}),
        "a=failed b=succeeded",
        Partial,
    )
    .await;
    check(
        "a:sleep100 b:sleep200 c:fail10",
        json!({"strategy": "competitive"}),
        "a=succeeded b=cancelled c=failed",
        Succeeded,
    )
    .await;
    check(
        "a:fail10 b:fail20",
        json!({"strategy": "competitive"}),
        "a=failed b=failed",
        Failed,
    )
    .await;
    check(
        "a:fail10 b:sleep10",
        json!({"strategy": "sequential"}),
        "a=failed b=succeeded",
        Partial,
    )
    .await;
    check(
        "a:sleep100 b(a):sleep500 c(b):sleep10",
        json!({"timeout_ms": 300}),
        "a=succeeded b=timed_out c=skipped",
        Partial,
    )
    .await;
    check(
        "a:deaf100 b(a):deaf5000 c:hang",
        json!({"timeout_ms": 300}),
        "a=succeeded b=timed_out c=timed_out",
        Partial,
    )
    .await;
}

/// Counts how often each step is reported finished.
#[derive(Default)]
struct Tally(Mutex<Vec<String>>, AtomicUsize);

impl Observer for Tally {
    fn step_started(&self, _step: &PlannedStep) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }

    fn step_finished(&self, record: &StepRecord, _finished: usize, _total: usize) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.id.clone());
    }
}

fn step_strategy() -> impl Strategy<Value = String> {
    let tool = prop_oneof!["sleep", "fail", "hang", "deaf", "flaky"];
    (tool, 0u64..400).prop_map(|(tool, ms)| format!("{tool}{ms}"))
}

/// Cases: `PROPTEST_CASES` when set, for long runs by hand
/// (`PROPTEST_CASES=20000 cargo test --lib every_step_ends`), else 512.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_step_ends_in_exactly_one_status(
        calls in prop::collection::vec(step_strategy(), 1..10),
        deps in prop::collection::vec(prop::collection::vec(any::<prop::sample::Index>(), 0..3), 10),
        strategy in prop_oneof!["auto", "sequential", "chained", "competitive"],
        on_error in prop_oneof!["fail_forward", "fail_fast", "continue"],
        timeout in 50u64..2_000,
        cancel_after in prop::option::of(0u64..1_500),
    ) {
        let steps: Vec<String> = calls.iter().enumerate().map(|(i, call)| {
            let reads: Vec<String> = if i == 0 || strategy == "competitive" {
                Vec::new()
            } else {
                let mut r: Vec<String> = deps[i].iter().map(|d| format!("s{}", d.index(i))).collect();
                r.dedup();
                r
            };
            format!("s{i}({}):{call}", reads.join(","))
        }).collect();
        let p = plan(notation(
            &steps.join(" "),
            json!({"strategy": strategy, "on_error": on_error, "timeout_ms": timeout}),
        ));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()?;
        let tally = Tally::default();
        let (record, took) = runtime.block_on(async {
            let cancel = CancellationToken::new();
            let trigger = cancel.clone();
            let started = Instant::now();
            let settings = settings();
            let work = run(&p, Arc::new(Fake::default()), &settings, &tally, cancel);
            tokio::pin!(work);
            let record = match cancel_after {
                Some(after) => tokio::select! {
                    record = &mut work => record,
                    () = tokio::time::sleep(ms(after)) => {
                        trigger.cancel();
                        work.await
                    }
                },
                None => work.await,
            };
            (record, started.elapsed())
        });
        // Exactly one record per step, in plan order, each reported finished once.
        let ids: Vec<&str> = p.steps().iter().map(|s| s.id.as_str()).collect();
        let recorded: Vec<&str> = record.steps.iter().map(|s| s.id.as_str()).collect();
        prop_assert_eq!(&recorded, &ids);
        let mut finished = tally.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        finished.sort();
        let mut expected: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        expected.sort();
        prop_assert_eq!(finished, expected);
        prop_assert_eq!(tally.1.load(Ordering::Relaxed), record.steps.iter().filter(|s| s.started_ms.is_some()).count());
        for step in &record.steps {
            let started = step.started_ms.is_some();
            prop_assert_eq!(started, step.status != StepStatus::Skipped, "{:?}", step);
            prop_assert_eq!(step.status == StepStatus::Skipped, step.reason.is_some(), "{:?}", step);
            if matches!(step.status, StepStatus::Failed | StepStatus::TimedOut | StepStatus::Cancelled) {
                prop_assert!(step.error.is_some(), "{:?}", step);
            }
        }
        // No plan outlives its limit by more than the grace a stopped step gets.
        prop_assert!(took <= ms(timeout) + crate::exec::step::CANCEL_GRACE * 2, "took {:?}", took);
    }
}
