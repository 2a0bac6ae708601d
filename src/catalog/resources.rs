//! The merged prompts, resources and resource templates of every server: prompts under
//! their exported names (`<server>__<prompt>`, the tools' rules), resources and templates
//! under their own URIs, and which server answers for a URI.

use std::collections::HashMap;

use rmcp::model::{Prompt, Resource, ResourceTemplate};

use super::exported;

/// One server's prompts, resources and templates, as it listed them.
#[derive(Debug, Clone, Default)]
pub struct ServerResources {
    pub server: String,
    /// Whether its prompts carry the server's prefix.
    pub namespace: bool,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    /// Whether it takes `resources/subscribe`.
    pub subscribe: bool,
}

/// One exported prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptEntry {
    /// The server that has it.
    pub server: String,
    /// Its name on that server.
    pub prompt: String,
    /// The definition with `name` replaced by the exported name.
    pub definition: Prompt,
}

/// Prompts, resources and templates of every server, in config order.
#[derive(Debug, Default, PartialEq)]
pub struct Resources {
    prompts: Vec<PromptEntry>,
    by_prompt: HashMap<String, usize>,
    /// Every resource with its server; the first server to list a URI answers for it.
    resources: Vec<(String, Resource)>,
    by_uri: HashMap<String, String>,
    templates: Vec<(String, ResourceTemplate)>,
    /// Servers with resources, in config order, and whether each takes subscriptions.
    servers: Vec<(String, bool)>,
    /// Prompt names two servers would both export.
    clashes: Vec<String>,
}

impl Resources {
    /// Merges every server's lists (`separator` joins server and prompt names).
    pub fn build(separator: &str, servers: &[ServerResources]) -> Self {
        let mut index = Resources::default();
        for listed in servers {
            for prompt in &listed.prompts {
                let name = exported(&listed.server, listed.namespace, separator, &prompt.name);
                if let Some(&first) = index.by_prompt.get(&name) {
                    let clash = format!(
                        "prompt '{}' of server '{}' exports as '{name}', which server '{}' has already; it is left out",
                        prompt.name, listed.server, index.prompts[first].server
                    );
                    tracing::error!("{clash}");
                    index.clashes.push(clash);
                    continue;
                }
                let mut definition = prompt.clone();
                definition.name = name.clone();
                index.by_prompt.insert(name, index.prompts.len());
                index.prompts.push(PromptEntry {
                    server: listed.server.clone(),
                    prompt: prompt.name.clone(),
                    definition,
                });
            }
            for resource in &listed.resources {
                index
                    .by_uri
                    .entry(resource.uri.clone())
                    .or_insert_with(|| listed.server.clone());
                index
                    .resources
                    .push((listed.server.clone(), resource.clone()));
            }
            for template in &listed.templates {
                index
                    .templates
                    .push((listed.server.clone(), template.clone()));
            }
            if !listed.resources.is_empty() || !listed.templates.is_empty() || listed.subscribe {
                index
                    .servers
                    .push((listed.server.clone(), listed.subscribe));
            }
        }
        index
    }

    /// Only what the servers `reachable` says a caller may reach listed.
    pub fn visible(&self, reachable: impl Fn(&str) -> bool) -> Self {
        let mut index = Resources::default();
        for prompt in self.prompts.iter().filter(|p| reachable(&p.server)) {
            let name = prompt.definition.name.clone();
            index.by_prompt.insert(name, index.prompts.len());
            index.prompts.push(prompt.clone());
        }
        for (server, resource) in self.resources.iter().filter(|(s, _)| reachable(s)) {
            let uri = resource.uri.clone();
            index.by_uri.entry(uri).or_insert_with(|| server.clone());
            index.resources.push((server.clone(), resource.clone()));
        }
        index.templates = (self.templates.iter())
            .filter(|(server, _)| reachable(server))
            .cloned()
            .collect();
        index.servers = (self.servers.iter())
            .filter(|(server, _)| reachable(server))
            .cloned()
            .collect();
        index
    }

    /// The exported prompts, for `prompts/list`.
    pub fn prompts(&self) -> impl Iterator<Item = &Prompt> {
        self.prompts.iter().map(|p| &p.definition)
    }

    /// The prompt behind an exported name.
    pub fn prompt(&self, exported: &str) -> Option<&PromptEntry> {
        self.by_prompt.get(exported).map(|&i| &self.prompts[i])
    }

    /// Every server's resources, URIs as the servers gave them.
    pub fn resources(&self) -> impl Iterator<Item = &Resource> {
        self.resources.iter().map(|(_, r)| r)
    }

    /// Every server's resource templates.
    pub fn templates(&self) -> impl Iterator<Item = &ResourceTemplate> {
        self.templates.iter().map(|(_, t)| t)
    }

