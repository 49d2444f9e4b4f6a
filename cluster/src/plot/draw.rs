//! One chart drawn on any plotters back end: title on top, the legend in a column right of the
//! plot sized to the longest name (names are never cut), axes with labelled grid lines, bands
//! behind curves.
//!
//! ```text
//!  ┌──────────────────── title ─────────────────────┐
//!  │ y   1.0 ┤┌──────────────────────┐ ▬ series a   │
//!  │ l   0.5 ┤│ grid, bands, curves  │ ▬ series b … │
//!  │ a   0.0 ┤└──────────────────────┘              │
//!  │ b         0     50     100                     │
//!  │               x label                          │
//!  └────────────────────────────────────────────────┘
//! ```

use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::font::{ensure_registered, FAMILY};
use super::path::{pieces, ranges, visible};
use super::{series_color, Chart, PlotError, Rgb, Series};

const INK: RGBColor = RGBColor(30, 30, 30);
const GRID: RGBColor = RGBColor(228, 228, 228);
/// Below this many pixels a side nothing legible fits: the chart is left blank.
const SMALLEST: (u32, u32) = (120, 90);
/// Most tick labels an axis gets.
const TICKS: usize = 8;

/// A plotters failure as a [`PlotError`].
pub(super) fn error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Draws `chart` filling `root`.
pub(super) fn chart<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), PlotError> {
    ensure_registered().map_err(PlotError::Draw)?;
    root.fill(&WHITE).map_err(error)?;
    let (w, h) = root.dim_in_pixel();
    if w < SMALLEST.0 || h < SMALLEST.1 {
        return Ok(());
    }
    let size = (f64::from(w.min(h)) / 32.0).clamp(10.0, 96.0);
    let unit = (size / 14.0).max(1.0);
    let font = || (FAMILY, size).into_font().color(&INK);
    let area = match chart.title.as_str() {
        "" => root.clone(),
        title => root.titled(title, (FAMILY, size * 1.4).into_font().color(&INK)).map_err(error)?,
    };
    let shown = visible(chart);
    let names: Vec<String> = shown.iter().map(|&(i, s)| legend_name(i, s)).collect();
    let widest =
        names.iter().map(|n| area.estimate_text_size(n, &font()).map(|d| d.0)).try_fold(0, |m, w| w.map(|w| m.max(w)));
    let swatch = (2.0 * size) as u32;
    let legend_w = match widest.map_err(error)? {
        0 => 0,
        text => (text + swatch + (2.0 * size) as u32).min(area.dim_in_pixel().0 / 2),
    };
    let (plot, legend) = area.split_horizontally(area.dim_in_pixel().0 - legend_w);

    let (x, y) = ranges(chart, &shown);
    let (_, x_fmt) = labels(&x);
    let (y_labels, y_fmt) = labels(&y);
    let y_label_w = y_labels
        .iter()
        .map(|&v| plot.estimate_text_size(&y_fmt(v), &font()).map(|d| d.0))
        .try_fold(0, |m, w| w.map(|w| m.max(w)))
        .map_err(error)?;
    let desc = |text: &str| if text.is_empty() { 0.0 } else { 1.5 * size };
    let mut cc = ChartBuilder::on(&plot)
        .margin_top((0.6 * size) as u32)
        .margin_right((0.6 * size) as u32)
        .margin_left((0.4 * size) as u32)
        .x_label_area_size((1.8 * size + desc(&chart.x_label)) as u32)
        .y_label_area_size(y_label_w + (1.0 * size + desc(&chart.y_label)) as u32)
        .build_cartesian_2d(x.clone(), y.clone())
        .map_err(error)?;
    cc.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_labels(TICKS)
        .y_labels(TICKS)
        .x_label_formatter(&|v| x_fmt(*v))
        .y_label_formatter(&|v| y_fmt(*v))
        .label_style(font())
        .axis_desc_style(font())
        .bold_line_style(GRID)
        .max_light_lines(0)
        .axis_style(RGBColor(90, 90, 90))
        .draw()
        .map_err(error)?;

    let stroke = (2.0 * unit).round() as u32;
    let drawn: Vec<_> = shown.iter().map(|&(i, s)| (color(series_color(i)), pieces(s, &x, &y))).collect();
    for (c, p) in &drawn {
        cc.draw_series(p.bands.iter().map(|b| Polygon::new(b.clone(), c.mix(0.2).filled()))).map_err(error)?;
    }
    for (c, p) in &drawn {
        cc.draw_series(p.lines.iter().map(|l| PathElement::new(l.clone(), c.stroke_width(stroke)))).map_err(error)?;
        let r = (3.0 * unit).round() as i32;
        cc.draw_series(p.dots.iter().map(|&d| Circle::new(d, r, c.filled()))).map_err(error)?;
    }

    let row = (1.6 * size) as i32;
    let top = (0.6 * size) as i32;
    for (k, (name, (c, _))) in names.iter().zip(&drawn).enumerate() {
        let y0 = top + k as i32 * row;
        let (sx, sh) = ((0.5 * size) as i32, (0.25 * size).max(2.0) as i32);
        let mid = y0 + (0.5 * size) as i32;
        legend
            .draw(&Rectangle::new([(sx, mid - sh / 2), (sx + swatch as i32, mid + sh / 2)], c.filled()))
            .map_err(error)?;
        legend.draw(&Text::new(name.clone(), (sx + swatch as i32 + (0.5 * size) as i32, y0), font())).map_err(error)?;
    }
    Ok(())
}

/// The tick values plotters picks for `range` (at most [`TICKS`]) and a formatter giving each
/// just the digits the step between them needs, in exponent form for very large numbers or
/// very small steps.
pub(super) fn labels(range: &std::ops::Range<f64>) -> (Vec<f64>, impl Fn(f64) -> String) {
    let ticks = RangedCoordf64::from(range.clone()).key_points(TICKS);
    let step = match ticks.as_slice() {
        [a, b, ..] => (b - a).abs(),
        _ => (range.end - range.start).abs(),
    };
    let step = if step > 0.0 && step.is_finite() { step } else { 1.0 };
    let largest = range.start.abs().max(range.end.abs());
    let step_exp = step.log10().floor() as i32;
    let exp = (largest >= 1e6 || step < 1e-4).then(|| largest.log10().floor() as i32);
    let fmt = move |v: f64| {
        let v = if v.abs() < step * 1e-6 { 0.0 } else { v };
        match exp {
            None => format!("{v:.*}", (-step_exp).clamp(0, 12) as usize),
            Some(_) if v == 0.0 => "0".to_string(),
            Some(exp) => format!("{:.*}e{exp}", (exp - step_exp).clamp(0, 6) as usize, v / 10f64.powi(exp)),
        }
    };
    (ticks, fmt)
}

/// The name a legend shows: the series' own, in full, or `series N` for an unnamed one.
fn legend_name(index: usize, series: &Series) -> String {
    if series.name.is_empty() {
        format!("series {}", index + 1)
    } else {
        series.name.clone()
    }
}

fn color(c: Rgb) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}
