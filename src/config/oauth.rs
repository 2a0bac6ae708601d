//! How planmux signs in to an HTTP server (DESIGN §13): its `Authorization` header, OAuth
//! in a browser (`scopes`, `client_id`, `client_secret`, `client_metadata_url`), or OAuth
//! client credentials (`oauth = { client_credentials = … }`). The keys that exclude each
//! other are refused together, each named.

use std::collections::BTreeMap;

use super::validate::Cx;
use super::wire;
use super::{BrowserClient, Secret, SignIn};

impl Cx<'_> {
    /// The sign-in of the HTTP server in section `s`, whose headers are `headers`.
    pub(super) fn sign_in(
        &self,
        s: &str,
        w: &wire::Server,
        headers: &BTreeMap<String, String>,
    ) -> SignIn {
        let header = headers
            .keys()
            .any(|name| name.eq_ignore_ascii_case("authorization"));
        let browser_keys = [
            ("scopes", w.scopes.is_some()),
            ("client_id", w.client_id.is_some()),
            ("client_secret", w.client_secret.is_some()),
            ("client_metadata_url", w.client_metadata_url.is_some()),
        ];
        if header {
            for (key, _) in browser_keys.iter().filter(|(_, set)| *set) {
                self.key_error(
                    s,
                    key,
                    "is for OAuth, which planmux does not use while headers set Authorization: keep one",
                );
            }
            if w.oauth.is_some() {
                self.key_error(
                    s,
                    "oauth",
                    "planmux does not use OAuth while headers set Authorization: keep one",
                );
            }
            return SignIn::Header;
        }
        let scopes = self.strings(s, "scopes", w.scopes.as_ref());
        if let Some(scope) = scopes.iter().find(|scope| !is_scope(scope)) {
            self.key_error(
                s,
                "scopes",
                format!("'{scope}' is not a scope (printable ASCII without spaces, quotes or backslashes)"),
            );
        }
        if let Some(oauth) = &w.oauth {
            for key in ["client_id", "client_secret", "client_metadata_url"] {
                if browser_keys.iter().any(|(k, set)| *k == key && *set) {
                    self.key_error(
                        s,
                        key,
                        "is for signing in with a browser; oauth.client_credentials has its own: keep one",
                    );
                }
            }
            let cc = &oauth.client_credentials;
            let client_id = self.expanded(s, "oauth", &cc.client_id.0);
            let client_secret = self.expanded(s, "oauth", &cc.client_secret.0);
            return SignIn::ClientCredentials {
                client_id: client_id.unwrap_or_default(),
                client_secret: Secret(client_secret.unwrap_or_default()),
                scopes,
            };
        }
        let text = |key: &str, value: Option<&super::values::Text>| {
            value.and_then(|value| self.expanded(s, key, &value.0))
        };
        let client = BrowserClient {
            scopes,
            client_id: text("client_id", w.client_id.as_ref()),
            client_secret: text("client_secret", w.client_secret.as_ref()).map(Secret),
            client_metadata_url: text("client_metadata_url", w.client_metadata_url.as_ref()),
        };
        if w.client_secret.is_some() && w.client_id.is_none() {
            self.key_error(
                s,
                "client_secret",
                "needs client_id: a secret belongs to a pre-registered client",
            );
        }
        if let Some(url) = &client.client_metadata_url
            && !is_metadata_url(url)
        {
            self.key_error(
                s,
                "client_metadata_url",
                "must be an https:// URL with a path (the client metadata document's address)",
            );
        }
        SignIn::Browser(client)
    }
}

/// RFC 6749 §3.3: a scope token is `%x21 / %x23-5B / %x5D-7E`.
fn is_scope(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5B).contains(&b) || (0x5D..=0x7E).contains(&b))
}

