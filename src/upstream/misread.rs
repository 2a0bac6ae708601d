//! A host's request for an MCP method whose params do not fit it (`tools/call` with
//! arguments that are a list, `resources/read` without a `uri`): rmcp cannot read it
//! into its type and hands it over as a custom request. It is answered as invalid params
//! with what does not fit, not as an unknown method.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CompleteRequestParams, CustomRequest, ErrorCode, GetPromptRequestParams,
    InitializeRequestParams, PaginatedRequestParams, ReadResourceRequestParams,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use serde::de::DeserializeOwned;

/// Methods protocol 2026-07-28 removed: a request of that era for one of them is for a
/// method that does not exist.
const REMOVED_IN_2026: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The error for a custom request: invalid params naming the problem for a method MCP
/// defines (in the era of the request: `modern` is 2026-07-28), method not found for any
/// other.
pub fn misread(request: &CustomRequest, modern: bool) -> ErrorData {
    let method = request.method.as_str();
    if modern && REMOVED_IN_2026.contains(&method) {
        return ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None);
    }
    let problem = match method {
        "tools/call" => problem::<CallToolRequestParams>(request),
        "prompts/get" => problem::<GetPromptRequestParams>(request),
        "resources/read" => problem::<ReadResourceRequestParams>(request),
        "resources/subscribe" => problem::<SubscribeRequestParams>(request),
        "resources/unsubscribe" => problem::<UnsubscribeRequestParams>(request),
        "completion/complete" => problem::<CompleteRequestParams>(request),
        "logging/setLevel" => problem::<SetLevelRequestParams>(request),
        "initialize" => problem::<InitializeRequestParams>(request),
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            problem::<PaginatedRequestParams>(request)
        }
        // rmcp's answer to a method it does not know.
        _ => return ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None),
    };
    let problem = problem.unwrap_or_else(|| "they are not what the method takes".into());
    ErrorData::invalid_params(format!("{method}: params do not fit: {problem}"), None)
}

/// Why `request`'s params are not a `T`, if reading them says.
fn problem<T: DeserializeOwned>(request: &CustomRequest) -> Option<String> {
    match &request.params {
        None => Some("params are missing".into()),
        Some(params) => serde_json::from_value::<T>(params.clone())
            .err()
            .map(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_known_method_with_params_that_do_not_fit_is_told_what_does_not() {
        let list = CustomRequest::new("tools/call", Some(json!({"name": "x", "arguments": [1]})));
        let error = misread(&list, false);
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(
            error.message.starts_with("tools/call: params do not fit: "),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("invalid type: sequence"),
            "{}",
            error.message
        );
        let no_uri = misread(
            &CustomRequest::new("resources/read", Some(json!({}))),
            false,
        );
        assert!(
            no_uri.message.contains("missing field `uri`"),
            "{}",
            no_uri.message
        );
        let none = misread(&CustomRequest::new("prompts/get", None), false);
        assert!(
            none.message.ends_with("params are missing"),
            "{}",
            none.message
        );
    }

    #[test]
    fn an_unknown_method_is_not_found() {
        let error = misread(&CustomRequest::new("tools/frobnicate", None), false);
        assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND);
        assert_eq!(error.message, "tools/frobnicate");
    }

    #[test]
    fn a_method_2026_07_28_removed_is_not_found_in_that_era_only() {
        let initialize = CustomRequest::new("initialize", Some(json!({})));
        let modern = misread(&initialize, true);
        assert_eq!(modern.code, ErrorCode::METHOD_NOT_FOUND);
        let legacy = misread(&initialize, false);
        assert_eq!(legacy.code, ErrorCode::INVALID_PARAMS);
    }
}
