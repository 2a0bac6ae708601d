//! The example plan in `execute_plan`'s description: two steps over tools the live
//! catalog has, the second fed by the first's output, with values made up from their
//! schemas, so a model sees the format with names it can use.

use serde_json::{Map, Value, json};

use crate::catalog::{Catalog, Entry};
use crate::policy::Tier;

/// A plan over tools the catalog has, to show the format: a first tool that reads, and
/// a second (on the same server when it can) fed by the first's output. Values are made
/// up from the schemas; `None` when the catalog has no tool fit to show.
pub fn example(catalog: &Catalog) -> Option<String> {
    let entries = catalog.entries();
    let simple = |e: &&Entry| made_up_args(&e.definition.input_schema, None).is_some();
    let reads = || {
        entries
            .iter()
            .filter(simple)
            .filter(|e| e.tier == Tier::Read)
    };
    let first = reads()
        .find(|e| output_path(e).is_some())
        .or_else(|| reads().next())
        .or_else(|| entries.iter().find(simple))?;
    let reference = match output_path(first) {
        Some(path) => format!("$ref:a.{path}"),
        None => "$ref:a".to_owned(),
    };
    let fed = |e: &&Entry| {
        !std::ptr::eq(*e, first)
            && fed_param(&e.definition.input_schema)
                .is_some_and(|p| made_up_args(&e.definition.input_schema, Some(p)).is_some())
    };
    let second = entries
        .iter()
        .filter(fed)
        .find(|e| e.server == first.server)
        .or_else(|| entries.iter().find(fed));
    let first_args = made_up_args(&first.definition.input_schema, None)?;
    let mut text =
        String::from("Example (tools of this catalog, made-up values):\n{\"steps\": [\n");
    let step = |id: &str, tool: &str, args: &Value| {
        json!({"id": id, "tool": tool, "args": args}).to_string()
    };
    text.push_str(&format!(
        "  {}",
        step("a", first.exported.as_str(), &first_args)
    ));
    let outputs = match second {
        Some(second) => {
            let schema = &second.definition.input_schema;
            let param = fed_param(schema)?;
            let mut args = made_up_args(schema, Some(param))?;
            args[param] = Value::String(reference);
            text.push_str(&format!(
                ",\n  {}",
                step("b", second.exported.as_str(), &args)
            ));
            "b"
        }
        None => "a",
    };
    text.push_str(&format!("],\n \"outputs\": [\"{outputs}\"]}}"));
    Some(text)
}

/// A path into a tool's declared output worth showing: a property, or the first string
/// field of the first item of an array property.
fn output_path(entry: &Entry) -> Option<String> {
    let properties = entry.definition.output_schema.as_ref()?.get("properties")?;
    let (name, property) = properties.as_object()?.iter().next()?;
    if !is_plain_name(name) {
        return None;
    }
    let inner = property
        .get("items")
        .and_then(|items| items.get("properties"))
        .and_then(Value::as_object)
        .and_then(|p| {
            p.iter()
                .find(|(k, v)| is_plain_name(k) && v.get("type") == Some(&json!("string")))
        });
    Some(match inner {
        Some((field, _)) => format!("{name}[0].{field}"),
        None => name.clone(),
    })
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The parameter a reference feeds: the first required string one, else the first
/// required, else the first.
fn fed_param(schema: &Map<String, Value>) -> Option<&str> {
    let properties = schema.get("properties")?.as_object()?;
    let required: Vec<&str> = required(schema);
    let is_string = |name: &str| properties[name].get("type") == Some(&json!("string"));
    required
        .iter()
        .copied()
        .filter(|r| properties.contains_key(*r))
        .find(|r| is_string(r))
        .or_else(|| {
            required
                .iter()
                .copied()
                .find(|r| properties.contains_key(*r))
        })
        .or_else(|| properties.keys().next().map(String::as_str))
        .filter(|name| is_plain_name(name))
}

fn required(schema: &Map<String, Value>) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Made-up values for a schema's required parameters (all but `skip`), or `None` when one
/// is not a plain type, enum or const.
fn made_up_args(schema: &Map<String, Value>, skip: Option<&str>) -> Option<Value> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut args = Map::new();
    for name in required(schema) {
        if Some(name) == skip {
            continue;
        }
        let property = properties?.get(name)?;
        args.insert(name.to_owned(), made_up(property)?);
    }
    Some(Value::Object(args))
}

fn made_up(property: &Value) -> Option<Value> {
    if let Some(value) = property.get("const") {
        return Some(value.clone());
    }
    if let Some(first) = property
        .get("enum")
        .and_then(|e| e.as_array()?.first().cloned())
    {
        return Some(first);
    }
    Some(match property.get("type")?.as_str()? {
        "string" => json!("…"),
        "integer" | "number" => json!(
            property
                .get("minimum")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(1)
        ),
        "boolean" => json!(true),
        "array" => json!([]),
        "object" => json!({}),
        _ => return None,
    })
}
