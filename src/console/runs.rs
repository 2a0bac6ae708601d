//! The runs pages: the recent runs, and one run as its graph (the steps and what each
//! waited for), its timeline (when each step started and how long it took) and its
//! steps' arguments, outputs, errors and attempts.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use super::html::{badge, esc, json, time};
use crate::exec::{RunRecord, StepRecord, describe};
use crate::runner::{Planned, Running, StepNow};

/// A graph node's size and the room between them, in SVG units.
const NODE_W: usize = 170;
const NODE_H: usize = 40;
const GAP_X: usize = 50;
const GAP_Y: usize = 16;
/// The timeline's width for bars, and a row's height.
const BARS_W: f64 = 720.0;
const ROW_H: usize = 24;
const LABEL_W: usize = 170;

/// The plans running now (each step's state so far), the recent runs, newest first, and
/// the last lazy plans.
pub fn list(
    running: &[Arc<Running>],
    records: &[Arc<RunRecord>],
    planned: &[Arc<Planned>],
) -> String {
    let mut main = String::new();
    if !running.is_empty() {
        main.push_str("<h2>Running now</h2>");
    }
    for plan in running {
        let _ = write!(
            main,
            r#"<section class="running"><p><b>{}</b> <span class="note">running for {} ms</span></p><table><tr><th>step</th><th>tool</th><th>state</th></tr>"#,
            esc(plan.goal.as_deref().unwrap_or("(no goal given)")),
            plan.started.elapsed().as_millis(),
        );
        for ((id, tool), now) in plan.steps.iter().zip(plan.now()) {
            let state = match now {
                StepNow::Waiting => badge("waiting"),
                StepNow::Running(since) => {
                    format!("{} {} ms", badge("running"), since.elapsed().as_millis())
                }
                StepNow::Ended(status, ms) => format!(
                    "{} {}",
                    badge(status.as_str()),
                    ms.map_or(String::new(), |ms| format!("{ms:.1} ms"))
                ),
            };
            let _ = write!(
                main,
                r#"<tr class="live-step" data-step="{id}"><td>{id}</td><td>{}</td><td>{state}</td></tr>"#,
                esc(tool),
                id = esc(id),
            );
        }
        main.push_str("</table></section>");
    }
    let _ = write!(
        main,
        "<h2>Runs</h2><p class=\"note\">The last {} runs this process kept (<code>[proxy] kept_runs</code>), newest first.</p>\
         <table><tr><th>run</th><th>status</th><th>goal</th><th>steps</th><th>ms</th></tr>",
        records.len()
    );
    for record in records {
        let _ = write!(
            main,
            r#"<tr class="run" data-run="{id}" data-status="{status}"><td><a href="/console/runs/{id}">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            badge(record.status.as_str()),
            esc(record.goal.as_deref().unwrap_or("")),
            record.steps.len(),
            record.duration_ms.round(),
            id = esc(&record.run_id),
            status = record.status.as_str(),
        );
    }
    main.push_str("</table>");
    if !planned.is_empty() {
        main.push_str(
            "<h2>Planned, not run</h2><p class=\"note\">Lazy plans (<code>\"mode\": \"lazy\"</code>): what would run.</p>\
             <table><tr><th>plan</th><th>goal</th><th>steps</th><th>sent (UTC)</th></tr>",
        );
    }
    for plan in planned {
        let _ = write!(
            main,
            r#"<tr class="planned" data-planned="{key}"><td><a href="/console/planned/{key}">#{key}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(plan.goal.as_deref().unwrap_or("")),
            plan.steps.len(),
            time(plan.at_ms),
            key = plan.key,
        );
    }
    if !planned.is_empty() {
        main.push_str("</table>");
    }
    main
}

/// A lazy plan: its graph and schedule.
pub fn planned(plan: &Planned) -> String {
    format!(
        "<h2>Planned, not run: {}</h2><h2>Graph</h2>{}<h2>Schedule</h2><pre>{}</pre>",
        esc(plan.goal.as_deref().unwrap_or("(no goal given)")),
        graph(&plan.steps, true),
        esc(&plan.schedule),
    )
}

