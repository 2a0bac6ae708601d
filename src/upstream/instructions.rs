//! What a host reads as planmux's instructions: planmux's own, then each server's.

/// planmux's instructions, then each server's own under its name, bounded: each to
/// 2,000 characters, all to 8,000 (the servers that no longer fit are named).
pub(super) fn merged(servers: Vec<(String, String)>) -> String {
    let mut text = OWN_INSTRUCTIONS.to_owned();
    let mut left_out = Vec::new();
    for (server, own) in servers {
        let part = format!(
            "\n\n## {server}\n{}",
            crate::text::clip(own.trim(), MAX_SERVER_INSTRUCTIONS)
        );
        if text.len() + part.len() > MAX_INSTRUCTIONS {
            left_out.push(server);
        } else {
            text.push_str(&part);
        }
    }
    if !left_out.is_empty() {
        text.push_str(&format!(
            "\n\n(Instructions of {} left out for length.)",
            left_out.join(", ")
        ));
    }
    text
}

/// Longest instructions taken from one server, and from all of them together.
const MAX_SERVER_INSTRUCTIONS: usize = 2_000;
const MAX_INSTRUCTIONS: usize = 8_000;

/// planmux's own instructions, before each server's.
const OWN_INSTRUCTIONS: &str = "planmux fronts several MCP servers: their tools and prompts are \
    listed as <server>__<name>, their resources under their own URIs. To run several calls \
    that feed each other, send one execute_plan instead of one call per turn.";
