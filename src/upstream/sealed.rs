//! A server's `requestState` as a 2026-07-28 host holds it. When a server asks the host
//! for input (`input_required`), its state goes to the host sealed (rmcp's
//! `RequestStateCodec`: HMAC-SHA256 with a key made for this process) and bound to the
//! exported tool it came from, for at most [`STATE_TTL`]; the host's retry is unsealed
//! before it goes back to the server, so the server gets its state as it gave it. A state
//! the host made up, changed, took from another tool or kept too long is refused, and
//! never reaches a server.
//!
//! A server's task (SEP-2663) reaches the host under an id of planmux's: the tool whose
//! call made it, the server's id and the caller it is for (its owner, when it has one),
//! sealed the same way without a time limit (the same task always has the same id). An
//! id planmux did not give out, or gave out to another caller, names no task.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::ErrorData;

use crate::identity::Owner;
use crate::state::Shared;
use rmcp::model::{InputRequiredResult, RequestStateCodec, SealOptions};

/// How long a host may take to answer a server's questions.
pub const STATE_TTL: Duration = Duration::from_secs(15 * 60);

/// Whether the key is the shared store's (`[state] store`): then nothing is sealed or
/// opened with another until it has been read from there.
static KEY_IS_SHARED: AtomicBool = AtomicBool::new(false);
/// The shared store's key (as hex, and its codec), once read.
static SHARED_KEY: OnceLock<(String, RequestStateCodec)> = OnceLock::new();

/// The codec in force: the shared store's key when there is a store (so that what one
/// instance sealed, another opens), else a fresh random key each start (a state outlives
/// no restart). `Err` says why there is none.
fn codec() -> Result<&'static RequestStateCodec, &'static str> {
    static OWN: OnceLock<Option<RequestStateCodec>> = OnceLock::new();
    if KEY_IS_SHARED.load(Ordering::Acquire) {
        return SHARED_KEY
            .get()
            .map(|(_, codec)| codec)
            .ok_or("its key is in the state store, which planmux has not reached yet");
    }
    OWN.get_or_init(|| {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).ok()?;
        RequestStateCodec::try_new(key.to_vec()).ok()
    })
    .as_ref()
    .ok_or("planmux has no random key")
}

/// From now on the key is `store`'s: read there (made by the first instance to ask),
/// tried again every second while the store cannot be reached. Then written back every
/// few seconds where it is missing, so a Redis that restarted empty gets the key the
/// running instances share, not a new one. Runs until the caller, which owns its task,
/// ends it with the process.
pub async fn share_key(store: Shared) {
    KEY_IS_SHARED.store(true, Ordering::Release);
    let mut unreachable = false;
    let mut differs = false;
    loop {
        let ours = SHARED_KEY.get().map(|(hex, _)| hex.clone());
        let offer = || {
            ours.clone().or_else(|| {
                let mut key = [0u8; 32];
                getrandom::fill(&mut key).ok()?;
                Some(key.iter().map(|b| format!("{b:02x}")).collect())
            })
        };
        match store.secret("sealing-key", offer).await {
            Ok(kept) if SHARED_KEY.get().is_none() => {
                match decode_hex(&kept).and_then(|key| RequestStateCodec::try_new(key).ok()) {
                    Some(codec) => {
                        let _ = SHARED_KEY.set((kept, codec));
                        tracing::info!(
                            store = store.label(),
                            "sealing key read from the state store"
                        );
                    }
                    None => {
                        let error = store.unreadable("a sealing key", "not 32 bytes of hex");
                        tracing::error!(%error, "nothing can be sealed for hosts");
                    }
                }
                unreachable = false;
            }
            Ok(kept) => {
                if ours.as_deref() != Some(kept.as_str()) && !differs {
                    tracing::error!(
                        store = store.label(),
                        "the state store holds another sealing key than this instance's (it lost its data while another instance started?): what one instance seals for hosts, others refuse; restart the instances"
                    );
                }
                differs = ours.as_deref() != Some(kept.as_str());
                unreachable = false;
            }
            Err(error) => {
                if !unreachable {
                    tracing::warn!(%error, "the state store cannot be reached; retrying every second");
                }
                unreachable = true;
            }
        }
        let pause = if SHARED_KEY.get().is_some() && !unreachable {
            5
        } else {
            1
        };
        tokio::time::sleep(Duration::from_secs(pause)).await;
    }
}

/// Bytes from hex, `None` unless it is 64 hex digits.
fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    (hex.len() == 64 && hex.is_ascii())
        .then(|| {
            (0..32)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                .collect()
        })
        .flatten()
}

/// `state`, sealed for the host and bound to `tool` (its exported name), or the error
/// the host reads.
pub fn seal(state: &str, tool: &str) -> Result<String, ErrorData> {
    let options = SealOptions::new()
        .associated_data(tool.as_bytes())
        .ttl(STATE_TTL);
    let codec = codec().map_err(|why| {
        ErrorData::internal_error(
            format!("planmux cannot seal its state for the host: {why}"),
            None,
        )
    })?;
    Ok(codec.seal_with(state.as_bytes(), &options))
}

