//! Learning-curve charts written as PNG or SVG with no dependencies, so a run can leave a picture
//! of its curves beside its logs on any machine, headless or not.
//!
//! ```text
//!  Chart ─► layout::scene (margins, nice ticks, curves clipped to the plot) ─► [Shape]
//!                 ├─► raster::Canvas (anti-aliased) ─► png::encode (deflate) ─► .png
//!                 └─► svg::render ──────────────────────────────────────────► .svg
//! ```
//!
//! Points with a NaN or infinite coordinate are gaps in their curve; a series with no finite
//! point is left out, legend included; a point with no finite neighbour is drawn as a dot.

// `reagent run` draws its learning curves with this; until it is wired in, nothing calls it.

mod curve;
mod deflate;
mod font;
mod layout;
mod png;
mod raster;
mod svg;
mod ticks;

#[cfg(test)]
mod tests;

use std::path::Path;

/// An 8-bit sRGB colour; both back ends paint with it, so PNG and SVG agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

/// Series colours (Tableau 10), cycled by series index. A series keeps its index's colour even
/// when an earlier one is skipped, so a run's curves read the same across charts.
pub const PALETTE: [Rgb; 10] = [
    Rgb(0x1f, 0x77, 0xb4),
    Rgb(0xff, 0x7f, 0x0e),
    Rgb(0x2c, 0xa0, 0x2c),
    Rgb(0xd6, 0x27, 0x28),
    Rgb(0x94, 0x67, 0xbd),
    Rgb(0x8c, 0x56, 0x4b),
    Rgb(0xe3, 0x77, 0xc2),
    Rgb(0x7f, 0x7f, 0x7f),
    Rgb(0xbc, 0xbd, 0x22),
    Rgb(0x17, 0xbe, 0xcf),
];

/// Largest width or height drawn; larger requests are clamped (8192² RGB is 192 MiB).
pub const MAX_SIDE: u32 = 8192;

/// The colour of the series at `index` in [`Chart::series`].
pub fn series_color(index: usize) -> Rgb {
    PALETTE[index % PALETTE.len()]
}

/// One named curve: (x, y) points joined in the order given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// The legend entry; an empty name shows as `series N`.
    pub name: String,
    /// The points, usually (step, value); non-finite coordinates break the line.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from a name and its points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points }
    }
}

/// Everything one chart shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chart {
    /// Drawn above the plot; empty leaves its room to the plot.
    pub title: String,
    /// Drawn under the x axis.
    pub x_label: String,
    /// Drawn upright beside the y axis.
    pub y_label: String,
    /// The curves, coloured by index from [`PALETTE`].
    pub series: Vec<Series>,
    /// A fixed y interval (say 0..1 for a success rate); points outside are clipped. `None`, or a
    /// range that is empty or not finite, fits the data instead.
    pub y_range: Option<(f64, f64)>,
}

/// The chart as PNG file bytes (8-bit RGB), `width`×`height` pixels, each side clamped to
/// `1..=MAX_SIDE`.
pub fn render_png(chart: &Chart, width: u32, height: u32) -> Vec<u8> {
    let (width, height) = clamp_size(width, height);
    let mut canvas = raster::Canvas::new(width, height);
    for shape in layout::scene(chart, width, height) {
        canvas.draw(&shape);
    }
    png::encode(width, height, canvas.rgb())
}

/// The chart as an SVG document laid out exactly as [`render_png`] lays it out.
pub fn render_svg(chart: &Chart, width: u32, height: u32) -> String {
    let (width, height) = clamp_size(width, height);
    svg::render(&layout::scene(chart, width, height), width, height)
}

/// Writes [`render_png`]'s bytes to `path`.
pub fn write_png(chart: &Chart, path: &Path, width: u32, height: u32) -> std::io::Result<()> {
    std::fs::write(path, render_png(chart, width, height))
}

/// Writes [`render_svg`]'s document to `path`.
pub fn write_svg(chart: &Chart, path: &Path, width: u32, height: u32) -> std::io::Result<()> {
    std::fs::write(path, render_svg(chart, width, height))
}

fn clamp_size(width: u32, height: u32) -> (u32, u32) {
    (width.clamp(1, MAX_SIDE), height.clamp(1, MAX_SIDE))
}
