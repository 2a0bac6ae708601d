//! Cutting an output value down to what a host can read while keeping its JSON shape:
//! parts nested deeper than [`MAX_OUTPUT_DEPTH`] are replaced, then, within a size
//! budget, long strings are shortened, long arrays lose their tail, objects share the
//! budget among their values; every cut leaves a marker saying how much went.

use serde_json::{Map, Value};

/// How much a truncation removed (sizes of the compact JSON text, in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The value's size before the cut.
    pub original: usize,
    /// What is left of it.
    pub kept: usize,
    /// Whether parts nested deeper than [`MAX_OUTPUT_DEPTH`] were replaced by markers,
    /// whatever the size.
    pub too_deep: bool,
}

/// Deepest nesting an output value keeps, in arrays and objects (the value itself is
/// level 1). A host finds the value four levels down in planmux's answer (the JSON-RPC
/// message, its `result`, `structuredContent`, `outputs`) and parses the whole answer
/// at once: serde_json refuses 128 levels by default, Python's MCP SDK about 200. 64
/// leaves as many again for the envelopes a host wraps a tool result in before parsing
/// it again, and for a pipeline's result, which comes back as a step's output (cut
/// again, at 64 below that output). Tool outputs rarely nest past a dozen levels; a
/// chain of steps that each hand the previous output on adds one level per step.
pub const MAX_OUTPUT_DEPTH: usize = 64;

/// Room kept for a marker such as `"…[1234 more items]"`.
const MARKER: usize = 32;

/// The value unchanged when it nests at most [`MAX_OUTPUT_DEPTH`] deep and its compact
/// JSON fits in `max` characters; otherwise a value of the same shape within both, and
/// what was cut.
pub fn truncate(value: &Value, max: usize) -> (Value, Option<Cut>) {
    let original = size(value);
    let shallow =
        (!within_depth(value, MAX_OUTPUT_DEPTH)).then(|| cut_deep(value, MAX_OUTPUT_DEPTH));
    let too_deep = shallow.is_some();
    let out = match shallow {
        None if original <= max => return (value.clone(), None),
        None => shrink(value, max),
        Some(shallow) if size(&shallow) <= max => shallow,
        Some(shallow) => shrink(&shallow, max),
    };
    let kept = size(&out);
    let cut = Cut {
        original,
        kept,
        too_deep,
    };
    (out, Some(cut))
}

/// Whether `value` nests at most `levels` arrays and objects deep. Looks no deeper than
/// that, so its own recursion stays bounded.
fn within_depth(value: &Value, levels: usize) -> bool {
    match value {
        Value::Array(items) => levels > 0 && items.iter().all(|v| within_depth(v, levels - 1)),
        Value::Object(map) => levels > 0 && map.values().all(|v| within_depth(v, levels - 1)),
        _ => true,
    }
}

/// A copy of `value` in which every array or object more than `levels` deep is a marker
/// saying how large it was.
fn cut_deep(value: &Value, levels: usize) -> Value {
    match value {
        Value::Array(_) | Value::Object(_) if levels == 0 => Value::String(format!(
            "…[nested deeper than {MAX_OUTPUT_DEPTH} levels: {} chars]",
            size(value)
        )),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| cut_deep(v, levels - 1)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), cut_deep(v, levels - 1)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Characters of the compact JSON text.
fn size(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count() + 2,
        Value::Array(items) => 1 + items.iter().map(|v| size(v) + 1).sum::<usize>().max(1),
        Value::Object(map) => {
            1 + map
                .iter()
                .map(|(k, v)| k.chars().count() + 4 + size(v))
                .sum::<usize>()
                .max(1)
        }
        other => other.to_string().len(),
    }
}

