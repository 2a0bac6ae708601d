//! The chart: input tokens per scenario and arm, as grouped bars (SVG).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{ARMS, Report};

/// One colour per arm, in [`ARMS`] order.
const COLOURS: [RGBColor; 3] = [
    RGBColor(214, 96, 77),
    RGBColor(244, 165, 130),
    RGBColor(67, 147, 195),
];

/// Width of one bar, as a share of a scenario's slot (three bars and a gap fill it).
const BAR: f64 = 0.26;

/// Draws the chart to `path`.
pub fn draw(report: &Report, path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = report.scenarios.len();
    let top = report
        .scenarios
        .iter()
        .flat_map(|s| s.arms.iter().map(|a| a.input_tokens))
        .max()
        .unwrap_or(1) as f64
        * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "planmux economics: input tokens per scenario and arm (bar labels: round-trips)",
            ("sans-serif", 20),
        )
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..top)?;
    let names: Vec<&str> = report.scenarios.iter().map(|s| s.name).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                names
                    .get(i as usize)
                    .map_or(String::new(), |s| (*s).to_owned())
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
        .y_desc("input tokens, all round-trips (o200k_base)")
        .draw()?;
    let label_style =
        TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    for (arm, colour) in COLOURS.iter().enumerate() {
        let offset = (arm as f64 - 1.0) * BAR;
        let bars = report.scenarios.iter().enumerate().map(|(i, s)| {
            let x = i as f64 + offset;
            let y = s.arms[arm].input_tokens as f64;
            Rectangle::new([(x - BAR / 2.0, 0.0), (x + BAR / 2.0, y)], colour.filled())
        });
        chart
            .draw_series(bars)?
            .label(ARMS[arm])
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        let labels = report.scenarios.iter().enumerate().map(|(i, s)| {
            let x = i as f64 + offset;
            let trips = s.arms[arm].round_trips;
            Text::new(
                trips.to_string(),
                (x, s.arms[arm].input_tokens as f64 + top * 0.01),
                label_style.clone(),
            )
        });
        chart.draw_series(labels)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