/// The server's state in what the host sent back for `tool`, or why it is refused.
pub fn open(sealed: &str, tool: &str) -> Result<String, String> {
    let codec = codec().map_err(|why| format!("planmux cannot check it: {why}"))?;
    let state = codec
        .open_with(sealed, tool.as_bytes())
        .map_err(|e| match e {
            rmcp::model::RequestStateError::Expired => {
                format!("it is older than {} minutes", STATE_TTL.as_secs() / 60)
            }
            _ => "planmux did not make it for this tool, or it was changed".to_owned(),
        })?;
    String::from_utf8(state).map_err(|_| "it does not hold text".to_owned())
}

/// The host's retry's `state` for `bound` (a tool's or prompt's exported name) opened in
/// place, or the error the host reads.
pub fn open_retry(state: &mut Option<String>, bound: &str) -> Result<(), ErrorData> {
    if let Some(sealed) = state.take() {
        let opened = open(&sealed, bound).map_err(|why| {
            ErrorData::invalid_params(
                format!(
                    "requestState refused: {why}; send the request for {bound} again without requestState and inputResponses"
                ),
                None,
            )
        })?;
        *state = Some(opened);
    }
    Ok(())
}

/// What a server asked, its state sealed in place for the host and bound to `bound`.
pub fn seal_asked(asked: &mut InputRequiredResult, bound: &str) -> Result<(), ErrorData> {
    if let Some(state) = asked.request_state.take() {
        let sealed = seal(&state, bound)?;
        asked.request_state = Some(sealed);
    }
    Ok(())
}

/// What a task id is bound to, so that no other sealed value passes for one.
const TASK: &[u8] = b"task";

/// The id the host holds for the server's task `task`, made by a call of `tool` (its
/// exported name) for `owner` (none: whoever holds the id).
pub fn task_id(tool: &str, task: &str, owner: Option<&Owner>) -> Result<String, ErrorData> {
    let options = SealOptions::new().associated_data(TASK);
    let owner = owner.map(Owner::stored);
    let codec = codec().map_err(|why| {
        ErrorData::internal_error(format!("planmux cannot seal the task's id: {why}"), None)
    })?;
    codec
        .seal_json_with(&(tool, task, owner), &options)
        .map_err(|e| {
            ErrorData::internal_error(format!("planmux cannot seal the task's id: {e}"), None)
        })
}

/// The tool whose call made the task the host names `id`, and the server's id for it,
/// when `viewer` may follow it (its owner's, or anyone's when it has none).
pub fn open_task_id(id: &str, viewer: Option<&Owner>) -> Result<(String, String), ErrorData> {
    let viewer = viewer.map(Owner::stored);
    codec()
        .ok()
        .and_then(|codec| {
            codec
                .open_json_with::<(String, String, Option<String>)>(id, TASK)
                .ok()
        })
        .filter(|(_, _, owner)| owner.is_none() || *owner == viewer)
        .map(|(tool, task, _)| (tool, task))
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "unknown task '{}': planmux gave out no such taskId",
                    crate::text::clip(id, 80)
                ),
                None,
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_comes_back_as_the_server_gave_it_and_only_for_its_tool() {
        let sealed = seal("server-state-1", "a__ask").expect("a key");
        assert_ne!(sealed, "server-state-1");
        assert_eq!(open(&sealed, "a__ask").as_deref(), Ok("server-state-1"));
        assert!(open(&sealed, "b__ask").is_err(), "another tool's state");
        let mut forged = sealed.clone();
        forged.pop();
        forged.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(open(&forged, "a__ask").is_err(), "a changed state");
        assert!(
            open("server-state-1", "a__ask").is_err(),
            "a state planmux did not seal"
        );
    }

    #[test]
    fn a_task_keeps_one_id_that_names_its_tool_and_server_id() {
        let id = task_id("a__slow", "t-1", None).expect("a key");
        assert_eq!(
            task_id("a__slow", "t-1", None).expect("a key"),
            id,
            "the same each time"
        );
        assert_eq!(
            open_task_id(&id, None).expect("planmux's"),
            ("a__slow".to_owned(), "t-1".to_owned())
        );
        // An owner's task is its own.
        let alice = Owner::Caller("idp alice".into());
        let hers = task_id("a__slow", "t-1", Some(&alice)).expect("a key");
        assert!(open_task_id(&hers, Some(&alice)).is_ok());
        assert!(open_task_id(&hers, Some(&Owner::Caller("idp bob".into()))).is_err());
        assert!(open_task_id(&hers, None).is_err());
        let state = seal("[\"a__slow\",\"t-1\"]", "a__slow").expect("a key");
        assert!(
            open_task_id(&state, None).is_err(),
            "a sealed state is no task id"
        );
        assert!(
            open_task_id("t-1", None).is_err(),
            "nor is the server's own id"
        );
        let error = open_task_id("t-1", None).expect_err("no task id");
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }
}
