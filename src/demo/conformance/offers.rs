//! What the conformance fixture offers besides tools: its resources and template (with the
//! URIs the scenarios read), its prompts, and the completions for their arguments.

use rmcp::ErrorData;
use rmcp::model::{
    ArgumentInfo, ContentBlock, JsonObject, Prompt, PromptArgument, PromptMessage, Reference,
    Resource, ResourceContents, ResourceTemplate, Role,
};
use serde_json::Value;

/// A 1x1 red PNG, base64: the image the image scenarios and the binary resource expect.
pub(super) const TEST_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// The static text resource read by `resources-read-text`.
const STATIC_TEXT: &str = "test://static-text";
/// The static binary resource read by `resources-read-binary`.
const STATIC_BINARY: &str = "test://static-binary";
/// The resource `resources-subscribe` and `resources-unsubscribe` watch.
const WATCHED: &str = "test://watched-resource";
/// The template `resources-templates-read` reads as `test://template/123/data`.
const TEMPLATE: &str = "test://template/{id}/data";

/// The template, listed apart from the direct resources.
pub(super) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(TEMPLATE, "template")
            .with_title("Resource Template")
            .with_description("A resource template with parameter substitution")
            .with_mime_type("application/json"),
    ]
}

/// The direct resources (the template is listed apart).
pub(super) fn resources() -> Vec<Resource> {
    let resource = |uri: &str, name: &str, description: &str, mime: &str| {
        Resource::new(uri, name)
            .with_description(description)
            .with_mime_type(mime)
    };
    vec![
        resource(
            STATIC_TEXT,
            "static-text",
            "A static text resource",
            "text/plain",
        ),
        resource(
            STATIC_BINARY,
            "static-binary",
            "A static binary resource (image)",
            "image/png",
        ),
        resource(
            WATCHED,
            "watched-resource",
            "Reported updated on subscribe",
            "text/plain",
        ),
    ]
}

/// The contents behind a URI, or `None` when it names nothing here.
pub(super) fn contents(uri: &str) -> Option<ResourceContents> {
    match uri {
        STATIC_TEXT => Some(ResourceContents::text(
            "This is the content of the static text resource.",
            uri,
        )),
        STATIC_BINARY => Some(ResourceContents::blob(TEST_PNG, uri).with_mime_type("image/png")),
        WATCHED => Some(ResourceContents::text("Watched resource content", uri)),
        _ => template_id(uri).map(|id| {
            ResourceContents::text(template_json(id), uri).with_mime_type("application/json")
        }),
    }
}

/// The `{id}` of a URI matching `test://template/{id}/data`.
fn template_id(uri: &str) -> Option<&str> {
    uri.strip_prefix("test://template/")?
        .strip_suffix("/data")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// The template's text, keys in the order the scenario shows them (a `json!` map would sort
/// them).
fn template_json(id: &str) -> String {
    format!(
        r#"{{"id":{},"templateTest":true,"data":{}}}"#,
        Value::from(id),
        Value::from(format!("Data for ID: {id}"))
    )
}

// ---- prompts ----

/// The four prompts of the prompts scenarios, and the one that asks for input (`mrtr`).
pub(super) fn prompts() -> Vec<Prompt> {
    let arg = |name: &str, description: &str| {
        PromptArgument::new(name)
            .with_description(description)
            .with_required(true)
    };
    vec![
        Prompt::new(
            "test_simple_prompt",
            Some("A simple prompt without arguments"),
            None,
        )
        .with_title("Simple Test Prompt"),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("A prompt with required arguments"),
            Some(vec![
                arg("arg1", "First test argument"),
                arg("arg2", "Second test argument"),
            ]),
        )
        .with_title("Prompt With Arguments"),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("A prompt that includes an embedded resource"),
            Some(vec![arg("resourceUri", "URI of the resource to embed")]),
        )
        .with_title("Prompt With Embedded Resource"),
        Prompt::new(
            "test_prompt_with_image",
            Some("A prompt that includes image content"),
            None,
        )
        .with_title("Prompt With Image"),
        super::mrtr::prompt(),
    ]
}

/// The messages of a prompt; an unknown prompt or a missing argument is the client's error.
pub(super) fn prompt_messages(
    name: &str,
    args: &JsonObject,
) -> Result<Vec<PromptMessage>, ErrorData> {
    let user = |text: String| PromptMessage::new_text(Role::User, text);
    Ok(match name {
        "test_simple_prompt" => vec![user("This is a simple prompt for testing.".into())],
        "test_prompt_with_arguments" => {
            let (arg1, arg2) = (prompt_arg(args, "arg1")?, prompt_arg(args, "arg2")?);
            vec![user(format!(
                "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            ))]
        }
        "test_prompt_with_embedded_resource" => {
            let uri = prompt_arg(args, "resourceUri")?;
            let resource = ResourceContents::text("Embedded resource content for testing.", uri)
                .with_mime_type("text/plain");
            vec![
                PromptMessage::new(Role::User, ContentBlock::resource(resource)),
                user("Please process the embedded resource above.".into()),
            ]
        }
        "test_prompt_with_image" => vec![
            PromptMessage::new(Role::User, ContentBlock::image(TEST_PNG, "image/png")),
            user("Please analyze the image above.".into()),
        ],
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt '{other}'"),
                None,
            ));
        }
    })
}

/// A required prompt argument.
fn prompt_arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, ErrorData> {
    args.get(key).and_then(Value::as_str).ok_or_else(|| {
        ErrorData::invalid_params(format!("missing required argument '{key}'"), None)
    })
}

// ---- completion ----

/// Suggestions starting with what the user typed: a few words for the prompt's arguments,
/// a few ids for the template; nothing for anything else (the scenario only checks that
/// `values` is an array).
pub(super) fn completions(reference: &Reference, argument: &ArgumentInfo) -> Vec<String> {
    let candidates: &[&str] = match (reference, argument.name.as_str()) {
        (Reference::Prompt(prompt), "arg1" | "arg2")
            if prompt.name == "test_prompt_with_arguments" =>
        {
            &["paris", "park", "party"]
        }
        (Reference::Resource(template), "id") if template.uri == TEMPLATE => {
            &["1", "2", "3", "123"]
        }
        _ => &[],
    };
    candidates
        .iter()
        .filter(|c| c.starts_with(argument.value.as_str()))
        .map(|c| (*c).to_owned())
        .collect()
}
