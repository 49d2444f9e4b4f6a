//! A software canvas for the PNG path: 8-bit RGB pixels painted with coverage-blended
//! (anti-aliased) strokes and discs, filled rectangles, and text in the built-in font.
//!
//! Coverage of a pixel is how far its centre lies inside the shape's edge, clamped to 0..=1: a
//! stroke of width w covers a pixel fully when its centre is within w/2 − 0.5 of the segment.

use super::font::glyph;
use super::layout::{Shape, ADVANCE, BACKGROUND};
use super::Rgb;

/// RGB pixels, three bytes each, rows top to bottom.
pub(super) struct Canvas {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Canvas {
    /// A canvas filled with the chart background.
    pub fn new(width: u32, height: u32) -> Canvas {
        let rgb = [BACKGROUND.0, BACKGROUND.1, BACKGROUND.2].repeat(width as usize * height as usize);
        Canvas { width, height, rgb }
    }

    /// The pixels, as [`super::png::encode`] takes them.
    pub fn rgb(&self) -> &[u8] {
        &self.rgb
    }

    /// Paints one shape; whatever falls off the canvas is dropped.
    pub fn draw(&mut self, shape: &Shape) {
        match shape {
            Shape::Rect { x, y, w, h, color } => self.fill_rect(*x, *y, *w, *h, *color),
            Shape::Line { points, width, color } => {
                for pair in points.windows(2) {
                    self.segment(pair[0], pair[1], *width, *color);
                }
            }
            Shape::Dot { x, y, r, color } => self.dot((*x, *y), *r, *color),
            Shape::Text { x, y, text, scale, color, vertical } => self.text(*x, *y, text, *scale, *color, *vertical),
        }
    }

    /// Mixes `color` into pixel (x, y) by `coverage` (clamped to 0..=1).
    fn blend(&mut self, x: i64, y: i64, color: Rgb, coverage: f64) {
        if coverage <= 0.0 || x < 0 || y < 0 || x >= i64::from(self.width) || y >= i64::from(self.height) {
            return;
        }
        let c = coverage.min(1.0);
        let i = (y as usize * self.width as usize + x as usize) * 3;
        for (dst, src) in self.rgb[i..i + 3].iter_mut().zip([color.0, color.1, color.2]) {
            *dst = (f64::from(*dst) * (1.0 - c) + f64::from(src) * c).round() as u8;
        }
    }

    /// Fills the pixels whose centres fall inside the rectangle.
    fn fill_rect(&mut self, x: f64, y: f64, w: f64, h: f64, color: Rgb) {
        let (x0, x1) = span(x, x + w, self.width);
        let (y0, y1) = span(y, y + h, self.height);
        for py in y0..y1 {
            for px in x0..x1 {
                self.blend(px, py, color, 1.0);
            }
        }
    }

    /// A stroke of `width` from a to b with round ends. Walks the major axis one pixel at a time
    /// and, across it, only the band the stroke can reach.
    fn segment(&mut self, a: (f64, f64), b: (f64, f64), width: f64, color: Rgb) {
        if ![a.0, a.1, b.0, b.1, width].iter().all(|v| v.is_finite()) {
            return;
        }
        let half = width / 2.0;
        let reach = half + 1.0;
        let steep = (b.1 - a.1).abs() > (b.0 - a.0).abs();
        // (u, v): u along the major axis, v across it; distances do not care about the swap.
        let swap = |p: (f64, f64)| if steep { (p.1, p.0) } else { p };
        let (pa, pb) = (swap(a), swap(b));
        let (u_lo, u_hi) = (pa.0.min(pb.0), pa.0.max(pb.0));
        let slope = if pb.0 != pa.0 { (pb.1 - pa.1) / (pb.0 - pa.0) } else { 0.0 };
        let (u_limit, v_limit) = if steep { (self.height, self.width) } else { (self.width, self.height) };
        let clamp = |v: f64, limit: u32| v.clamp(-1.0, f64::from(limit)) as i64;
        for u in clamp((u_lo - reach).floor(), u_limit)..=clamp((u_hi + reach).ceil(), u_limit) {
            let uc = u as f64 + 0.5;
            let v_mid = pa.1 + slope * (uc.clamp(u_lo, u_hi) - pa.0);
            // The nearest point of the segment is at most `reach` away along u, so (|slope| ≤ 1)
            // at most 2 × reach away along v.
            for v in clamp((v_mid - 2.0 * reach).floor(), v_limit)..=clamp((v_mid + 2.0 * reach).ceil(), v_limit) {
                let d = distance((uc, v as f64 + 0.5), pa, pb);
                let (x, y) = if steep { (v, u) } else { (u, v) };
                self.blend(x, y, color, half + 0.5 - d);
            }
        }
    }

    fn dot(&mut self, c: (f64, f64), r: f64, color: Rgb) {
        if !(c.0.is_finite() && c.1.is_finite() && r.is_finite()) {
            return;
        }
        let (x0, x1) = span(c.0 - r - 1.0, c.0 + r + 1.0, self.width);
        let (y0, y1) = span(c.1 - r - 1.0, c.1 + r + 1.0, self.height);
        for y in y0..y1 {
            for x in x0..x1 {
                let d = (x as f64 + 0.5 - c.0).hypot(y as f64 + 0.5 - c.1);
                self.blend(x, y, color, r + 0.5 - d);
            }
        }
    }

    /// Text from the bitmap font, each font pixel a `scale`×`scale` block; see [`Shape::Text`]
    /// for where (x, y) is.
    fn text(&mut self, x: f64, y: f64, text: &str, scale: u32, color: Rgb, vertical: bool) {
        let (x, y, s) = (x.round() as i64, y.round() as i64, i64::from(scale));
        for (k, c) in text.chars().enumerate() {
            for (col, bits) in glyph(c).iter().enumerate() {
                for row in (0..8).filter(|row| bits >> row & 1 == 1) {
                    // The font pixel's offset along the text (gx) and down it (gy).
                    let gx = (k as i64 * i64::from(ADVANCE) + col as i64) * s;
                    let gy = i64::from(row) * s;
                    for (dx, dy) in (0..s).flat_map(|dx| (0..s).map(move |dy| (dx, dy))) {
                        let (px, py) =
                            if vertical { (x + gy + dy, y - 1 - gx - dx) } else { (x + gx + dx, y + gy + dy) };
                        self.blend(px, py, color, 1.0);
                    }
                }
            }
        }
    }
}

/// Distance from p to the segment a→b.
fn distance(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 { (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / len2).clamp(0.0, 1.0) } else { 0.0 };
    (p.0 - a.0 - t * dx).hypot(p.1 - a.1 - t * dy)
}

/// Pixel indices `lo..hi` whose centres lie in `a..b`, limited to `0..limit`.
fn span(a: f64, b: f64, limit: u32) -> (i64, i64) {
    let bound = |v: f64| v.round().clamp(0.0, f64::from(limit)) as i64;
    (bound(a), bound(b))
}
