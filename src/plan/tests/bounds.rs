//! Whatever a plan holds, the reply about it is bounded: huge strings are quoted as
//! previews, issues are capped, and cycles are reported once per tangle.

use serde_json::{Value, json};

use super::super::{IssueKind, Limits, MAX_ISSUES, prepare, render_issues};
use super::demo_catalog;

fn issues(plan: Value) -> Vec<crate::plan::PlanIssue> {
    match prepare(&plan, &demo_catalog(), &Limits::default()) {
        Ok(_) => panic!("the plan is valid"),
        Err(issues) => issues,
    }
}

#[test]
fn huge_strings_everywhere_make_a_small_reply() {
    let huge = "x".repeat(1_000_000);
    let step = json!({
        "id": huge, "tool": huge, "depends_on": [huge],
        "args": {"a": format!("${{{huge}"), "b": format!("$ref:{huge}"), huge.clone(): 1}
    });
    let plan = json!({"goal": huge, "strategy": huge, "steps": [step.clone(), step.clone(), step],
        "outputs": [huge], "unknown": huge});
    let found = issues(plan);
    let text = render_issues(&found);
    assert!(text.len() < 16_384, "{} bytes", text.len());
    assert!(
        found.iter().any(|i| matches!(&i.kind, IssueKind::InvalidId { reason, .. } if reason.contains("longer than 64"))),
        "{text}"
    );
}

#[test]
fn issues_are_capped_and_counted() {
    let steps: Vec<Value> = (0..200)
        .map(|i| json!({"id": format!("s{i}"), "tool": format!("no_such_tool_{i}")}))
        .collect();
    let found = issues(json!({ "steps": steps }));
    assert_eq!(found.len(), MAX_ISSUES + 1);
    assert!(matches!(
        found[MAX_ISSUES].kind,
        IssueKind::MoreIssues { count: 180 }
    ));
    let text = render_issues(&found);
    assert!(
        text.starts_with("The plan was not run: 200 problems."),
        "{text}"
    );
    assert!(
        text.contains("… and 180 more problems, not shown"),
        "{text}"
    );
}

#[test]
fn a_tangle_of_references_is_one_cycle() {
    let steps: Vec<Value> = (0..256)
        .map(|i| {
            let reads: serde_json::Map<String, Value> = (0..256)
                .filter(|j| *j != i)
                .map(|j| (format!("r{j}"), json!(format!("$ref:s{j}"))))
                .collect();
            json!({"id": format!("s{i}"), "tool": "chaos__echo", "args": reads})
        })
        .collect();
    let found = issues(json!({ "steps": steps }));
    let cycles = found
        .iter()
        .filter(|i| matches!(i.kind, IssueKind::Cycle { .. }))
        .count();
    assert_eq!(cycles, 1, "{}", render_issues(&found));
    assert!(render_issues(&found).len() < 4_096);
}

#[test]
fn a_reference_longer_than_the_limit_is_refused_with_it() {
    let path = "b.".repeat(2_500_000) + "b";
    let written = [
        json!(format!("$ref:a.{path}")),
        json!(format!("say ${{a.{path}}}")),
        json!({"$ref": format!("a.{path}")}),
    ];
    for x in written {
        let found = issues(json!({"steps": [
            {"id": "a", "tool": "chaos__echo", "args": {}},
            {"id": "b", "tool": "chaos__echo", "args": {"x": x}}
        ]}));
        let text = render_issues(&found);
        assert_eq!(found.len(), 1, "{text}");
        assert_eq!(found[0].location, "steps[1].args.x");
        assert!(
            matches!(&found[0].kind, IssueKind::BadReference { .. }),
            "{text}"
        );
        // What the model reads names the limit, after a short quote of the reference.
        assert!(
            found[0]
                .message()
                .ends_with("bytes long; at most 4096 are allowed"),
            "{text}"
        );
    }
}
