//! Plan issues: every problem validation finds, with where it is and how to fix it,
//! and the text a model reads in the `isError: true` result.

use std::fmt;

mod render;

pub use render::{IssueList, cap_issues, describe_value, render_issues, sort_issues};

/// Longest location, message or hint shown for one issue: issues quote the plan, whose
/// strings (ids, tool names, references) can be megabytes long.
pub const MAX_ISSUE_CHARS: usize = 400;
/// Issues shown in full per reply; the rest are counted in one last issue.
pub const MAX_ISSUES: usize = 20;
/// Longest excerpt of the plan's own text an issue quotes before saying what is wrong
/// with it: what it says must still fit in [`MAX_ISSUE_CHARS`] after the quote.
pub const MAX_QUOTE_CHARS: usize = 80;

/// `text` as an issue quotes it: whole up to [`MAX_QUOTE_CHARS`], else its head and how
/// much went.
pub(crate) fn excerpt(text: &str) -> std::borrow::Cow<'_, str> {
    crate::text::clip(text, MAX_QUOTE_CHARS)
}

/// One problem with a plan, located so that a model can fix it in one retry.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanIssue {
    /// Where the problem is, in canonical field names: `steps[2].args.message`.
    pub location: String,
    /// What the problem is.
    pub kind: IssueKind,
}

impl PlanIssue {
    /// Builds an issue at `location`.
    pub fn new(location: impl Into<String>, kind: IssueKind) -> Self {
        Self {
            location: location.into(),
            kind,
        }
    }

    /// The problem, without its location (bounded by [`MAX_ISSUE_CHARS`]).
    pub fn message(&self) -> String {
        bounded(self.kind.to_string())
    }

    /// A concrete next step for the model, when there is one (bounded).
    pub fn hint(&self) -> Option<String> {
        self.kind.hint().map(bounded)
    }

    /// Where the problem is (bounded: a location holds argument keys).
    pub fn place(&self) -> String {
        bounded(self.location.clone())
    }
}

impl fmt::Display for PlanIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place(), self.message())
    }
}

impl std::error::Error for PlanIssue {}

fn bounded(text: String) -> String {
    match crate::text::clip(&text, MAX_ISSUE_CHARS) {
        std::borrow::Cow::Borrowed(_) => text,
        cut => cut.into_owned(),
    }
}