/// A client metadata document's URL is its client id: https with a path (CIMD).
fn is_metadata_url(url: &str) -> bool {
    url.strip_prefix("https://")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(host, path)| !host.is_empty() && !path.is_empty())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{Config, Transport};
    use super::*;

    fn sign_in(section: &str) -> Result<SignIn, String> {
        let env = |name: &str| (name == "SECRET").then(|| "s3".to_owned());
        let text = format!("[servers.r]\nurl = \"https://h/mcp\"\n{section}");
        let config = Config::parse(&text, "servers.toml", Path::new("/"), &env)
            .map_err(|e| e.to_string())?;
        match &config.servers[0].transport {
            Transport::Http { sign_in, .. } => Ok(sign_in.clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sign_in_keys() {
        let browser = |client: BrowserClient| Ok(SignIn::Browser(client));
        let cases: Vec<(&str, Result<SignIn, String>)> = vec![
            ("", browser(BrowserClient::default())),
            (
                "headers = { authorization = \"Bearer x\" }",
                Ok(SignIn::Header),
            ),
            (
                "scopes = [\"read\", \"write\"]\nclient_id = \"c\"\nclient_secret = \"${SECRET}\"",
                browser(BrowserClient {
                    scopes: vec!["read".into(), "write".into()],
                    client_id: Some("c".into()),
                    client_secret: Some(Secret("s3".into())),
                    client_metadata_url: None,
                }),
            ),
            (
                "client_metadata_url = \"https://me.example/client.json\"",
                browser(BrowserClient {
                    client_metadata_url: Some("https://me.example/client.json".into()),
                    ..BrowserClient::default()
                }),
            ),
            (
                "scopes = [\"m2m\"]\noauth = { client_credentials = { client_id = \"ci\", client_secret = \"${SECRET}\" } }",
                Ok(SignIn::ClientCredentials {
                    client_id: "ci".into(),
                    client_secret: Secret("s3".into()),
                    scopes: vec!["m2m".into()],
                }),
            ),
            (
                "headers = { Authorization = \"Bearer x\" }\nscopes = [\"a\"]",
                Err("servers.toml: [servers.r]: key 'scopes': is for OAuth, which planmux does not use while headers set Authorization: keep one".into()),
            ),
            (
                "client_secret = \"x\"",
                Err("servers.toml: [servers.r]: key 'client_secret': needs client_id: a secret belongs to a pre-registered client".into()),
            ),
            (
                "client_metadata_url = \"http://me.example/c.json\"",
                Err("servers.toml: [servers.r]: key 'client_metadata_url': must be an https:// URL with a path (the client metadata document's address)".into()),
            ),
            (
                "scopes = [\"a b\"]",
                Err("servers.toml: [servers.r]: key 'scopes': 'a b' is not a scope (printable ASCII without spaces, quotes or backslashes)".into()),
            ),
            (
                "client_id = \"c\"\noauth = { client_credentials = { client_id = \"ci\", client_secret = \"s\" } }",
                Err("servers.toml: [servers.r]: key 'client_id': is for signing in with a browser; oauth.client_credentials has its own: keep one".into()),
            ),
        ];
        for (section, want) in cases {
            assert_eq!(sign_in(section), want, "{section}");
        }
    }

    #[test]
    fn sign_in_keys_only_on_http_servers() {
        let env = |_: &str| None;
        let text = "[servers.s]\ncommand = \"x\"\nscopes = [\"a\"]";
        let error = Config::parse(text, "servers.toml", Path::new("/"), &env)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("servers.toml: [servers.s]: key 'scopes': does not apply to this kind of server")
        );
    }

    #[test]
    fn scopes() {
        for (scope, ok) in [
            ("read", true),
            ("repo:read", true),
            ("https://x/y", true),
            ("", false),
            ("a b", false),
            ("a\"b", false),
            ("a\\b", false),
            ("é", false),
        ] {
            assert_eq!(is_scope(scope), ok, "{scope}");
        }
    }

    #[test]
    fn metadata_urls() {
        for (url, ok) in [
            ("https://example.com/client.json", true),
            ("https://example.com/", false),
            ("https://example.com", false),
            ("http://example.com/client.json", false),
            ("https:///client.json", false),
        ] {
            assert_eq!(is_metadata_url(url), ok, "{url}");
        }
    }
}
