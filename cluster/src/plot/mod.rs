//! Learning-curve charts written as PNG or SVG with `plotters`, so a run can leave a picture of
//! its curves beside its logs on any machine, headless or not. Text in PNGs is drawn with the
//! DejaVu Sans face built into the binary ([`font`]); no system font library is involved.
//!
//! ```text
//!  Chart ─► draw::chart (title, axes, bands, curves, legend right of the plot)
//!             ├─► BitMapBackend (RGB buffer) ─► png crate ─► .png
//!             └─► SVGBackend (String) ─────────────────────► .svg
//! ```
//!
//! Points with a NaN or infinite coordinate are gaps in their curve; a series with no finite
//! point is left out, legend included; a point with no finite neighbour is drawn as a dot.

mod draw;
mod font;
mod path;

#[cfg(test)]
mod tests;

use std::path::Path;

use plotters::prelude::*;

/// Why a chart could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// plotters failed to draw (a font that did not load, a backend error).
    #[error("drawing the chart: {0}")]
    Draw(String),
    /// The PNG encoder refused the pixels.
    #[error("encoding the chart as PNG: {0}")]
    Png(#[from] png::EncodingError),
    /// The file could not be written.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

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

/// One named curve: (x, y) points joined in the order given, with an optional shaded band.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// The legend entry, shown in full; an empty name shows as `series N`.
    pub name: String,
    /// The points, usually (step, value); non-finite coordinates break the line.
    pub points: Vec<(f64, f64)>,
    /// (x, low, high) triples shaded in the series' colour behind the curves (a spread over
    /// seeds, say); empty for none. Non-finite triples break the band.
    pub band: Vec<(f64, f64, f64)>,
}

impl Series {
    /// A series from a name and its points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, band: Vec::new() }
    }

    /// The series with a shaded band of (x, low, high) triples.
    pub fn with_band(self, band: Vec<(f64, f64, f64)>) -> Series {
        Series { band, ..self }
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
pub fn render_png(chart: &Chart, width: u32, height: u32) -> Result<Vec<u8>, PlotError> {
    let (width, height) = clamp_size(width, height);
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        draw::chart(&root, chart)?;
        root.present().map_err(draw::error)?;
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&rgb)?;
    writer.finish()?;
    Ok(out)
}

/// The chart as an SVG document laid out as [`render_png`] lays it out.
pub fn render_svg(chart: &Chart, width: u32, height: u32) -> Result<String, PlotError> {
    let (width, height) = clamp_size(width, height);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        draw::chart(&root, chart)?;
        root.present().map_err(draw::error)?;
    }
    Ok(out)
}

/// Writes [`render_png`]'s bytes to `path`.
pub fn write_png(chart: &Chart, path: &Path, width: u32, height: u32) -> Result<(), PlotError> {
    write(path, render_png(chart, width, height)?)
}

/// Writes [`render_svg`]'s document to `path`.
pub fn write_svg(chart: &Chart, path: &Path, width: u32, height: u32) -> Result<(), PlotError> {
    write(path, render_svg(chart, width, height)?)
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), PlotError> {
    std::fs::write(path, bytes).map_err(|source| PlotError::Io { path: path.display().to_string(), source })
}

fn clamp_size(width: u32, height: u32) -> (u32, u32) {
    (width.clamp(1, MAX_SIDE), height.clamp(1, MAX_SIDE))
}