    /// The server that listed `uri`, else the first whose template matches it.
    pub fn server_of(&self, uri: &str) -> Option<&str> {
        if let Some(server) = self.by_uri.get(uri) {
            return Some(server);
        }
        self.templates
            .iter()
            .find(|(_, t)| template_matches(&t.uri_template, uri))
            .map(|(server, _)| server.as_str())
    }

    /// The server whose template is exactly `template` (for completions).
    pub fn server_of_template(&self, template: &str) -> Option<&str> {
        self.templates
            .iter()
            .find(|(_, t)| t.uri_template == template)
            .map(|(server, _)| server.as_str())
    }

    /// Whether `server` takes `resources/subscribe`.
    pub fn subscribes(&self, server: &str) -> bool {
        self.servers.iter().any(|(s, yes)| s == server && *yes)
    }

    /// Prompt names two servers would both export, as messages (the later one is left out).
    pub fn clashes(&self) -> &[String] {
        &self.clashes
    }

    /// Servers that offer resources, in config order: the last resort for an unknown URI.
    pub fn resource_servers(&self) -> impl Iterator<Item = &str> {
        self.servers.iter().map(|(s, _)| s.as_str())
    }
}

/// Whether `uri` fits an RFC 6570 template: its literal parts in order, each expression
/// matching any text (servers are loose about what they put in one).
pub fn template_matches(template: &str, uri: &str) -> bool {
    if !template.contains('{') {
        return template == uri;
    }
    let mut literals: Vec<&str> = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        literals.push(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => rest = &rest[open + close + 1..],
            None => return false,
        }
    }
    let ends_open = template.ends_with('}');
    literals.push(rest);
    let mut at = match uri.strip_prefix(literals[0]) {
        Some(after) => uri.len() - after.len(),
        None => return false,
    };
    let last = literals.len() - 1;
    for (i, literal) in literals.iter().enumerate().skip(1) {
        if i == last && !ends_open {
            return uri[at..].ends_with(literal) && uri.len() - literal.len() > at;
        }
        if literal.is_empty() {
            continue;
        }
        // An expression matches at least one character: look for the literal after it.
        let Some(first) = uri[at..].chars().next() else {
            return false;
        };
        let from = at + first.len_utf8();
        match uri[from..].find(literal) {
            Some(found) => at = from + found + literal.len(),
            None => return false,
        }
    }
    // The template ended in an expression: it takes the rest, which must not be empty.
    at < uri.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_match_templates_by_their_literal_parts() {
        let cases = [
            ("file:///{path}", "file:///tmp/a.txt", true),
            ("file:///{path}", "file:///", false),
            (
                "demo://resource/dynamic/text/{id}",
                "demo://resource/dynamic/text/7",
                true,
            ),
            (
                "demo://resource/dynamic/text/{id}",
                "demo://resource/static/1",
                false,
            ),
            ("repo://{owner}/{name}/readme", "repo://a/b/readme", true),
            ("repo://{owner}/{name}/readme", "repo://a/b/license", false),
            ("repo://{owner}/{name}/readme", "repo:///readme", false),
            ("a://{x}/{y}", "a://b//c", true),
            ("a://{x}-{y}", "a://-b-c", true),
            ("plain://fixed", "plain://fixed", true),
            ("broken://{oops", "broken://x", false),
        ];
        for (template, uri, want) in cases {
            assert_eq!(template_matches(template, uri), want, "{template} ~ {uri}");
        }
    }

    #[test]
    fn prompts_are_exported_and_uris_routed_to_their_server() {
        let prompt = |name: &str| Prompt::new(name, Some("p"), None);
        let resource = |uri: &str| Resource::new(uri, uri);
        let index = Resources::build(
            "__",
            &[
                ServerResources {
                    server: "a".into(),
                    namespace: true,
                    prompts: vec![prompt("greet"), prompt("say hi")],
                    resources: vec![resource("mem://x")],
                    ..Default::default()
                },
                ServerResources {
                    server: "b".into(),
                    namespace: false,
                    prompts: vec![prompt("greet")],
                    resources: vec![resource("mem://x"), resource("mem://y")],
                    templates: vec![ResourceTemplate::new("note://{id}", "note")],
                    subscribe: true,
                },
            ],
        );
        let names: Vec<&str> = index.prompts().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["a__greet", "a__say_hi", "greet"],
            "b has namespace = false"
        );
        assert_eq!(
            index.prompt("a__say_hi").map(|p| p.prompt.as_str()),
            Some("say hi")
        );
        assert_eq!(index.server_of("mem://x"), Some("a"), "first lister wins");
        assert_eq!(index.server_of("mem://y"), Some("b"));
        assert_eq!(index.server_of("note://42"), Some("b"), "by template");
        assert_eq!(index.server_of("other://1"), None);
        assert_eq!(index.resource_servers().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(index.resources().count(), 3, "every listing is kept");
    }
}
