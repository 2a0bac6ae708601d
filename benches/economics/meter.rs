//! What each arm costs the model: round-trips and tokens, counted with a real tokenizer
//! over what a host would send on each round-trip.
//!
//! A request is rendered the way chat APIs meter it: every message is its text plus a few
//! framing tokens, the tool definitions are their JSON, and each round-trip re-sends all of
//! it. Tool calls are the JSON `{"name", "arguments"}` the model writes; tool results are
//! the text content the host puts into the conversation.

use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;

use crate::replay::{Call, Replay};

/// Framing tokens per message (role and delimiters), as OpenAI counts them for its chat
/// models (`num_tokens_from_messages` in the OpenAI cookbook).
const TOKENS_PER_MESSAGE: usize = 3;

/// Tokens every reply is primed with (`<|start|>assistant<|message|>`), same source.
const TOKENS_PER_REQUEST: usize = 3;

/// The name of the tokenizer, for the report.
pub const ENCODING: &str = "o200k_base";

/// Counts tokens with o200k_base, the encoding of GPT-4o and later OpenAI models.
pub struct Tokenizer {
    bpe: CoreBPE,
}

impl Tokenizer {
    /// Loads the encoding (embedded in tiktoken-rs; no network).
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            bpe: tiktoken_rs::o200k_base()?,
        })
    }

    /// Tokens of a text.
    pub fn count(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }

    /// Tokens of a text sent as one message.
    pub fn message(&self, text: &str) -> usize {
        self.count(text) + TOKENS_PER_MESSAGE
    }
}

/// What the host re-sends at the start of every round-trip of an arm: the conversation so
/// far (system prompt, earlier turns), the tool definitions and the user's request.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Base {
    /// The system prompt and earlier turns.
    pub prefix: usize,
    /// The tool definitions as the host sends them.
    pub tools: usize,
    /// The user's request for this scenario.
    pub request: usize,
}

impl Base {
    /// Tokens of one request before any tool traffic.
    pub fn total(self) -> usize {
        TOKENS_PER_REQUEST + self.prefix + self.tools + self.request
    }
}

/// One arm's figures.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ArmFigures {
    /// Model calls, the final answer's included.
    pub round_trips: usize,
    /// Input tokens over all round-trips.
    pub input_tokens: usize,
    /// Tokens the model wrote: tool calls, the plan, the answer.
    pub output_tokens: usize,
    /// Bytes of tool results that entered the conversation.
    pub tool_result_bytes: usize,
    /// The part of `input_tokens` that is the re-sent base (round-trips × base): what the
    /// arm would cost if tool calls and results were free.
    pub base_tokens: usize,
}

impl ArmFigures {
    /// Adds `other`'s figures to these.
    pub fn add(&mut self, other: &ArmFigures) {
        self.round_trips += other.round_trips;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.tool_result_bytes += other.tool_result_bytes;
        self.base_tokens += other.base_tokens;
    }
}

/// A conversation being metered: each model turn pays for the base and the history.
struct Meter<'t> {
    tokens: &'t Tokenizer,
    base: usize,
    /// Tokens of the tool calls and results so far.
    history: usize,
    figures: ArmFigures,
}

impl<'t> Meter<'t> {
    fn new(tokens: &'t Tokenizer, base: Base) -> Self {
        Self {
            tokens,
            base: base.total(),
            history: 0,
            figures: ArmFigures::default(),
        }
    }

    /// One round-trip: the model reads everything and writes `reply` (one message).
    fn model_turn(&mut self, reply: &str) {
        self.figures.round_trips += 1;
        self.figures.input_tokens += self.base + self.history;
        self.figures.base_tokens += self.base;
        self.figures.output_tokens += self.tokens.count(reply);
        self.history += self.tokens.message(reply);
    }

    /// The model calls `calls` in one assistant message; each result comes back as a
    /// message of its own.
    fn call(&mut self, calls: &[Call]) {
        let reply: Vec<String> = calls.iter().map(|c| tool_call(&c.tool, &c.args)).collect();
        self.model_turn(&reply.join("\n"));
        for call in calls {
            self.tool_result(&call.result_text);
        }
    }

    fn tool_result(&mut self, text: &str) {
        self.history += self.tokens.message(text);
        self.figures.tool_result_bytes += text.len();
    }

    fn answer(mut self, text: &str) -> ArmFigures {
        self.model_turn(text);
        self.figures
    }
}

/// A tool call as the model writes it.
fn tool_call(tool: &str, args: &Value) -> String {
    json!({"name": tool, "arguments": args}).to_string()
}

/// Arm 1: one tool call per round-trip, in dependency order.
pub fn one_per_turn(tokens: &Tokenizer, base: Base, replay: &Replay) -> ArmFigures {
    let mut meter = Meter::new(tokens, base);
    for call in replay.levels.iter().flatten() {
        meter.call(std::slice::from_ref(call));
    }
    meter.answer(&replay.answer)
}

/// Arm 2: native parallel tool calls, one round-trip per dependency level.
pub fn parallel(tokens: &Tokenizer, base: Base, replay: &Replay) -> ArmFigures {
    let mut meter = Meter::new(tokens, base);
    for level in &replay.levels {
        meter.call(level);
    }
    meter.answer(&replay.answer)
}

/// Arm 3: the model sends the whole plan, reads the lean result and answers.
pub fn execute_plan(tokens: &Tokenizer, base: Base, replay: &Replay) -> ArmFigures {
    let mut meter = Meter::new(tokens, base);
    meter.model_turn(&tool_call(planmux::plan::EXECUTE_PLAN_TOOL, &replay.plan));
    meter.tool_result(&replay.plan_result_text);
    meter.answer(&replay.answer)
}

/// The compact surface: the model searches (each search a round-trip whose results stay
/// in the history), sends the plan, reads its result, answers.
pub fn search_then_plan(
    tokens: &Tokenizer,
    base: Base,
    replay: &Replay,
    searches: &[(Value, String)],
) -> ArmFigures {
    let mut meter = Meter::new(tokens, base);
    for (query, result) in searches {
        meter.model_turn(&tool_call("search_tools", query));
        meter.tool_result(result);
    }
    meter.model_turn(&tool_call(planmux::plan::EXECUTE_PLAN_TOOL, &replay.plan));
    meter.tool_result(&replay.plan_result_text);
    meter.answer(&replay.answer)
}
