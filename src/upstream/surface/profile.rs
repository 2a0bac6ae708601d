//! Host profiles: what planmux knows of each host it may serve, found by the
//! `clientInfo.name` it announces (how many tools it takes well, the longest name it
//! keeps, whether it re-reads lists on `list_changed`).

use rmcp::model::Implementation;

/// What planmux knows of a host, by its `clientInfo.name`. README's "Hosts" table is
/// this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostProfile {
    /// Who it is, for the log.
    pub host: &'static str,
    /// The client names it announces, folded (lower case, letters and digits only); a
    /// name matches when it starts with one.
    pub(super) names: &'static [&'static str],
    /// Tools it takes well: `auto` lists every tool only when they all fit.
    pub tool_budget: usize,
    /// Longest tool name it keeps: `auto` is compact when a name is longer.
    pub name_budget: usize,
    /// Whether it re-reads the lists on `list_changed` (if not, its lists wait for every
    /// server's first start).
    pub list_changed: bool,
}

/// The known hosts. Budgets come from what each documents or does: Cursor uses the first
/// 40 tools and drops names over 60 characters; VS Code sends at most 128 tools per
/// request, its own (about 30) included; Windsurf caps at 100; Claude Desktop reads the
/// list once per connection and drops definitions under context pressure; Claude Code
/// defers MCP tools itself past a share of the context (planmux's own tools carry
/// `anthropic/alwaysLoad`).
pub const PROFILES: &[HostProfile] = &[
    HostProfile {
        host: "Claude Desktop / claude.ai",
        names: &["claudeai"],
        tool_budget: 40,
        name_budget: 64,
        list_changed: false,
    },
    HostProfile {
        host: "Claude Code",
        names: &["claudecode"],
        tool_budget: 200,
        name_budget: 64,
        list_changed: true,
    },
    HostProfile {
        host: "Cursor",
        names: &["cursor"],
        tool_budget: 40,
        name_budget: 60,
        list_changed: true,
    },
    HostProfile {
        host: "VS Code",
        names: &["visualstudiocode", "vscode"],
        tool_budget: 96,
        name_budget: 64,
        list_changed: true,
    },
    HostProfile {
        host: "Windsurf",
        names: &["windsurf"],
        tool_budget: 100,
        name_budget: 64,
        list_changed: true,
    },
];

/// Any other host: past 30–50 tools, models choose worse.
pub const OTHER_HOST: HostProfile = HostProfile {
    host: "other host",
    names: &[],
    tool_budget: 40,
    name_budget: 64,
    list_changed: true,
};

/// The profile of a host by its `clientInfo.name`.
pub fn profile(client: Option<&Implementation>) -> &'static HostProfile {
    let Some(client) = client else {
        return &OTHER_HOST;
    };
    let folded: String = client
        .name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    PROFILES
        .iter()
        .find(|p| p.names.iter().any(|n| folded.starts_with(n)))
        .unwrap_or(&OTHER_HOST)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::surface::fixtures::client;

    #[test]
    fn hosts_are_known_by_their_client_names() {
        let cases = [
            ("claude-ai", "Claude Desktop / claude.ai"),
            ("claude-code", "Claude Code"),
            ("cursor-vscode", "Cursor"),
            ("Visual Studio Code", "VS Code"),
            ("visual-studio-code", "VS Code"),
            ("windsurf-client", "Windsurf"),
            ("my-agent", "other host"),
        ];
        for (name, host) in cases {
            assert_eq!(profile(Some(&client(name))).host, host, "{name}");
        }
        assert_eq!(profile(None), &OTHER_HOST);
        assert!(!profile(Some(&client("claude-ai"))).list_changed);
    }
}
