//! The chart as an SVG document: one element per [`Shape`], in paint order. Text is set in a
//! monospace font stretched by `textLength` to the bitmap font's width, so labels sit where the
//! PNG puts them.

use std::fmt::Write;

use super::layout::{text_width, Shape, GLYPH_H};
use super::Rgb;

/// The SVG document for `shapes` on a `width`×`height` canvas.
pub(super) fn render(shapes: &[Shape], width: u32, height: u32) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail, here and below.
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">"#
    );
    for shape in shapes {
        element(&mut out, shape);
    }
    out.push_str("</svg>\n");
    out
}

fn element(out: &mut String, shape: &Shape) {
    let _ = match shape {
        Shape::Rect { x, y, w, h, color } => writeln!(
            out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
            num(*x),
            num(*y),
            num(*w),
            num(*h),
            hex(*color)
        ),
        Shape::Line { points, width, color } => {
            let points: Vec<String> = points.iter().map(|&(x, y)| format!("{},{}", num(x), num(y))).collect();
            writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="{}" stroke-linejoin="round" stroke-linecap="round"/>"#,
                points.join(" "),
                hex(*color),
                num(*width)
            )
        }
        Shape::Dot { x, y, r, color } => {
            writeln!(out, r#"<circle cx="{}" cy="{}" r="{}" fill="{}"/>"#, num(*x), num(*y), num(*r), hex(*color))
        }
        Shape::Text { text, .. } if text.is_empty() => Ok(()),
        Shape::Text { x, y, text, scale, color, vertical } => {
            // The bitmap font's cell is 7 pixels to the baseline and advances 6: a monospace face
            // at 10 px has about those metrics.
            let baseline = num(*y + f64::from(GLYPH_H * scale));
            let (x, y) = (num(*x), num(*y));
            let turn = if *vertical { format!(r#" transform="rotate(-90 {x} {y})""#) } else { String::new() };
            writeln!(
                out,
                r#"<text x="{x}" y="{baseline}" font-family="monospace" font-size="{}" textLength="{}" lengthAdjust="spacingAndGlyphs" fill="{}" xml:space="preserve"{turn}>{}</text>"#,
                10 * scale,
                num(text_width(text, *scale)),
                hex(*color),
                escape(text)
            )
        }
    };
}

/// A coordinate with at most two decimals and no trailing zeros.
fn num(v: f64) -> String {
    let s = format!("{:.2}", if v.is_finite() { v } else { 0.0 });
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

fn hex(c: Rgb) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// `text` safe inside an XML element; control characters (invalid in XML) become `?`, as the
/// bitmap font draws them.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}
