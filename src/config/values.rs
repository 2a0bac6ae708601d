//! The values servers.toml's keys hold. Each is read through `toml::Value`, so that a wrong
//! one is refused in planmux's own words ("expected a string, found integer"), the same
//! sentence whichever key holds it; its JSON Schema is what an editor checks the key with.
//! The derived ones are described in `//` comments: schemars would put a `///` into the
//! schema, where an editor would show it in place of the key's own.

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;
use toml::Value;

use super::Surface;
use crate::demo::DemoKind;
use crate::policy::{Confirm, Tier};

// A string, as written: `${VAR}` is expanded later, where the environment is known.
#[derive(Deserialize, JsonSchema)]
#[serde(try_from = "Value")]
#[schemars(with = "String", inline)]
pub(super) struct Text(pub(super) String);

impl TryFrom<Value> for Text {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            Value::String(text) => Ok(Text(text)),
            other => Err(format!("expected a string, found {}", other.type_str())),
        }
    }
}

// A count, a size or a time in milliseconds: zero would turn off what it limits.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(try_from = "Value")]
#[schemars(with = "std::num::NonZeroU64", inline)]
pub(super) struct Count(pub(super) usize);

impl Count {
    pub(super) fn millis(self) -> Duration {
        Duration::from_millis(self.0 as u64)
    }
}

impl TryFrom<Value> for Count {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        match value.as_integer() {
            Some(n) if n > 0 => usize::try_from(n)
                .map(Count)
                .map_err(|_| "too large".into()),
            _ => Err(format!("expected a positive integer, found {value}")),
        }
    }
}

// `true` or `false`.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(try_from = "Value")]
#[schemars(with = "bool", inline)]
pub(super) struct Flag(pub(super) bool);

impl TryFrom<Value> for Flag {
    type Error = &'static str;

    fn try_from(value: Value) -> Result<Self, &'static str> {
        value.as_bool().map(Flag).ok_or("expected true or false")
    }
}

// An array of strings (arguments, globs, tokens).
#[derive(Deserialize, JsonSchema)]
#[serde(try_from = "Value")]
#[schemars(with = "Vec<String>", inline)]
pub(super) struct Texts(pub(super) Vec<String>);

impl TryFrom<Value> for Texts {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            Value::Array(items) => items
                .into_iter()
                .map(|item| Text::try_from(item).map(|text| text.0))
                .collect::<Result<_, _>>()
                .map(Texts),
            other => Err(format!(
                "expected an array of strings, found {}",
                other.type_str()
            )),
        }
    }
}

/// A table whose keys are names (servers, variables, tool globs), in file order: the
/// servers start and the `tiers` globs match in the order written.
pub(super) struct Ordered<V>(pub(super) Vec<(String, V)>);

impl<'de, V: DeserializeOwned> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Table(table) => table
                .into_iter()
                .map(|(key, value)| match V::deserialize(value) {
                    Ok(value) => Ok((key, value)),
                    Err(e) => Err(D::Error::custom(e.message())),
                })
                .collect::<Result<_, _>>()
                .map(Ordered),
            other => Err(D::Error::custom(format!(
                "expected a table, found {}",
                other.type_str()
            ))),
        }
    }
}

impl<V: JsonSchema> JsonSchema for Ordered<V> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        <std::collections::BTreeMap<String, V>>::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <std::collections::BTreeMap<String, V>>::json_schema(generator)
    }
}

/// One of a closed set of names: a tier, a built-in server, a surface.
#[derive(Clone, Copy)]
pub(super) struct Choice<T>(pub(super) T);

/// A type a `Choice` names: its names, for the schema, and its parser, whose error lists
/// them.
pub(super) trait Choices: FromStr<Err = String> {
    /// What the schema calls the set.
    const SET: &'static str;
    fn names() -> Vec<&'static str>;
}

impl<'de, T: Choices> Deserialize<'de> for Choice<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Text(name) = Text::deserialize(deserializer)?;
        name.parse().map(Choice).map_err(D::Error::custom)
    }
}

impl<T: Choices> JsonSchema for Choice<T> {
    fn schema_name() -> Cow<'static, str> {
        T::SET.into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "enum": T::names()})
    }
}

impl Choices for Tier {
    const SET: &'static str = "Tier";
    fn names() -> Vec<&'static str> {
        [Tier::Read, Tier::Write, Tier::Destructive]
            .map(Tier::as_str)
            .to_vec()
    }
}

impl Choices for Confirm {
    const SET: &'static str = "Confirm";
    fn names() -> Vec<&'static str> {
        vec!["write", "destructive", "none"]
    }
}

impl Choices for DemoKind {
    const SET: &'static str = "Builtin";
    fn names() -> Vec<&'static str> {
        DemoKind::ALL.map(DemoKind::name).to_vec()
    }
}

impl Choices for Surface {
    const SET: &'static str = "Surface";
    fn names() -> Vec<&'static str> {
        Surface::ALL.map(|(_, name)| name).to_vec()
    }
}

/// Where a pipeline's plan is: a file (any dialect, JSON), or the plan inline.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) enum PlanSource {
    File(String),
    Inline(Json),
}

impl TryFrom<Value> for PlanSource {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            Value::String(path) => Ok(PlanSource::File(path)),
            table @ Value::Table(_) => Ok(PlanSource::Inline(to_json(&table))),
            other => Err(format!(
                "expected a plan file (a string) or an inline plan (a table), found {}",
                other.type_str()
            )),
        }
    }
}

impl JsonSchema for PlanSource {
    fn schema_name() -> Cow<'static, str> {
        "PlanSource".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"anyOf": [{"type": "string"}, {"type": "object", "additionalProperties": true}]})
    }
}

// A table of JSON (a pipeline's input schema).
#[derive(Deserialize, JsonSchema)]
#[serde(try_from = "Value")]
#[schemars(with = "serde_json::Map<String, Json>", inline)]
pub(super) struct JsonTable(pub(super) Json);

impl TryFrom<Value> for JsonTable {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            table @ Value::Table(_) => Ok(JsonTable(to_json(&table))),
            other => Err(format!(
                "expected a JSON Schema table, found {}",
                other.type_str()
            )),
        }
    }
}

/// TOML as JSON (datetimes become their text).
fn to_json(value: &Value) -> Json {
    match value {
        Value::String(s) => Json::String(s.clone()),
        Value::Integer(n) => Json::from(*n),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::Boolean(b) => Json::Bool(*b),
        Value::Datetime(d) => Json::String(d.to_string()),
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Table(table) => {
            Json::Object(table.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the schema lists are names the parser takes.
    #[test]
    fn every_choice_the_schema_lists_parses() {
        fn check<T: Choices>() {
            for name in T::names() {
                assert!(name.parse::<T>().is_ok(), "{}: {name}", T::SET);
            }
            assert!("nope".parse::<T>().is_err(), "{}", T::SET);
        }
        check::<Tier>();
        check::<Confirm>();
        check::<DemoKind>();
        check::<Surface>();
    }
}