/// Every kind of plan problem. The `Display` text is the message; [`IssueKind::hint`]
/// says what to do about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IssueKind {
    /// A plan or `args` given as a JSON string that does not parse.
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    MalformedJson {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_json's description.
        message: String,
    },
    /// A field holds the wrong kind of JSON value.
    #[error("expected {expected}, found {found}")]
    WrongShape {
        /// What was expected, e.g. "an array of steps".
        expected: String,
        /// A short description of what was there.
        found: String,
    },
    /// A field the plan language does not know.
    #[error("unknown field \"{field}\"")]
    UnknownField {
        /// The field as written.
        field: String,
        /// The nearest known field.
        closest: Option<String>,
    },
    /// A field value outside its closed set (strategy, on_error).
    #[error("\"{value}\" is not one of: {}", .allowed.join(", "))]
    NotOneOf {
        /// The value as written.
        value: String,
        /// The accepted values.
        allowed: Vec<String>,
    },
    /// A plan with no steps.
    #[error("the plan has no steps")]
    NoSteps,
    /// More steps than `max_plan_steps`.
    #[error("the plan has {count} steps; at most {max} are allowed")]
    TooManySteps {
        /// Steps in the plan.
        count: usize,
        /// The configured limit.
        max: usize,
    },
    /// A step without a tool name.
    #[error("the step names no tool")]
    MissingTool,
    /// A tool name (or server + tool) that is not in the catalog.
    #[error("unknown tool \"{name}\"{}", closest_suffix(.closest))]
    UnknownTool {
        /// The name as written (with its server, when one was given).
        name: String,
        /// Up to three catalog names that look alike.
        closest: Vec<String>,
    },
    /// A tool of a server that is configured but failed to start: its tools are not known.
    #[error(
        "tool \"{name}\" belongs to server '{server}', which is configured but failed to start: {reason}"
    )]
    ServerNotStarted {
        name: String,
        server: String,
        reason: String,
    },
    /// A tool `[policy] deny` names: never listed, never callable.
    #[error("tool \"{name}\" is denied by [policy] deny")]
    DeniedTool { name: String },
    /// A tool held back by `servers.lock` until the user reviews it.
    #[error("tool \"{name}\" is quarantined: {change}")]
    QuarantinedTool { name: String, change: String },
    /// A bare tool name that several servers offer.
    #[error("tool name \"{name}\" is ambiguous: {}", .candidates.join(", "))]
    AmbiguousTool {
        /// The bare name.
        name: String,
        /// The exported names that carry it.
        candidates: Vec<String>,
    },
    /// A plan step that calls `execute_plan` itself.
    #[error("a plan cannot call \"{name}\"")]
    RecursivePlan {
        /// The tool as written.
        name: String,
    },
    /// An id that references cannot name.
    #[error("step id \"{id}\" is not usable: {reason}")]
    InvalidId {
        /// The id as written.
        id: String,
        /// Why.
        reason: String,
    },
    /// Two steps with the same id.
    #[error("duplicate step id \"{id}\" (first used by steps[{first}])")]
    DuplicateId {
        /// The id.
        id: String,
        /// Position of the first step with it.
        first: usize,
    },
    /// A reference whose syntax is wrong.
    #[error("bad reference `{}`: {message}", excerpt(.text))]
    BadReference {
        /// The text as written.
        text: String,
        /// What is wrong.
        message: String,
    },
    /// A seed-004 `_outputPath` that is not `†state.name` or `†state.ok || †state.error`.
    #[error("bad output path `{text}`: {message}")]
    BadOutputPath {
        /// The path as written.
        text: String,
        /// What is wrong.
        message: String,
    },
    /// A reference, `depends_on` or `outputs` entry naming no step.
    #[error("`{text}` names no step \"{name}\"{}", closest_suffix(.closest))]
    UnknownStep {
        /// The reference or entry as written.
        text: String,
        /// The word that should have been a step id.
        name: String,
        /// The nearest step id.
        closest: Vec<String>,
    },
    /// `steps[N]` past the end of the plan.
    #[error("`{text}` points past the last step (the plan has {count}; positions start at 0)")]
    StepIndexOutOfRange {
        /// The reference as written.
        text: String,
        /// Steps in the plan.
        count: usize,
    },
    /// A step that reads its own output.
    #[error("step \"{id}\" references itself")]
    SelfReference {
        /// The step.
        id: String,
    },
    /// A dependency cycle.
    #[error("dependency cycle: {}", .path.join(" → "))]
    Cycle {
        /// The ids around the cycle, first repeated at the end.
        path: Vec<String>,
    },
    /// Under an ordered strategy, a reference to a later step.
    #[error("step \"{step}\" reads \"{target}\", which runs later under strategy {strategy}")]
    ForwardReference {
        /// The reading step.
        step: String,
        /// The later step.
        target: String,
        /// The strategy in force.
        strategy: String,
    },
    /// `†state.x` with no earlier step writing slot `x`.
    #[error("no earlier step writes state slot \"{slot}\"{}", closest_suffix(.closest))]
    UnknownStateSlot {
        /// The slot.
        slot: String,
        /// Slots that earlier steps do write.
        closest: Vec<String>,
    },
    /// Under `competitive`, a step that waits for another.
    #[error(
        "under strategy competitive every step starts at once, but \"{step}\" waits for \"{target}\""
    )]
    CompetitiveDependency {
        /// The waiting step.
        step: String,
        /// What it waits for.
        target: String,
    },
    /// Under `chained`, a tool without the argument that receives the previous output.
    #[error("tool \"{tool}\" has no argument \"{argument}\" to receive the previous step's output")]
    PipeTargetMissing {
        /// The exported tool name.
        tool: String,
        /// The `pipe_to` argument (default `input`).
        argument: String,
        /// The arguments the tool does take.
        available: Vec<String>,
    },
    /// A required argument that is absent.
    #[error("missing required argument \"{name}\"")]
    MissingArgument {
        /// The property name.
        name: String,
    },
    /// An argument of the wrong JSON type.
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// The schema's type(s).
        expected: String,
        /// The value's type and a preview.
        found: String,
    },
    /// An argument the schema forbids.
    #[error("unknown argument \"{name}\"{}", closest_suffix(.closest))]
    UnknownArgument {
        /// The property name.
        name: String,
        /// The nearest allowed name.
        closest: Vec<String>,
        /// Every allowed name.
        allowed: Vec<String>,
    },
    /// A value outside the schema's `enum`/`const`.
    #[error("{found} is not one of: {}", .allowed.join(", "))]
    NotAllowed {
        /// The value, compact JSON.
        found: String,
        /// The allowed values, compact JSON.
        allowed: Vec<String>,
    },
    /// A value matching none of the schema's alternatives (`anyOf`/`oneOf`).
    #[error("{found} matches none of the forms the tool accepts")]
    NoAlternative {
        /// The value, compact JSON.
        found: String,
    },
    /// A reference reading a field its step's tool cannot return: the tool's
    /// `outputSchema` does not allow it, or lists a field so close that this is a typo.
    #[error("{0}")]
    NoSuchField(Box<MissingField>),
    /// An argument the tool's `inputSchema` does not list, where the schema allows others
    /// (a warning: the step runs, and the server may ignore it).
    #[error(
        "`{name}` is not an argument of {tool} (its arguments: {}); the server may ignore it{}",
        .allowed.join(", "), did_you_mean(.closest)
    )]
    UnlistedArgument {
        /// The argument as written.
        name: String,
        /// The tool's exported name.
        tool: String,
        /// The arguments the schema lists, in its order.
        allowed: Vec<String>,
        /// The nearest of them.
        closest: Vec<String>,
    },
    /// Another system's template syntax (`{{t.x}}`, `$t.x`, `{t.x}`) whose head is a step
    /// id (or `input`): text to planmux, surely meant as a reference.
    #[error(
        "`{written}` is not planmux's reference syntax; write `${{{reference}}}` (inside text) or `$ref:{reference}` (a whole value)"
    )]
    ForeignTemplate {
        /// The text as written.
        written: String,
        /// What it reads, as planmux writes it (`t.x`).
        reference: String,
    },
    /// A `when` that cannot be read.
    #[error("bad condition: {message}")]
    BadCondition {
        /// What is wrong with it.
        message: String,
    },
    /// A value step that also names a tool, a resource or arguments.
    #[error("a value step calls no tool, but this one has \"{field}\"")]
    ValueWithTool {
        /// The field beside `value`.
        field: String,
    },
    /// `item` or `index` read by a step without `foreach` (or by its `when`).
    #[error("`{text}` reads the current item, but {place}")]
    ItemOutsideForeach {
        /// The reference as written.
        text: String,
        /// Why there is no item there.
        place: String,
    },
    /// `foreach` over a literal that is not an array.
    #[error("foreach needs an array, found {found}")]
    ForeachNotArray {
        /// The value's type and a preview.
        found: String,
    },
    /// `foreach` over a literal array longer than `[proxy] max_foreach_items`.
    #[error("foreach over {count} items; at most {max} are allowed")]
    TooManyItems {
        /// Items given.
        count: usize,
        /// `[proxy] max_foreach_items`.
        max: usize,
    },
    /// `concurrency` on a step without `foreach`.
    #[error("concurrency applies to a foreach step, and this step has no foreach")]
    ConcurrencyWithoutForeach,
    /// Problems past [`MAX_ISSUES`], not shown.
    #[error("and {count} more problems, not shown")]
    MoreIssues {
        /// How many.
        count: usize,
    },
    /// `retries` on a tool that is neither read-only nor idempotent (a warning: the step
    /// still runs, once).
    #[error("retries ignored: tool \"{tool}\" is not annotated read-only or idempotent")]
    RetriesIgnored {
        /// The exported tool name.
        tool: String,
    },
    /// Seed 002's `conditionPrompt` on a plan whose steps have no `when` (a warning: the
    /// prompt is kept in the record, and every step runs).
    #[error("conditionPrompt is kept, not acted on: no step has a \"when\"")]
    PromptNotActedOn,
    /// What a step that needs approval would show the user is too long even cut down:
    /// nobody could read what they approve, so the plan does not run.
    #[error(
        "cannot be shown for approval: even cut down it takes {chars} characters (at most {max})"
    )]
    TooLargeToApprove {
        /// Characters it takes.
        chars: usize,
        /// Characters approval shows at most.
        max: usize,
    },
}

