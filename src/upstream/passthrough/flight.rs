//! A host's call in flight on the passthrough, from where the host's request was read to
//! its end, the same for a stdio host's line and an HTTP session's POSTs: admitted (the
//! checkpoint, the server's start) or in its server's call table, and how the host's
//! cancellation and the end of the admission wait change it.

use std::collections::HashMap;
use std::ops::{DerefMut, Range};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::CANCELLED;
use super::encode::Answer;
use super::read::id_text;
use crate::downstream::LineCall;

/// A host's call in flight, by the host's request id (as JSON text); `to` is where its
/// messages go, when that is not the host's one line.
pub(super) struct Flight<T> {
    /// The host's progress token, as JSON text, if it gave one.
    pub(super) progress: Option<String>,
    /// Tells apart a call from a later one under the same host id.
    pub(super) serial: u64,
    pub(super) stage: Stage,
    pub(super) to: T,
}

pub(super) enum Stage {
    /// Waiting for the checkpoint or the server: cancelling this stops the wait.
    Admitting(CancellationToken),
    /// The host cancelled it while it was admitted, giving this reason.
    Cancelled(Option<String>),
    /// In its server's call table.
    Sent(LineCall),
}

impl<T> Flight<T> {
    /// The progress `line` of the table's call `id` (its token at `token`), as the host
    /// reads it: under the host's token; `None` when it is not this call's, or the host
    /// gave no token.
    pub(super) fn host_progress(
        &self,
        id: &str,
        mut line: Vec<u8>,
        token: Range<usize>,
    ) -> Option<Vec<u8>> {
        let host_token = self.progress.as_ref().filter(|_| self.is(id))?;
        line.splice(token, host_token.bytes());
        Some(line)
    }

    /// Whether the table's call `id` is this one.
    pub(super) fn is(&self, id: &str) -> bool {
        match &self.stage {
            // Admitted calls hear their answer before their sender records the raw id.
            Stage::Admitting(_) => true,
            Stage::Cancelled(_) => false,
            Stage::Sent(call) => call.id() == id,
        }
    }
}

/// Why an admitted call did not reach its table.
pub(super) enum Refused {
    /// What the host is answered.
    Answer(Answer),
    /// Its table ended it and told the host.
    Told,
}

/// A host's `notifications/cancelled`.
#[derive(Deserialize)]
struct Cancel<'a> {
    #[serde(borrow)]
    params: Option<CancelParams<'a>>,
}

#[derive(Deserialize)]
struct CancelParams<'a> {
    #[serde(borrow, rename = "requestId")]
    request_id: Option<&'a RawValue>,
    reason: Option<String>,
}

/// The host cancelled a request (`notice`, its `notifications/cancelled`): if it is one of
/// those `in_flight`, an admitted call stops waiting, and a sent one is taken out and
/// stopped, its server hearing the host's reason. Like rmcp, the host gets no answer.
pub(super) fn cancel<T>(
    mut in_flight: impl DerefMut<Target = HashMap<String, Flight<T>>>,
    notice: &[u8],
) {
    let Ok(Cancel {
        params: Some(params),
    }) = serde_json::from_slice::<Cancel>(notice)
    else {
        return;
    };
    let Some(key) = params.request_id.and_then(|id| id_text(id.get())) else {
        return;
    };
    let (key, reason) = (key.as_ref(), params.reason);
    let Some(flight) = in_flight.get_mut(key) else {
        return;
    };
    match &flight.stage {
        Stage::Admitting(cancel) => {
            cancel.cancel();
            flight.stage = Stage::Cancelled(reason);
        }
        Stage::Cancelled(_) => {}
        Stage::Sent(_) => {
            if let Some(Flight {
                stage: Stage::Sent(call),
                ..
            }) = in_flight.remove(key)
            {
                drop(in_flight);
                call.cancel(Some(reason.as_deref().unwrap_or(CANCELLED)));
            }
        }
    }
}

/// Records how admitted call `key` (`serial`) ended its wait: in its table (from now its
/// table ends it), or not, with what to answer the host, if anything (nothing when the
/// host cancelled it, or its table told the host already), and where it was going.
pub(super) fn settle<T>(
    in_flight: &mut HashMap<String, Flight<T>>,
    key: &str,
    serial: u64,
    outcome: Result<LineCall, Refused>,
) -> Option<(Answer, T)> {
    // Gone: answered at once by its server, or cancelled by the host meanwhile.
    let flight = in_flight.get_mut(key).filter(|f| f.serial == serial)?;
    let answer = match (outcome, &flight.stage) {
        (Ok(sent), Stage::Admitting(_)) => {
            flight.stage = Stage::Sent(sent);
            return None;
        }
        (Ok(sent), Stage::Cancelled(reason)) => {
            sent.cancel(Some(reason.as_deref().unwrap_or(CANCELLED)));
            None
        }
        (Err(Refused::Answer(answer)), Stage::Admitting(_)) => Some(answer),
        // Its table told the host already, or the host cancelled it.
        (Err(Refused::Told), _)
        | (Ok(_) | Err(Refused::Answer(_)), Stage::Cancelled(_) | Stage::Sent(_)) => None,
    };
    let gone = in_flight.remove(key)?;
    answer.map(|answer| (answer, gone.to))
}
