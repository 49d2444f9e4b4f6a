//! One series as paint: its points mapped to pixels and joined into polylines clipped to the
//! plot, broken wherever a coordinate is not finite; a point with no finite neighbour is a dot.

use super::layout::{Frame, Shape};
use super::{Rgb, Series};

/// One series as polylines clipped to the plot, plus dots for points with no finite neighbour.
pub(super) fn curve(f: &Frame, series: &Series, color: Rgb, shapes: &mut Vec<Shape>) {
    let width = 2.0 * f64::from(f.unit);
    let px: Vec<Option<(f64, f64)>> =
        series.points.iter().map(|&p| Some(f.to_px(p)).filter(|&q| finite(p) && finite(q))).collect();
    let mut run: Vec<(f64, f64)> = Vec::new();
    let mut flush = |run: &mut Vec<(f64, f64)>| {
        if run.len() >= 2 {
            shapes.push(Shape::Line { points: std::mem::take(run), width, color });
        }
        run.clear();
    };
    for pair in px.windows(2) {
        match (pair[0], pair[1]) {
            (Some(a), Some(b)) => match clip(a, b, (f.left, f.top, f.right, f.bottom)) {
                Some((ca, cb)) => {
                    if run.last() != Some(&ca) {
                        flush(&mut run);
                        run.push(ca);
                    }
                    run.push(cb);
                }
                None => flush(&mut run),
            },
            _ => flush(&mut run),
        }
    }
    flush(&mut run);
    for (k, p) in px.iter().enumerate() {
        let joined = (k > 0 && px[k - 1].is_some()) || px.get(k + 1).is_some_and(Option::is_some);
        if let Some(p) = p.filter(|&p| !joined && f.contains(p)) {
            shapes.push(Shape::Dot { x: p.0, y: p.1, r: 1.5 * width, color });
        }
    }
}

/// The part of segment a→b inside the rectangle (x0, y0, x1, y1) (Liang–Barsky); ends that
/// are inside come back unchanged, so consecutive segments still join exactly.
pub(super) fn clip(a: (f64, f64), b: (f64, f64), rect: (f64, f64, f64, f64)) -> Option<((f64, f64), (f64, f64))> {
    let (x0, y0, x1, y1) = rect;
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [(-dx, a.0 - x0), (dx, x1 - a.0), (-dy, a.1 - y0), (dy, y1 - a.1)] {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else if p < 0.0 {
            t0 = t0.max(q / p);
        } else {
            t1 = t1.min(q / p);
        }
    }
    if t0 > t1 {
        return None;
    }
    let at = |t: f64| (a.0 + t * dx, a.1 + t * dy);
    Some((if t0 > 0.0 { at(t0) } else { a }, if t1 < 1.0 { at(t1) } else { b }))
}

/// Whether both coordinates are numbers a chart can place.
pub(super) fn finite((x, y): (f64, f64)) -> bool {
    x.is_finite() && y.is_finite()
}