fn closest_suffix(closest: &[String]) -> String {
    match closest {
        [] => String::new(),
        names => format!("; did you mean {}?", quoted_list(names)),
    }
}

/// What [`IssueKind::NoSuchField`] says: a field a step's tool cannot return.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingField {
    /// The step read.
    pub step: String,
    /// Its tool's exported name.
    pub tool: String,
    /// The field as the reference names it.
    pub field: String,
    /// The path to the object that lacks it (empty: the output itself).
    pub at: String,
    /// The fields the schema lists there.
    pub fields: Vec<String>,
    /// The nearest of them.
    pub closest: Vec<String>,
}

impl fmt::Display for MissingField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (within, there) = match self.at.as_str() {
            "" => (String::new(), ""),
            at => (format!(" in `{at}`"), " there"),
        };
        write!(
            f,
            "step `{}` ({}) has no field `{}`{within}; its outputSchema has{there}: {}{}",
            self.step,
            self.tool,
            self.field,
            self.fields.join(", "),
            did_you_mean(&self.closest)
        )
    }
}

/// ` — did you mean `a` or `b`?`, or nothing.
fn did_you_mean(closest: &[String]) -> String {
    let quoted: Vec<String> = closest.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => format!(" — did you mean {last}?"),
        Some((last, rest)) => format!(" — did you mean {} or {last}?", rest.join(", ")),
    }
}

