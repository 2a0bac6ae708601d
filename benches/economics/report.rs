//! The figures per scenario and arm, the targets, and their table and JSON.

use serde_json::{Map, Value, json};

use crate::meter::{ArmFigures, ENCODING};

/// Round-trips a whole plan should take: one to send it, one to answer from its result.
const TARGET_PLAN_ROUND_TRIPS: usize = 2;
/// Input tokens of one call per turn over those of `execute_plan`, at least.
const TARGET_VS_ONE_PER_TURN: f64 = 2.5;
/// Input tokens of native parallel calls over those of `execute_plan`, at least.
const TARGET_VS_PARALLEL: f64 = 1.3;

/// The three arms, in report order.
pub const ARMS: [&str; 3] = ["one per turn", "parallel", "execute_plan"];
const PLAN: usize = 2;

/// One scenario's figures, or their sum over all scenarios.
#[derive(Default)]
pub struct Line {
    pub name: &'static str,
    /// Scenarios summed in this line (1 for a scenario's own).
    pub scenarios: usize,
    /// Tool calls of the direct arms.
    pub calls: usize,
    /// Steps of the plan.
    pub plan_steps: usize,
    /// Tokens of the execute_plan tool definition each plan-arm request carries.
    pub execute_plan_tokens: usize,
    /// Bytes of every step's full output, as one call per turn reads them.
    pub raw_bytes: usize,
    /// Bytes of the plan result's `structuredContent` (the arms count its text).
    pub plan_structured_bytes: usize,
    /// By arm, in [`ARMS`] order.
    pub arms: [ArmFigures; 3],
}

impl Line {
    /// Input tokens of `arm` over those of the plan.
    pub fn ratio(&self, arm: usize) -> f64 {
        self.arms[arm].input_tokens as f64 / self.arms[PLAN].input_tokens as f64
    }

    /// [`Self::ratio`] if tool calls and results cost no tokens: the re-sent base alone,
    /// the most that fewer round-trips can save.
    pub fn bound(&self, arm: usize) -> f64 {
        self.arms[arm].base_tokens as f64 / self.arms[PLAN].base_tokens as f64
    }

    /// [`Self::ratio`] when the direct arms also carry execute_plan's definition, as they
    /// do behind planmux when the model does not use it.
    pub fn ratio_same_tools(&self, arm: usize) -> f64 {
        let extra = self.arms[arm].round_trips * self.execute_plan_tokens;
        (self.arms[arm].input_tokens + extra) as f64 / self.arms[PLAN].input_tokens as f64
    }

    /// 1 − model-visible tool-result bytes / raw tool-output bytes, for the plan arm.
    pub fn suppression(&self) -> f64 {
        1.0 - self.arms[PLAN].tool_result_bytes as f64 / self.raw_bytes as f64
    }

    /// Each target: its name, the measured value and whether it is met.
    fn targets(&self) -> [(&'static str, String, bool); 3] {
        let trips = self.arms[PLAN].round_trips;
        let (one, parallel) = (self.ratio(0), self.ratio(1));
        let per_plan = if self.scenarios == 1 {
            trips.to_string()
        } else {
            format!("{trips}/{}", self.scenarios)
        };
        [
            (
                "plan_round_trips",
                per_plan,
                trips == TARGET_PLAN_ROUND_TRIPS * self.scenarios,
            ),
            (
                "one_per_turn_vs_plan",
                format!("{one:.2}×"),
                one >= TARGET_VS_ONE_PER_TURN,
            ),
            (
                "parallel_vs_plan",
                format!("{parallel:.2}×"),
                parallel >= TARGET_VS_PARALLEL,
            ),
        ]
    }

    fn to_json(&self) -> Value {
        let targets: Map<String, Value> = self
            .targets()
            .into_iter()
            .map(|(name, value, met)| (name.to_owned(), json!({"value": value, "met": met})))
            .collect();
        json!({
            "name": self.name,
            "direct_calls": self.calls,
            "plan_steps": self.plan_steps,
            "raw_tool_output_bytes": self.raw_bytes,
            "payload_suppression": self.suppression(),
            "plan_result_structured_bytes": self.plan_structured_bytes,
            "arms": {"one_per_turn": self.arms[0], "parallel": self.arms[1], "execute_plan": self.arms[PLAN]},
            "input_ratio": {"one_per_turn_vs_plan": self.ratio(0), "parallel_vs_plan": self.ratio(1)},
            "input_ratio_if_tool_traffic_were_free": {"one_per_turn_vs_plan": self.bound(0), "parallel_vs_plan": self.bound(1)},
            "input_ratio_if_every_arm_listed_execute_plan": {"one_per_turn_vs_plan": self.ratio_same_tools(0), "parallel_vs_plan": self.ratio_same_tools(1)},
            "targets": targets,
        })
    }
}

/// Everything measured.
pub struct Report {
    pub scenarios: Vec<Line>,
    /// Tokens re-sent with every request: the prefix, and the downstream tool definitions.
    pub prefix_tokens: usize,
    pub prefix_messages: usize,
    pub tool_count: usize,
    pub tool_tokens: usize,
    /// execute_plan's definition, and its description alone.
    pub execute_plan_tokens: usize,
    pub description_tokens: usize,
    /// The same scenarios behind a large catalog, full against compact.
    pub large: crate::large::Large,
}

impl Report {
    /// The sum over every scenario.
    pub fn total(&self) -> Line {
        let mut total = Line {
            name: "all scenarios",
            execute_plan_tokens: self.execute_plan_tokens,
            ..Line::default()
        };
        for line in &self.scenarios {
            total.scenarios += line.scenarios;
            total.calls += line.calls;
            total.plan_steps += line.plan_steps;
            total.raw_bytes += line.raw_bytes;
            total.plan_structured_bytes += line.plan_structured_bytes;
            for (sum, arm) in total.arms.iter_mut().zip(&line.arms) {
                sum.add(arm);
            }
        }
        total
    }

