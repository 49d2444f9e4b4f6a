//! Chart layout shared by both back ends: margins sized by the text they hold, nice ticks, data
//! mapped to pixels and clipped to the plot, emitted as a flat list of [`Shape`]s in paint
//! order, so the raster and SVG writers only have to paint them.
//!
//! ```text
//!  ┌──────────────── title ────────────────────┐
//!  │ y   1.0 ┤┌────────────────────┐ ▬ series a │
//!  │ l   0.5 ┤│ grid, curves, dots │ ▬ series b │
//!  │ a   0.0 ┤└────────────────────┘            │
//!  │ b         0    50    100                  │
//!  │               x label                     │
//!  └───────────────────────────────────────────┘
//! ```

use super::curve::{curve, finite};
use super::ticks::Axis;
use super::{series_color, Chart, Rgb, Series};

pub(super) const BACKGROUND: Rgb = Rgb(255, 255, 255);
const GRID: Rgb = Rgb(228, 228, 228);
const AXIS: Rgb = Rgb(90, 90, 90);
const INK: Rgb = Rgb(30, 30, 30);
/// Glyph height and advance of the built-in font, in font pixels (glyphs are 5 wide).
pub(super) const GLYPH_H: u32 = 7;
pub(super) const ADVANCE: u32 = 6;
/// Padding around blocks of text, and the length of tick marks, in font pixels.
const PAD: u32 = 8;
const TICK: u32 = 4;
/// Legend names longer than this are cut, so one long name cannot squeeze the plot away.
const MAX_NAME: usize = 32;

/// One thing to paint, in canvas pixels with y pointing down.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Shape {
    /// A filled axis-aligned rectangle.
    Rect { x: f64, y: f64, w: f64, h: f64, color: Rgb },
    /// An open polyline with round joins and caps.
    Line { points: Vec<(f64, f64)>, width: f64, color: Rgb },
    /// A filled disc: a point with no neighbour to join.
    Dot { x: f64, y: f64, r: f64, color: Rgb },
    /// Text in the built-in font at `scale` pixels per font pixel. (x, y) is the top-left corner
    /// of the first glyph; `vertical` text is turned 90° anticlockwise about it, reading upward.
    Text { x: f64, y: f64, text: String, scale: u32, color: Rgb, vertical: bool },
}

/// Width in pixels of `text` in the built-in font.
pub(super) fn text_width(text: &str, scale: u32) -> f64 {
    let glyphs = text.chars().count() as f64;
    ((glyphs * f64::from(ADVANCE)) - 1.0).max(0.0) * f64::from(scale)
}

/// The plot rectangle (edges on whole pixels) and the axes mapped onto it.
pub(super) struct Frame {
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub x: Axis,
    pub y: Axis,
    /// Pixels per font pixel for ticks, labels and legend; the title gets twice this.
    pub unit: u32,
}

impl Frame {
    /// Lays `chart` out on a `width`×`height` canvas.
    pub fn new(chart: &Chart, width: u32, height: u32) -> Frame {
        let unit = (width.min(height) / 400).max(1);
        let (u, text_h) = (f64::from(unit), f64::from(GLYPH_H * unit));
        let (pad, tick) = (f64::from(PAD * unit), f64::from(TICK * unit));
        let visible = visible(chart);
        let ((x_lo, x_hi), (y_lo, y_hi)) = bounds(&visible);

        let top = pad + if chart.title.is_empty() { 0.0 } else { 2.0 * text_h + pad };
        let x_label_h = if chart.x_label.is_empty() { 0.0 } else { text_h + pad / 2.0 };
        let bottom = (f64::from(height) - pad - tick - pad / 2.0 - text_h - x_label_h).max(top + 1.0);
        let y_target = ((bottom - top) / (40.0 * u)).clamp(2.0, 10.0) as usize;
        let y = match chart.y_range.filter(|&(a, b)| a.is_finite() && b.is_finite() && a < b) {
            Some((a, b)) => Axis::new(a, b, y_target, false),
            None => Axis::new(y_lo, y_hi, y_target, true),
        };
        let y_labels_w = y.ticks.iter().map(|(_, l)| text_width(l, unit)).fold(0.0, f64::max);
        let y_label_w = if chart.y_label.is_empty() { 0.0 } else { text_h + pad };
        let left = pad + y_label_w + y_labels_w + pad / 2.0 + tick;
        let names = visible.iter().map(|&(i, s)| text_width(&legend_name(i, s), unit)).fold(None, max);
        let legend_w = names.map_or(0.0, |w| pad + 16.0 * u + w);
        let right = (f64::from(width) - pad - legend_w).max(left + 1.0);
        let x = x_axis(x_lo, x_hi, right - left, unit);
        Frame { left, right, top, bottom, x, y, unit }
    }