/// One run: its graph, timeline and steps.
pub fn one(record: &RunRecord) -> String {
    let mut main = format!(
        r#"<h2>Run <code>{id}</code> {}</h2><p>{}</p><p class="note">strategy {}, on error {}{}</p>"#,
        badge(record.status.as_str()),
        esc(&describe(record)),
        esc(&record.strategy),
        esc(&record.on_error),
        record
            .stopped
            .as_deref()
            .map_or(String::new(), |why| format!("; stopped: {}", esc(why))),
        id = esc(&record.run_id),
    );
    main.push_str("<h2>Graph</h2>");
    main.push_str(&graph(&record.steps, false));
    main.push_str("<h2>Timeline</h2>");
    main.push_str(&timeline(&record.steps, record.duration_ms));
    main.push_str(
        "<h2>Steps</h2><table><tr><th>step</th><th>tool</th><th>status</th><th>attempts</th><th>ms</th><th>waited ms</th><th>arguments</th><th>output or error</th></tr>",
    );
    let ends: HashMap<&str, f64> = (record.steps.iter())
        .filter_map(|s| Some((s.id.as_str(), s.started_ms? + s.duration_ms.unwrap_or(0.0))))
        .collect();
    for step in &record.steps {
        // From when what it waited for had ended (the run's start, for a step that waited
        // for nothing) to when it started: time spent on limits and the schedule.
        let ready = (step.after.iter())
            .filter_map(|id| ends.get(id.as_str()))
            .fold(0.0, |a: f64, b| a.max(*b));
        let waited = step
            .started_ms
            .map_or(String::new(), |at| format!("{:.1}", (at - ready).max(0.0)));
        let result = match (&step.error, &step.output, &step.reason) {
            (Some(error), _, _) => format!("<pre>{}</pre>", esc(error)),
            (None, Some(output), _) => json(output),
            (None, None, Some(reason)) => format!(r#"<span class="note">{}</span>"#, esc(reason)),
            (None, None, None) => String::new(),
        };
        let _ = write!(
            main,
            r#"<tr class="step" data-step="{id}" data-status="{status}"><td>{id}</td><td>{}<br><span class="note">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{waited}</td><td>{}</td><td>{result}</td></tr>"#,
            esc(&step.tool),
            step.tier.as_str(),
            badge(step.status.as_str()),
            step.attempts,
            step.duration_ms
                .map_or(String::new(), |ms| format!("{ms:.1}")),
            step.args.as_ref().map_or(String::new(), json),
            id = esc(&step.id),
            status = step.status.as_str(),
        );
        for item in &step.items {
            let _ = write!(
                main,
                r#"<tr class="item"><td>{}[{}]</td><td></td><td>{}</td><td>{}</td><td>{}</td><td></td><td>{}</td><td>{}</td></tr>"#,
                esc(&step.id),
                item.index,
                badge(item.status.as_str()),
                item.attempts,
                item.duration_ms
                    .map_or(String::new(), |ms| format!("{ms:.1}")),
                item.args.as_ref().map_or(String::new(), json),
                item.error
                    .as_deref()
                    .map_or(String::new(), |e| format!("<pre>{}</pre>", esc(e))),
            );
        }
    }
    main.push_str("</table>");
    main
}

/// The steps as columns by depth (a step stands right of every step it waited for),
/// each an arrow from what it waited for; coloured by status, or all alike when they are
/// only `planned`.
fn graph(steps: &[StepRecord], planned: bool) -> String {
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    // Steps are in plan order and wait only for earlier ones, so one pass finds depths;
    // a reference to a later step (none validates) counts as none.
    let mut depth = vec![0usize; steps.len()];
    for (i, step) in steps.iter().enumerate() {
        depth[i] = step
            .after
            .iter()
            .filter_map(|id| index.get(id.as_str()))
            .filter(|&&j| j < i)
            .map(|&j| depth[j] + 1)
            .max()
            .unwrap_or(0);
    }
    let mut row_in_column: HashMap<usize, usize> = HashMap::new();
    let place: Vec<(usize, usize)> = depth
        .iter()
        .map(|&d| {
            let row = row_in_column.entry(d).or_default();
            let at = (d * (NODE_W + GAP_X) + 10, *row * (NODE_H + GAP_Y) + 10);
            *row += 1;
            at
        })
        .collect();
    let width = place.iter().map(|p| p.0 + NODE_W + 10).max().unwrap_or(20);
    let height = place.iter().map(|p| p.1 + NODE_H + 10).max().unwrap_or(20);
    let mut svg = format!(
        r##"<svg class="graph" width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#8a93a5"/></marker></defs>"##
    );
    for (i, step) in steps.iter().enumerate() {
        for j in step.after.iter().filter_map(|id| index.get(id.as_str())) {
            let (from, to) = (place[*j], place[i]);
            let _ = write!(
                svg,
                r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#8a93a5" marker-end="url(#arrow)"/>"##,
                from.0 + NODE_W,
                from.1 + NODE_H / 2,
                to.0,
                to.1 + NODE_H / 2
            );
        }
    }
    for (step, (x, y)) in steps.iter().zip(&place) {
        let _ = write!(
            svg,
            r##"<g class="node" data-step="{id}"><rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{fill}" stroke="#1d2330"/><text x="{tx}" y="{ty}" font-size="12" font-weight="600">{id}</text><text x="{tx}" y="{ty2}" font-size="11">{tool}</text></g>"##,
            fill = if planned {
                "#e3e6eb"
            } else {
                colour(step.status.as_str())
            },
            tx = x + 8,
            ty = y + 16,
            ty2 = y + 32,
            id = esc(&step.id),
            tool = esc(&clip(&step.tool, 26)),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A row per step: a bar from when it started for as long as it ran, against the run's
/// whole duration.
fn timeline(steps: &[StepRecord], total_ms: f64) -> String {
    let end = steps
        .iter()
        .filter_map(|s| Some(s.started_ms? + s.duration_ms.unwrap_or(0.0)))
        .fold(total_ms, f64::max)
        .max(0.001);
    let width = LABEL_W + BARS_W as usize + 80;
    let height = steps.len() * ROW_H + 30;
    let mut svg = format!(
        r#"<svg class="timeline" width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">"#
    );
    for (row, step) in steps.iter().enumerate() {
        let y = row * ROW_H + 6;
        let _ = write!(
            svg,
            r#"<text x="6" y="{}" font-size="12">{}</text>"#,
            y + 14,
            esc(&clip(&step.id, 22))
        );
        let Some(started) = step.started_ms else {
            let _ = write!(
                svg,
                r##"<text x="{LABEL_W}" y="{}" font-size="11" fill="#6b7280">{} (did not run)</text>"##,
                y + 14,
                step.status.as_str()
            );
            continue;
        };
        let took = step.duration_ms.unwrap_or(0.0);
        let x = LABEL_W as f64 + started / end * BARS_W;
        let w = (took / end * BARS_W).max(2.0);
        let _ = write!(
            svg,
            r#"<rect class="bar" data-step="{}" x="{x:.1}" y="{y}" width="{w:.1}" height="{}" rx="3" fill="{}"/><text x="{:.1}" y="{}" font-size="11">{took:.1} ms</text>"#,
            esc(&step.id),
            ROW_H - 8,
            colour(step.status.as_str()),
            x + w + 4.0,
            y + 13,
        );
    }
    let axis_y = steps.len() * ROW_H + 22;
    let _ = write!(
        svg,
        r##"<text x="{LABEL_W}" y="{axis_y}" font-size="11" fill="#6b7280">0 ms</text><text x="{}" y="{axis_y}" font-size="11" fill="#6b7280" text-anchor="end">{end:.1} ms</text></svg>"##,
        LABEL_W + BARS_W as usize,
    );
    svg
}

/// A status's fill.
fn colour(status: &str) -> &'static str {
    match status {
        "succeeded" => "#bfe5cc",
        "failed" | "timed_out" => "#f3c1bb",
        "cancelled" | "skipped" => "#ece3c8",
        _ => "#e3e6eb",
    }
}

/// `text` cut to `most` characters, with an ellipsis when cut.
fn clip(text: &str, most: usize) -> String {
    if text.chars().count() <= most {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(most - 1).collect();
    cut.push('…');
    cut
}
