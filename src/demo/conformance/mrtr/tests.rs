//! Input-required rounds, driven without a transport: what each asker asks, what it makes
//! of the answers, and that a `requestState` counts only as issued, to its asker, once.

use rmcp::model::{ClientCapabilities, ErrorCode, InputResponses};
use serde_json::{Value, json};

use super::{Asker, MAX_PENDING, Outcome, Pending, respond};

/// Every capability a client can declare, as the suite's clients do.
fn everything() -> ClientCapabilities {
    capabilities(json!({"elicitation": {}, "sampling": {}, "roots": {"listChanged": true}}))
}

fn capabilities(declared: Value) -> ClientCapabilities {
    serde_json::from_value(declared).expect("client capabilities")
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// One round of `asker`; the outcome as JSON (`{"done": text}`, `{"stopped": why}`, or the
/// input-required result as the wire has it), or the error's code and message.
fn round(
    pending: &Pending,
    asker: Asker,
    declared: &ClientCapabilities,
    responses: Value,
    state: Option<&str>,
) -> Result<Value, (ErrorCode, String)> {
    let responses: Option<InputResponses> =
        serde_json::from_value(responses).expect("input responses");
    match respond(asker, declared, responses, state, pending) {
        Ok(Outcome::Done(text)) => Ok(json!({"done": text})),
        Ok(Outcome::Stopped(why)) => Ok(json!({"stopped": why})),
        Ok(Outcome::Asking(result)) => Ok(serde_json::to_value(result).expect("serializes")),
        Err(error) => Err((error.code, error.message.into_owned())),
    }
}

/// The keys an input-required result asks, and its state.
fn asked(result: &Value) -> (Vec<&str>, Option<&str>) {
    let keys = result["inputRequests"]
        .as_object()
        .map(|requests| requests.keys().map(String::as_str).collect())
        .unwrap_or_default();
    (keys, result["requestState"].as_str())
}

#[test]
fn the_first_round_asks_as_the_scenario_prints_it() {
    let first = round(
        &Pending::default(),
        Asker::Elicitation,
        &everything(),
        Value::Null,
        None,
    );
    let expected = json!({
        "resultType": "input_required",
        "inputRequests": {"user_name": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "What is your name?", "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            }}
        }}
    });
    assert_eq!(first, Ok(expected));
}

#[test]
fn each_asker_answers_once_its_questions_are() {
    let roots = json!({"roots": [{"uri": "file:///test/root", "name": "Test Root"}]});
    let sampled = |text: &str| {
        json!({"role": "assistant", "content": {"type": "text", "text": text},
               "model": "test-model", "stopReason": "endTurn"})
    };
    for (asker, responses, text) in [
        (
            Asker::Elicitation,
            json!({"user_name": accept(json!({"name": "Alice"}))}),
            "Hello, Alice!",
        ),
        (
            Asker::Sampling,
            json!({"capital_question": sampled("Paris.")}),
            "LLM response: Paris.",
        ),
        (
            Asker::ListRoots,
            json!({"client_roots": roots}),
            "Client roots: file:///test/root",
        ),
        (
            Asker::Prompt,
            json!({"user_context": accept(json!({"context": "tea"}))}),
            "Write a short note for this context: tea",
        ),
        // Keys it did not ask are ignored.
        (
            Asker::Elicitation,
            json!({"user_name": accept(json!({"name": "Bo"})),
            "unknown_extra_key": accept(json!({"foo": "bar"}))}),
            "Hello, Bo!",
        ),
    ] {
        let done = round(&Pending::default(), asker, &everything(), responses, None);
        assert_eq!(done, Ok(json!({"done": text})), "{asker:?}");
    }
}

#[test]
fn a_missing_or_wrong_answer_is_asked_again_and_a_malformed_one_refused() {
    let pending = Pending::default();
    let wrong_key = json!({"wrong_key": accept(json!({"data": "wrong"}))});
    let again = round(&pending, Asker::Elicitation, &everything(), wrong_key, None);
    assert_eq!(asked(&again.expect("asked again")).0, ["user_name"]);
    for malformed in [
        json!(12345),
        json!({"action": "accept", "content": {"name": 7}}),
    ] {
        let responses = json!({"user_name": malformed});
        let refused = round(&pending, Asker::Elicitation, &everything(), responses, None);
        assert_eq!(refused.map_err(|e| e.0), Err(ErrorCode::INVALID_PARAMS));
    }
    let declined = json!({"user_name": {"action": "decline"}});
    let stopped = round(&pending, Asker::Elicitation, &everything(), declined, None);
    assert!(stopped.expect("a result")["stopped"].is_string());
}