    /// A data point's position on the canvas.
    pub fn to_px(&self, (x, y): (f64, f64)) -> (f64, f64) {
        (self.x.map(x, self.left, self.right), self.y.map(y, self.bottom, self.top))
    }

    /// Whether a canvas position lies on the plot, border included.
    pub fn contains(&self, (x, y): (f64, f64)) -> bool {
        (self.left..=self.right).contains(&x) && (self.top..=self.bottom).contains(&y)
    }
}

/// Everything to paint for `chart`, back to front.
pub(super) fn scene(chart: &Chart, width: u32, height: u32) -> Vec<Shape> {
    let f = Frame::new(chart, width, height);
    let mut shapes = vec![Shape::Rect { x: 0.0, y: 0.0, w: f64::from(width), h: f64::from(height), color: BACKGROUND }];
    for (x, _) in f.x_ticks() {
        shapes.push(line(vec![(x, f.top), (x, f.bottom)], GRID));
    }
    for (y, _) in f.y_ticks() {
        shapes.push(line(vec![(f.left, y), (f.right, y)], GRID));
    }
    for &(index, series) in &visible(chart) {
        curve(&f, series, series_color(index), &mut shapes);
    }
    f.axes(&mut shapes);
    f.labels(chart, &mut shapes);
    f.legend(chart, &mut shapes);
    shapes
}

impl Frame {
    /// Pixel columns of the x ticks (pixel centres), with their labels.
    fn x_ticks(&self) -> impl Iterator<Item = (f64, &str)> {
        self.x.ticks.iter().map(|(v, l)| (snap(self.x.map(*v, self.left, self.right)), l.as_str()))
    }

    /// Pixel rows of the y ticks (pixel centres), with their labels.
    fn y_ticks(&self) -> impl Iterator<Item = (f64, &str)> {
        self.y.ticks.iter().map(|(v, l)| (snap(self.y.map(*v, self.bottom, self.top)), l.as_str()))
    }

    /// The plot's border, tick marks and tick labels.
    fn axes(&self, shapes: &mut Vec<Shape>) {
        let (l, r, t, b) = (snap(self.left), snap(self.right), snap(self.top), snap(self.bottom));
        let (tick, gap) = (self.tick(), self.pad() / 2.0);
        shapes.push(line(vec![(l, t), (r, t), (r, b), (l, b), (l, t)], AXIS));
        for (x, label) in self.x_ticks() {
            shapes.push(line(vec![(x, b), (x, b + tick)], AXIS));
            let x = x - text_width(label, self.unit) / 2.0;
            shapes.push(text(x, self.bottom + tick + gap, label, self.unit, false));
        }
        for (y, label) in self.y_ticks() {
            shapes.push(line(vec![(l - tick, y), (l, y)], AXIS));
            let x = self.left - tick - gap - text_width(label, self.unit);
            shapes.push(text(x, y - self.text_h() / 2.0, label, self.unit, false));
        }
    }

    /// The title above the plot and the axis labels beside it.
    fn labels(&self, chart: &Chart, shapes: &mut Vec<Shape>) {
        let (unit, pad, mid_x) = (self.unit, self.pad(), (self.left + self.right) / 2.0);
        if !chart.x_label.is_empty() {
            let x = mid_x - text_width(&chart.x_label, unit) / 2.0;
            shapes.push(text(x, self.bottom + self.tick() + pad + self.text_h(), &chart.x_label, unit, false));
        }
        if !chart.y_label.is_empty() {
            let y = (self.top + self.bottom + text_width(&chart.y_label, unit)) / 2.0;
            shapes.push(text(pad, y, &chart.y_label, unit, true));
        }
        if !chart.title.is_empty() {
            let x = (mid_x - text_width(&chart.title, 2 * unit) / 2.0).max(0.0);
            shapes.push(text(x, pad, &chart.title, 2 * unit, false));
        }
    }