fn quoted_list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

impl IssueKind {
    /// What the model should do about it.
    pub fn hint(&self) -> Option<String> {
        let text = match self {
            IssueKind::MalformedJson { .. } => {
                "send valid JSON; inside a JSON string, quotes must be escaped as \\\"".into()
            }
            IssueKind::WrongShape { .. } => return None,
            IssueKind::UnknownField { closest: Some(near), .. } => format!("write \"{near}\""),
            IssueKind::UnknownField { closest: None, .. } => {
                "plan fields: goal, strategy, steps, outputs, on_error, inputs; step fields: id, tool, args, depends_on, timeout_ms, retries, retry_unsafe, pipe_to".into()
            }
            IssueKind::NotOneOf { .. } => return None,
            IssueKind::NoSteps => "add at least one step: {\"tool\": \"...\", \"args\": {...}}".into(),
            IssueKind::TooManySteps { .. } => "split the work into several plans".into(),
            IssueKind::MissingTool => "set \"tool\" to an exported name from tools/list".into(),
            IssueKind::UnknownTool { .. } => {
                "use a tool name exactly as tools/list shows it (<server>__<tool>)".into()
            }
            IssueKind::DeniedTool { .. } => {
                "the user's config forbids this tool: do without it".into()
            }
            IssueKind::QuarantinedTool { .. } => {
                "its definition changed since the user pinned it; until they accept it with `planmux lock`, do without it".into()
            }
            IssueKind::ServerNotStarted { server, .. } => {
                format!("run `planmux check` to see why '{server}' does not start")
            }
            IssueKind::AmbiguousTool { .. } => {
                "use the exported name, or add \"server\" beside the bare tool name".into()
            }
            IssueKind::RecursivePlan { .. } => "put the inner plan's steps into this plan".into(),
            IssueKind::InvalidId { .. } => {
                "use letters, digits, _ and - only, and not the words input, inputs, steps, item or index".into()
            }
            IssueKind::DuplicateId { .. } => "give every step its own id".into(),
            IssueKind::BadReference { .. } => {
                "write $ref:STEP.PATH, ${STEP.PATH} or {\"$ref\": \"STEP.PATH\"}, with PATH like a.b[0][\"x.y\"]; write $${ for a literal ${".into()
            }
            IssueKind::BadOutputPath { .. } => {
                "write \"†state.name\", or \"†state.ok || †state.error\" to catch a failure".into()
            }
            IssueKind::UnknownStep { .. } => {
                "reference a step by its id, by steps[N] (0-based), or read input.NAME; write $${ for a literal ${".into()
            }
            IssueKind::StepIndexOutOfRange { .. } => "count steps from 0".into(),
            IssueKind::SelfReference { .. } => "split the step in two, or remove the reference".into(),
            IssueKind::Cycle { .. } => "remove one reference or depends_on entry in the cycle".into(),
            IssueKind::ForwardReference { .. } => {
                "move the referenced step earlier, or use strategy auto".into()
            }
            IssueKind::UnknownStateSlot { .. } => {
                "read a slot only after a call whose _outputPath writes it".into()
            }
            IssueKind::CompetitiveDependency { .. } => {
                "use strategy auto when steps depend on each other".into()
            }
            IssueKind::PipeTargetMissing { available, .. } => format!(
                "set \"pipe_to\" on this step to one of: {}",
                available.join(", ")
            ),
            IssueKind::MissingArgument { .. } => "add it to the step's args".into(),
            IssueKind::WrongType { expected, .. } => format!("give {expected}"),
            IssueKind::UnknownArgument { allowed, .. } if !allowed.is_empty() => {
                format!("the tool takes: {}", allowed.join(", "))
            }
            IssueKind::UnknownArgument { .. } => "remove it".into(),
            IssueKind::NotAllowed { .. } => return None,
            IssueKind::NoSuchField { .. } => {
                "read a field its outputSchema lists (a \"default\" does not make a field the tool cannot return appear)".into()
            }
            IssueKind::UnlistedArgument { .. } => {
                "remove it, or use an argument the tool lists".into()
            }
            IssueKind::ForeignTemplate { .. } => {
                "if the text is meant as it is, rename the step so that its id does not appear in it".into()
            }
            IssueKind::NoAlternative { .. } => "check the tool's inputSchema".into(),
            IssueKind::RetriesIgnored { .. } => {
                "set \"retry_unsafe\": true if repeating the call is harmless".into()
            }
            IssueKind::TooLargeToApprove { .. } => {
                "split the step into smaller ones, or have an earlier step produce the large value and pass it by reference".into()
            }
            IssueKind::PromptNotActedOn => {
                "give the step that should depend on it a \"when\", e.g. {\"$ref\": \"cpu.value\", \"gt\": 80}".into()
            }
            IssueKind::BadCondition { .. } => {
                "write \"when\": \"$ref:STEP.PATH\" (truthy), {\"$ref\": \"STEP.PATH\", \"gt\": 80} with eq ne gt gte lt lte in contains matches exists, or {\"all\"|\"any\": [...]}, {\"not\": ...}".into()
            }
            IssueKind::ValueWithTool { .. } => {
                "a step either calls a tool (\"tool\", \"args\") or is a value step (\"value\"), not both".into()
            }
            IssueKind::ItemOutsideForeach { .. } => {
                "item, index and [index] exist only in the args (or value) of a step with \"foreach\"; elsewhere a loop's outputs are read whole ($ref:STEP) or by position ($ref:STEP[0])".into()
            }
            IssueKind::ForeachNotArray { .. } => {
                "give an array, or a reference to one such as \"$ref:list.items\"".into()
            }
            IssueKind::TooManyItems { .. } => "split the items over several steps or plans".into(),
            IssueKind::ConcurrencyWithoutForeach => "remove \"concurrency\", or add \"foreach\"".into(),
            IssueKind::MoreIssues { .. } => {
                "fix the problems above; the rest are reported when the plan is sent again".into()
            }
        };
        Some(text)
    }
}
