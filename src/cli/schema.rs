//! `planmux schema config|plan`: prints the JSON Schema of servers.toml or of a plan, for
//! editors (`#:schema` in servers.toml) and for models writing plans.

use super::Report;

/// What `planmux schema` prints the JSON Schema of.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Schema {
    /// servers.toml
    Config,
    /// a plan
    Plan,
}

/// `planmux schema config|plan`.
pub fn schema(what: Schema) -> Report {
    let schema = match what {
        Schema::Config => crate::config::config_schema(),
        Schema::Plan => crate::plan::plan_schema(),
    };
    let mut report = Report::new();
    match serde_json::to_string_pretty(&schema) {
        Ok(text) => report.out(text),
        Err(error) => report.fail(&error.into()),
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_each_schema_as_json() {
        for what in [Schema::Config, Schema::Plan] {
            let report = schema(what);
            assert_eq!(report.code(), 0);
            let printed: serde_json::Value =
                serde_json::from_str(&report.stdout()).expect("the schema is JSON");
            assert!(printed.is_object(), "{what:?}");
        }
    }
}
