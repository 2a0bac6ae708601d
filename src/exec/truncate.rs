//! Cutting an output value down to a size budget while keeping its JSON shape: long
//! strings are shortened, long arrays lose their tail, objects share the budget among their
//! values, and every cut leaves a marker saying how much went.

use serde_json::{Map, Value};

/// How much a truncation removed (sizes of the compact JSON text, in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    pub original: usize,
    pub kept: usize,
}

/// Room kept for a marker such as `"…[1234 more items]"`.
const MARKER: usize = 32;

/// The value unchanged when its compact JSON fits in `max` characters; otherwise a
/// smaller value of the same shape, and what was cut.
pub fn truncate(value: &Value, max: usize) -> (Value, Option<Cut>) {
    let original = size(value);
    if original <= max {
        return (value.clone(), None);
    }
    let out = shrink(value, max);
    let kept = size(&out);
    (out, Some(Cut { original, kept }))
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