#[test]
fn a_request_state_counts_only_as_issued_to_its_asker_and_only_once() {
    let pending = Pending::default();
    let all = everything();
    let first = round(&pending, Asker::TamperedState, &all, Value::Null, None).expect("asks");
    let state = asked(&first).1.expect("a requestState").to_owned();
    let confirmed = json!({"confirm": accept(json!({"ok": true}))});
    let retry = |asker, state: &str| round(&pending, asker, &all, confirmed.clone(), Some(state));

    let tampered = format!("{state}-TAMPERED");
    for (asker, state) in [
        (Asker::TamperedState, tampered.as_str()),
        (Asker::RequestState, &state),
    ] {
        let refused = retry(asker, state).map_err(|e| e.0);
        assert_eq!(refused, Err(ErrorCode::INVALID_PARAMS), "{asker:?} {state}");
    }
    let done = retry(Asker::TamperedState, &state).expect("the state as issued");
    assert!(
        done["done"]
            .as_str()
            .is_some_and(|t| t.contains("state-ok")),
        "{done}"
    );
    let replayed = retry(Asker::TamperedState, &state).map_err(|e| e.0);
    assert_eq!(replayed, Err(ErrorCode::INVALID_PARAMS));

    // Without its state, an answer does not count: the call starts over.
    let fresh = round(&pending, Asker::RequestState, &all, confirmed.clone(), None);
    assert_eq!(asked(&fresh.expect("asks")).0, ["confirm"]);
}

#[test]
fn multi_round_asks_one_step_a_round_each_with_a_new_state() {
    let pending = Pending::default();
    let all = everything();
    let first = round(&pending, Asker::MultiRound, &all, Value::Null, None).expect("step 1");
    let (keys, state1) = asked(&first);
    assert_eq!(keys, ["step1"]);
    let name = json!({"step1": accept(json!({"name": "Alice"}))});
    let second = round(&pending, Asker::MultiRound, &all, name, state1).expect("step 2");
    let (keys, state2) = asked(&second);
    assert_eq!(keys, ["step2"]);
    assert_ne!(state1, state2);
    let color = json!({"step2": accept(json!({"color": "blue"}))});
    let done = round(&pending, Asker::MultiRound, &all, color, state2);
    assert_eq!(done, Ok(json!({"done": "Alice's favorite color is blue."})));
}

#[test]
fn multiple_inputs_keep_a_partial_answer_and_ask_the_rest() {
    let pending = Pending::default();
    let all = everything();
    let first = round(&pending, Asker::MultipleInputs, &all, Value::Null, None).expect("asks");
    let (keys, state) = asked(&first);
    assert_eq!(keys, ["client_roots", "greeting", "user_name"]);
    let name = json!({"user_name": accept(json!({"name": "Alice"}))});
    let rest = round(&pending, Asker::MultipleInputs, &all, name, state).expect("the rest");
    assert_eq!(asked(&rest).0, ["client_roots", "greeting"]);
}

#[test]
fn only_declared_capabilities_are_asked() {
    let pending = Pending::default();
    for (declared, keys) in [
        (json!({"sampling": {}}), vec!["greeting"]),
        (
            json!({"elicitation": {}, "roots": {}}),
            vec!["client_roots", "user_name"],
        ),
    ] {
        let caps = capabilities(declared.clone());
        let first = round(&pending, Asker::Capabilities, &caps, Value::Null, None).expect("asks");
        assert_eq!(asked(&first).0, keys, "{declared}");
    }
    let none = capabilities(json!({}));
    let done = round(&pending, Asker::Capabilities, &none, Value::Null, None).expect("done");
    assert!(done["done"].is_string(), "{done}");
    // Any other asker refuses to ask what the client cannot answer (SEP-2575).
    for (asker, declared, required) in [
        (Asker::Elicitation, json!({"sampling": {}}), "elicitation"),
        (Asker::MissingCapability, json!({}), "sampling"),
    ] {
        let caps = capabilities(declared);
        let error = respond(asker, &caps, None, None, &pending).expect_err("refused");
        assert_eq!(error.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
        let data = error.data.unwrap_or_default();
        assert!(data["requiredCapabilities"][required].is_object(), "{data}");
    }
}

#[test]
fn the_oldest_waiting_call_is_forgotten_beyond_the_bound() {
    let pending = Pending::default();
    let oldest = pending.issue(Asker::RequestState, Default::default());
    let newer: Vec<String> = (0..MAX_PENDING)
        .map(|_| pending.issue(Asker::RequestState, Default::default()))
        .collect();
    assert!(pending.redeem(Asker::RequestState, &oldest).is_none());
    assert!(pending.redeem(Asker::RequestState, &newer[0]).is_some());
}