    /// A colour swatch and a name per drawn series, right of the plot.
    fn legend(&self, chart: &Chart, shapes: &mut Vec<Shape>) {
        let u = f64::from(self.unit);
        for (row, &(index, series)) in visible(chart).iter().enumerate() {
            let (x, y) = (self.right + self.pad(), self.top + row as f64 * (self.text_h() + self.pad() / 2.0));
            shapes.push(Shape::Rect { x, y: y + 2.0 * u, w: 12.0 * u, h: 3.0 * u, color: series_color(index) });
            shapes.push(text(x + 16.0 * u, y, &legend_name(index, series), self.unit, false));
        }
    }

    fn pad(&self) -> f64 {
        f64::from(PAD * self.unit)
    }

    fn tick(&self) -> f64 {
        f64::from(TICK * self.unit)
    }

    fn text_h(&self) -> f64 {
        f64::from(GLYPH_H * self.unit)
    }
}

/// The series that have something to draw, with their index (which picks the colour).
fn visible(chart: &Chart) -> Vec<(usize, &Series)> {
    chart.series.iter().enumerate().filter(|(_, s)| s.points.iter().any(|&p| finite(p))).collect()
}

/// The x and y extents of the finite points; 0..1 for an axis with none.
fn bounds(visible: &[(usize, &Series)]) -> ((f64, f64), (f64, f64)) {
    let points = visible.iter().flat_map(|(_, s)| s.points.iter().copied()).filter(|&p| finite(p));
    let (mut x, mut y) = ((f64::INFINITY, f64::NEG_INFINITY), (f64::INFINITY, f64::NEG_INFINITY));
    for (px, py) in points {
        x = (x.0.min(px), x.1.max(px));
        y = (y.0.min(py), y.1.max(py));
    }
    let or_unit = |r: (f64, f64)| if r.0 <= r.1 { r } else { (0.0, 1.0) };
    (or_unit(x), or_unit(y))
}

/// An x axis whose tick labels do not collide: fewer ticks until they fit.
fn x_axis(lo: f64, hi: f64, span_px: f64, unit: u32) -> Axis {
    let u = f64::from(unit);
    let mut target = (span_px / (80.0 * u)).clamp(2.0, 10.0) as usize;
    loop {
        let axis = Axis::new(lo, hi, target, true);
        let widest = axis.ticks.iter().map(|(_, l)| text_width(l, unit)).fold(0.0, f64::max);
        let spacing = span_px / (axis.ticks.len().max(2) - 1) as f64;
        if target <= 2 || widest + 2.0 * f64::from(ADVANCE) * u <= spacing {
            return axis;
        }
        target -= 1;
    }
}

fn legend_name(index: usize, series: &Series) -> String {
    match series.name.chars().count() {
        0 => format!("series {}", index + 1),
        n if n > MAX_NAME => series.name.chars().take(MAX_NAME - 2).chain("..".chars()).collect(),
        _ => series.name.clone(),
    }
}

/// Text in the ink colour, on whole pixels so the bitmap font stays sharp.
fn text(x: f64, y: f64, text: &str, scale: u32, vertical: bool) -> Shape {
    Shape::Text { x: x.round(), y: y.round(), text: text.to_string(), scale, color: INK, vertical }
}

fn line(points: Vec<(f64, f64)>, color: Rgb) -> Shape {
    Shape::Line { points, width: 1.0, color }
}

/// The centre of the pixel holding `p`, where a one-pixel line is crisp.
fn snap(p: f64) -> f64 {
    p.floor() + 0.5
}

fn max(acc: Option<f64>, w: f64) -> Option<f64> {
    Some(acc.map_or(w, |a| a.max(w)))
}
