//! What an input-required result can ask, and how an answer is read: each question's
//! request (`elicitation/create`, `sampling/createMessage` or `roots/list`, as the scenarios
//! print them), the capability a client must have declared to be asked it, and the one
//! result each answer must be.

use rmcp::model::{
    ClientCapabilities, CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, ListRootsRequest, ListRootsResult, Role, SamplingMessage,
    SamplingMessageContentBlock,
};
use serde_json::Value;

/// One thing an asker may ask the client, named by its key in `inputRequests`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::demo::conformance) enum Question {
    UserName,
    Capital,
    ClientRoots,
    Confirm,
    Greeting,
    Step1,
    Step2,
    PromptContext,
}

impl Question {
    pub(in crate::demo::conformance) fn key(self) -> &'static str {
        match self {
            Self::UserName => "user_name",
            Self::Capital => "capital_question",
            Self::ClientRoots => "client_roots",
            Self::Confirm => "confirm",
            Self::Greeting => "greeting",
            Self::Step1 => "step1",
            Self::Step2 => "step2",
            Self::PromptContext => "user_context",
        }
    }

    /// The request that asks it, as the scenarios print them.
    pub(in crate::demo::conformance) fn ask(self) -> Ask {
        let form = |message, field| Ask::Form {
            message,
            field,
            boolean: false,
        };
        match self {
            Self::UserName => form("What is your name?", "name"),
            Self::Capital => Ask::Sample {
                prompt: "What is the capital of France?",
                max_tokens: 100,
            },
            Self::ClientRoots => Ask::Roots,
            Self::Confirm => Ask::Form {
                message: "Please confirm",
                field: "ok",
                boolean: true,
            },
            Self::Greeting => Ask::Sample {
                prompt: "Generate a greeting",
                max_tokens: 50,
            },
            Self::Step1 => form("Step 1: What is your name?", "name"),
            Self::Step2 => form("Step 2: What is your favorite color?", "color"),
            Self::PromptContext => form("What context should the prompt use?", "context"),
        }
    }

    pub(super) fn capability(self) -> Capability {
        match self.ask() {
            Ask::Form { .. } => Capability::Elicitation,
            Ask::Sample { .. } => Capability::Sampling,
            Ask::Roots => Capability::Roots,
        }
    }
}

/// The three kinds of input request, with what a question puts in one.
pub(in crate::demo::conformance) enum Ask {
    /// `elicitation/create`: a form of one required field, a string or a boolean.
    Form {
        message: &'static str,
        field: &'static str,
        boolean: bool,
    },
    /// `sampling/createMessage`: one user message.
    Sample {
        prompt: &'static str,
        max_tokens: u32,
    },
    /// `roots/list`.
    Roots,
}

/// A client's answer to one question.
pub(in crate::demo::conformance) enum Reply {
    /// What it gave, as text.
    Given(String),
    /// The user declined or cancelled the form.
    Refused,
}

impl Ask {
    pub(in crate::demo::conformance) fn request(&self) -> InputRequest {
        match *self {
            Self::Form {
                message,
                field,
                boolean,
            } => {
                let schema = ElicitationSchema::builder();
                let schema = if boolean {
                    schema.required_bool(field)
                } else {
                    schema.required_string(field)
                };
                // Cannot fail: the one required field is the one property.
                let requested_schema = schema.build_unchecked();
                InputRequest::Elicitation(ElicitRequest::new(
                    ElicitRequestParams::FormElicitationParams {
                        meta: None,
                        message: message.into(),
                        requested_schema,
                    },
                ))
            }
            Self::Sample { prompt, max_tokens } => {
                let text = SamplingMessageContentBlock::text(prompt);
                let messages = vec![SamplingMessage::new(Role::User, text)];
                InputRequest::CreateMessage(CreateMessageRequest::new(
                    CreateMessageRequestParams::new(messages, max_tokens),
                ))
            }
            Self::Roots => InputRequest::ListRoots(ListRootsRequest::default()),
        }
    }

    /// Reads the client's answer: it must be the result this request calls for.
    pub(in crate::demo::conformance) fn read(&self, response: &Value) -> Result<Reply, String> {
        fn parse<T: serde::de::DeserializeOwned>(value: &Value, what: &str) -> Result<T, String> {
            T::deserialize(value).map_err(|e| format!("not {what}: {e}"))
        }
        match *self {
            Self::Form { field, boolean, .. } => {
                let result: ElicitResult = parse(response, "an elicitation result")?;
                if result.action != ElicitationAction::Accept {
                    return Ok(Reply::Refused);
                }
                match result.content.as_ref().and_then(|c| c.get(field)) {
                    Some(Value::String(s)) if !boolean => Ok(Reply::Given(s.clone())),
                    Some(Value::Bool(b)) if boolean => Ok(Reply::Given(b.to_string())),
                    _ => {
                        let kind = if boolean { "boolean" } else { "string" };
                        Err(format!("the accepted form has no {kind} '{field}'"))
                    }
                }
            }
            Self::Sample { .. } => {
                let result: CreateMessageResult = parse(response, "a sampling result")?;
                let content = &result.message.content;
                let texts: Vec<&str> = content
                    .iter()
                    .filter_map(|block| block.as_text())
                    .map(|t| t.text.as_str())
                    .collect();
                Ok(Reply::Given(texts.join(" ")))
            }
            Self::Roots => {
                let result: ListRootsResult = parse(response, "a roots result")?;
                let uris: Vec<&str> = result.roots.iter().map(|r| r.uri.as_str()).collect();
                Ok(Reply::Given(uris.join(", ")))
            }
        }
    }
}

/// What the client must have declared to be asked a question.
#[derive(Clone, Copy)]
pub(super) enum Capability {
    Elicitation,
    Sampling,
    Roots,
}

impl Capability {
    /// The capabilities that name only this one, for a -32021 error's `requiredCapabilities`.
    pub(super) fn alone(self) -> ClientCapabilities {
        let mut required = ClientCapabilities::default();
        match self {
            Self::Elicitation => required.elicitation = Some(Default::default()),
            Self::Sampling => required.sampling = Some(Default::default()),
            Self::Roots => required.roots = Some(Default::default()),
        }
        required
    }

    pub(super) fn declared_by(self, declared: &ClientCapabilities) -> bool {
        match self {
            Self::Elicitation => declared.elicitation.is_some(),
            Self::Sampling => declared.sampling.is_some(),
            Self::Roots => declared.roots.is_some(),
        }
    }
}
