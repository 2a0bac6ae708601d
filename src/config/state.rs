//! `[state]`: the store is "memory" or a Redis URL, read into a [`StateStore`] whose
//! label (what logs and errors name) has no credentials; and `[telemetry]`, what is told
//! to monitoring.

use super::read::Section;
use super::validate::Cx;
use super::{Secret, StateStore, Telemetry, wire};

impl Cx<'_> {
    /// `[telemetry]`; `None` once a problem is reported.
    pub(super) fn telemetry(&self, section: Section<wire::Telemetry>) -> Option<Telemetry> {
        let s = "[telemetry]";
        let w = self.accept(section, s, s, "telemetry")?;
        let otlp_endpoint = match &w.otlp_endpoint {
            Some(text) => {
                let endpoint = self.expanded(s, "otlp_endpoint", &text.0)?;
                match url::Url::parse(&endpoint) {
                    Ok(url) if matches!(url.scheme(), "http" | "https") => Some(endpoint),
                    _ => {
                        let why = "must be an http or https URL, e.g. \"http://collector:4318\"";
                        self.key_error(s, "otlp_endpoint", why);
                        return None;
                    }
                }
            }
            None => None,
        };
        Some(Telemetry {
            metrics: w.metrics.is_some_and(|flag| flag.0),
            otlp_endpoint,
        })
    }

    /// `[state]`; `None` once a problem is reported.
    pub(super) fn state(&self, section: Section<wire::State>) -> Option<StateStore> {
        let s = "[state]";
        let w = self.accept(section, s, s, "state")?;
        let Some(store) = w.store else {
            return Some(StateStore::Memory);
        };
        if store.0 == "memory" {
            return Some(StateStore::Memory);
        }
        let url = self.expanded(s, "store", &store.0)?;
        match parse(&url) {
            Ok(label) => Some(StateStore::Redis {
                url: Secret(url),
                label,
            }),
            Err(why) => {
                self.key_error(s, "store", why);
                None
            }
        }
    }
}

/// A Redis URL's label: its scheme, host, port and database, without credentials; or
/// why it is no store planmux can use.
fn parse(text: &str) -> Result<String, String> {
    let expected = "write \"memory\" or a Redis URL such as \"redis://127.0.0.1:6379\"";
    let url = url::Url::parse(text)
        .map_err(|_| format!("is neither \"memory\" nor a URL: {expected}"))?;
    if !matches!(url.scheme(), "redis" | "rediss") {
        return Err(format!(
            "'{}:' is not a Redis URL's scheme (redis: or rediss: for TLS): {expected}",
            url.scheme()
        ));
    }
    let host = url
        .host_str()
        .filter(|host| !host.is_empty())
        .ok_or_else(|| format!("names no host: {expected}"))?;
    let port = url.port().unwrap_or(6379);
    let database = url.path().trim_start_matches('/');
    if !database.is_empty() && database.parse::<u32>().is_err() {
        return Err(format!(
            "'/{database}' is not a database number (e.g. redis://host:6379/2)"
        ));
    }
    let database = if database.is_empty() { "0" } else { database };
    Ok(format!("{}://{host}:{port}/{database}", url.scheme()))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_store_is_labelled_without_its_credentials() {
        assert_eq!(
            parse("redis://:s3cret@cache.internal:6380/2").as_deref(),
            Ok("redis://cache.internal:6380/2")
        );
        assert_eq!(
            parse("rediss://user:pw@cache").as_deref(),
            Ok("rediss://cache:6379/0")
        );
        for (bad, says) in [
            ("postgres://db", "is not a Redis URL's scheme"),
            ("redis", "is neither \"memory\" nor a URL"),
            ("redis://cache/x", "is not a database number"),
        ] {
            let why = parse(bad).expect_err(bad);
            assert!(why.contains(says), "{bad}: {why}");
            assert!(!why.contains("s3cret"));
        }
    }
}