fn shrink(value: &Value, budget: usize) -> Value {
    if size(value) <= budget {
        return value.clone();
    }
    match value {
        Value::String(s) => {
            let total = s.chars().count();
            let keep = budget.saturating_sub(MARKER).min(total);
            let head: String = s.chars().take(keep).collect();
            Value::String(format!("{head}…[{} more chars]", total - keep))
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            let mut used = 2 + MARKER;
            for item in items {
                let need = size(item) + 1;
                if used + need <= budget {
                    out.push(item.clone());
                    used += need;
                } else {
                    if out.is_empty() && budget > used + MARKER {
                        out.push(shrink(item, budget - used));
                    }
                    break;
                }
            }
            let more = items.len() - out.len();
            if more > 0 {
                out.push(Value::String(format!("…[{more} more items]")));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            let keys: usize = map.keys().map(|k| k.chars().count() + 4).sum::<usize>() + 2;
            let mut out = Map::new();
            if keys + MARKER > budget {
                // Too many keys to keep them all: keep the first ones that fit, small.
                let mut used = 2 + MARKER;
                for (k, v) in map {
                    let need = k.chars().count() + 4 + size(v).min(MARKER);
                    if used + need > budget {
                        break;
                    }
                    out.insert(k.clone(), shrink(v, MARKER));
                    used += need;
                }
                let more = map.len() - out.len();
                out.insert("…".into(), Value::String(format!("[{more} more keys]")));
                return Value::Object(out);
            }
            // Small values stay whole; the rest share what is left equally.
            let mut left = budget - keys;
            let mut big: Vec<(&String, &Value)> = Vec::new();
            for (k, v) in map {
                if size(v) * map.len() <= left {
                    left -= size(v);
                } else {
                    big.push((k, v));
                }
            }
            let share = left / big.len().max(1);
            for (k, v) in map {
                let shrunk = if big.iter().any(|(bk, _)| *bk == k) {
                    shrink(v, share)
                } else {
                    v.clone()
                };
                out.insert(k.clone(), shrunk);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `levels` objects nested in one another around a string.
    fn nested(levels: usize) -> Value {
        (0..levels).fold(json!("bottom"), |inner, _| json!({"next": inner}))
    }

    /// Arrays and objects from the value down to its deepest point.
    fn depth(value: &Value) -> usize {
        match value {
            Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
            Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn values_nested_past_the_limit_are_cut_there_and_say_so() {
        let (out, cut) = truncate(&nested(300), usize::MAX);
        assert_eq!(depth(&out), MAX_OUTPUT_DEPTH);
        let marker = (0..MAX_OUTPUT_DEPTH).fold(&out, |v, _| &v["next"]);
        let went = nested(300 - MAX_OUTPUT_DEPTH).to_string().len();
        assert_eq!(
            marker.as_str(),
            Some(format!("…[nested deeper than 64 levels: {went} chars]").as_str())
        );
        assert_eq!(cut.map(|c| c.too_deep), Some(true));
        assert!(cut.is_some_and(|c| c.kept < c.original));
    }

    #[test]
    fn a_value_as_deep_as_the_limit_is_untouched() {
        let v = nested(MAX_OUTPUT_DEPTH);
        assert_eq!(truncate(&v, usize::MAX), (v.clone(), None));
    }

    #[test]
    fn a_deep_and_large_value_is_cut_to_both_limits() {
        let v = json!({"blob": "x".repeat(5000), "deep": nested(100)});
        let (out, cut) = truncate(&v, 400);
        assert!(
            depth(&out) <= MAX_OUTPUT_DEPTH && size(&out) <= 400,
            "{out}"
        );
        assert!(cut.is_some_and(|c| c.too_deep && c.kept <= 400));
    }

    #[test]
    fn small_values_are_untouched() {
        let v = json!({"a": [1, 2, 3], "b": "text"});
        assert_eq!(truncate(&v, 100), (v.clone(), None));
    }

    #[test]
    fn sizes_match_serde_json_for_ascii() {
        for v in [
            json!({"a": [1, "x", null, true], "bb": {"c": 1.5}}),
            json!("plain"),
            json!([]),
        ] {
            assert_eq!(size(&v), v.to_string().len(), "{v}");
        }
    }

    #[test]
    fn long_string_keeps_its_head_and_says_how_much_went() {
        let (out, cut) = truncate(&json!("x".repeat(1000)), 100);
        let text = out.as_str().unwrap_or_default();
        assert!(
            text.starts_with("xxxx") && text.ends_with("…[932 more chars]"),
            "{text}"
        );
        assert_eq!(cut.map(|c| c.original), Some(1002));
        assert!(size(&out) <= 100);
    }

    #[test]
    fn long_array_keeps_its_first_items() {
        let items: Vec<Value> = (0..1000).map(|i| json!({"id": i})).collect();
        let (out, cut) = truncate(&Value::Array(items), 200);
        let out = out.as_array().cloned().unwrap_or_default();
        assert_eq!(out[0], json!({"id": 0}));
        assert!(
            out.last()
                .and_then(Value::as_str)
                .is_some_and(|m| m.ends_with("more items]"))
        );
        assert!(cut.is_some_and(|c| c.kept <= 200));
    }

    #[test]
    fn objects_keep_every_key_and_share_the_budget() {
        let v = json!({"id": 7, "body": "y".repeat(5000), "tags": ["a", "b"], "notes": "z".repeat(5000)});
        let (out, cut) = truncate(&v, 400);
        assert_eq!(out["id"], 7);
        assert_eq!(out["tags"], json!(["a", "b"]));
        assert!(
            out["body"]
                .as_str()
                .is_some_and(|s| s.contains("more chars"))
        );
        assert!(
            out["notes"]
                .as_str()
                .is_some_and(|s| s.contains("more chars"))
        );
        assert!(cut.is_some_and(|c| c.kept <= 400 && c.original > 10_000));
    }

    #[test]
    fn object_with_too_many_keys_keeps_the_first() {
        let map: Map<String, Value> = (0..500).map(|i| (format!("key{i}"), json!(i))).collect();
        let (out, _) = truncate(&Value::Object(map), 120);
        assert_eq!(out["key0"], 0);
        assert!(out["…"].as_str().is_some_and(|m| m.contains("more keys")));
        assert!(size(&out) <= 160);
    }
}