    /// The table on stdout.
    pub fn print(&self) {
        println!("planmux economics: model round-trips and input tokens per scenario and arm\n");
        println!(
            "tokenizer {ENCODING}; re-sent on every round-trip: a conversation prefix of {} \
             tokens ({} messages: a coding/ops agent's system prompt and earlier turns) and \
             {} downstream tool definitions, {} tokens; execute_plan's definition adds {} \
             tokens ({} of them its description) to each plan-arm request",
            self.prefix_tokens,
            self.prefix_messages,
            self.tool_count,
            self.tool_tokens,
            self.execute_plan_tokens,
            self.description_tokens
        );
        println!(
            "\n{:<17} {:<13} {:>5} {:>6} {:>7} {:>7} {:>8} {:>7} {:>10}",
            "scenario", "arm", "calls", "round", "input", "output", "tool", "input", "payload"
        );
        println!(
            "{:<17} {:<13} {:>5} {:>6} {:>7} {:>7} {:>8} {:>7} {:>10}",
            "", "", "", "trips", "tokens", "tokens", "bytes", "÷ plan", "suppressed"
        );
        let total = self.total();
        for line in self.scenarios.iter().chain([&total]) {
            print_line(line);
        }
        self.print_targets(&total);
        self.large.print();
    }

    fn print_targets(&self, total: &Line) {
        println!(
            "\ntargets: execute_plan round-trips = {TARGET_PLAN_ROUND_TRIPS}; input tokens of \
             one per turn ÷ plan ≥ {TARGET_VS_ONE_PER_TURN}×; of parallel ÷ plan ≥ \
             {TARGET_VS_PARALLEL}×\n"
        );
        println!(
            "{:<17} {:<10} {:<14} {:<14} {:>15} {:>15}",
            "", "plan", "one per turn", "parallel", "bound¹", "same tools²"
        );
        println!(
            "{:<17} {:<10} {:<14} {:<14} {:>7} {:>7} {:>7} {:>7}",
            "scenario", "trips", "÷ plan", "÷ plan", "1/turn", "par.", "1/turn", "par."
        );
        for line in self.scenarios.iter().chain([total]) {
            let [trips, one, parallel] = line
                .targets()
                .map(|(_, value, met)| format!("{value} {}", if met { "met" } else { "MISSED" }));
            println!(
                "{:<17} {:<10} {:<14} {:<14} {:>6.2}× {:>6.2}× {:>6.2}× {:>6.2}×",
                line.name,
                trips,
                one,
                parallel,
                line.bound(0),
                line.bound(1),
                line.ratio_same_tools(0),
                line.ratio_same_tools(1)
            );
        }
        println!(
            "\n¹ the ratio if tool calls and results cost no tokens (round-trips × re-sent \
             base alone): the most that fewer round-trips can save"
        );
        println!(
            "² the ratio if the direct arms also listed execute_plan, as they do behind \
             planmux when the model does not use it"
        );
    }

    /// The figures as JSON (target/bench/economics.json).
    pub fn to_json(&self) -> Value {
        let scenarios: Vec<Value> = self.scenarios.iter().map(Line::to_json).collect();
        json!({
            "tokenizer": ENCODING,
            "prefix_tokens": self.prefix_tokens,
            "prefix_messages": self.prefix_messages,
            "tool_count": self.tool_count,
            "tool_definition_tokens": self.tool_tokens,
            "execute_plan_definition_tokens": self.execute_plan_tokens,
            "execute_plan_description_tokens": self.description_tokens,
            "targets": {
                "plan_round_trips": TARGET_PLAN_ROUND_TRIPS,
                "one_per_turn_vs_plan": TARGET_VS_ONE_PER_TURN,
                "parallel_vs_plan": TARGET_VS_PARALLEL,
            },
            "scenarios": scenarios,
            "total": self.total().to_json(),
            "large_catalog": self.large.to_json(),
        })
    }
}

fn print_line(line: &Line) {
    for (i, arm) in line.arms.iter().enumerate() {
        let calls = if i == PLAN {
            line.plan_steps
        } else {
            line.calls
        };
        let suppressed = if i == PLAN {
            format!("{:.1}%", 100.0 * line.suppression())
        } else {
            String::new()
        };
        println!(
            "{:<17} {:<13} {:>5} {:>6} {:>7} {:>7} {:>8} {:>6.2}× {:>10}",
            if i == 0 { line.name } else { "" },
            ARMS[i],
            calls,
            arm.round_trips,
            arm.input_tokens,
            arm.output_tokens,
            arm.tool_result_bytes,
            line.ratio(i),
            suppressed
        );
    }
}
