//! Reading a TOML table into a wire struct (`wire.rs`) so that every key it refuses is
//! found, not only the first. Serde stops at the first unknown or wrong key; when it
//! refuses a table, each key is read again on its own, an unknown one is named with the
//! closest known key (the keys are the struct's own, from its JSON Schema), and the rest
//! of the table is still taken. A [`Section`] keeps what it refused in place, so that one
//! bad section does not hide another's problems.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use toml::{Table, Value};

/// A key a table refused, and why.
pub(super) struct Refused {
    /// The key as the user writes it (`env.KEY` for an entry of `env`); `None` for the
    /// value as a whole.
    pub(super) key: Option<String>,
    pub(super) message: String,
}

/// Reads `table` into `T`: what it takes (the keys it refuses left out) and every key it
/// refuses. `None` comes only with a refusal.
pub(super) fn read<T: DeserializeOwned + JsonSchema>(table: Table) -> (Option<T>, Vec<Refused>) {
    if let Ok(value) = T::deserialize(Value::Table(table.clone())) {
        return (Some(value), Vec::new());
    }
    let known = keys::<T>();
    let mut refused = Vec::new();
    let mut taken = Table::new();
    for (key, value) in table {
        if !known.contains(&key) {
            let message = unknown(&key, &known);
            refused.push(Refused {
                key: Some(key),
                message,
            });
        } else if let Err(error) = alone::<T>(&key, value.clone())
            && !misses_another(&error, &key, &known)
        {
            refused.extend(narrow::<T>(key, value, &error));
        } else {
            taken.insert(key, value);
        }
    }
    match T::deserialize(Value::Table(taken)) {
        Ok(value) => (Some(value), refused),
        Err(error) => {
            if refused.is_empty() {
                // Refused as a whole though every key reads alone.
                refused.push(Refused {
                    key: None,
                    message: error.message().to_owned(),
                });
            }
            (None, refused)
        }
    }
}

/// Whether `error`, of a table of `key` alone, is only that another of the section's
/// own keys (`known`) is missing: `key` itself is fine, and the section is told of the
/// missing one as a whole.
fn misses_another(error: &toml::de::Error, key: &str, known: &[String]) -> bool {
    let missing = error
        .message()
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'));
    missing.is_some_and(|field| field != key && known.iter().any(|k| k == field))
}

/// `T` from a table of `key` alone.
fn alone<T: DeserializeOwned>(key: &str, value: Value) -> Result<T, toml::de::Error> {
    T::deserialize(one(key, value))
}

/// A table of one key.
fn one(key: &str, value: Value) -> Value {
    Value::Table(Table::from_iter([(key.to_owned(), value)]))
}

/// Why `key` was refused: in a table of names (`env`, `tiers`: an empty one reads), each
/// entry refused alone, named `key.entry`; otherwise the key itself.
fn narrow<T: DeserializeOwned>(key: String, value: Value, error: &toml::de::Error) -> Vec<Refused> {
    if let Value::Table(entries) = value
        && alone::<T>(&key, Value::Table(Table::new())).is_ok()
    {
        let refused: Vec<Refused> = entries
            .into_iter()
            .filter_map(|(entry, value)| {
                let error = alone::<T>(&key, one(&entry, value)).err()?;
                Some(Refused {
                    key: Some(format!("{key}.{entry}")),
                    message: error.message().to_owned(),
                })
            })
            .collect();
        if !refused.is_empty() {
            return refused;
        }
    }
    vec![Refused {
        key: Some(key),
        message: error.message().to_owned(),
    }]
}

/// The keys `T` takes: its schema's properties, the names serde reads.
pub(super) fn keys<T: JsonSchema>() -> Vec<String> {
    let schema = schemars::schema_for!(T);
    schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

/// An unknown key's message: the closest known key, or all of them.
fn unknown(key: &str, known: &[String]) -> String {
    let closest = known
        .iter()
        .map(|k| (strsim::levenshtein(key, k), k))
        .filter(|(d, _)| *d <= 3)
        .min();
    match closest {
        Some((_, k)) => format!("unknown key (did you mean '{k}'?)"),
        None => format!("unknown key (known keys: {})", known.join(", ")),
    }
}

/// A section read on its own: its values, or every key it refused.
pub(super) struct Section<T>(pub(super) Result<T, Vec<Refused>>);

impl<'de, T: DeserializeOwned + JsonSchema> Deserialize<'de> for Section<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Section(match Value::deserialize(deserializer)? {
            Value::Table(table) => match read(table) {
                (Some(value), refused) if refused.is_empty() => Ok(value),
                (_, refused) => Err(refused),
            },
            other => Err(vec![Refused {
                key: None,
                message: format!("expected a table, found {}", other.type_str()),
            }]),
        }))
    }
}

/// A section's schema is its struct's.
impl<T: JsonSchema> JsonSchema for Section<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}
