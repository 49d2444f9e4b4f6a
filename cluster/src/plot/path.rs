//! A chart's data as what to paint, in data coordinates: the axis ranges, each series' points
//! joined into polylines clipped to the plot (broken wherever a coordinate is not finite, a lone
//! point kept as a dot), and bands as polygons clamped to the y range. plotters draws shapes
//! wherever they fall, so everything is cut to the plot here.

use std::ops::Range;

use super::{Chart, Series};

/// The visible part of one series.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Pieces {
    /// Polylines of at least two points, inside the plot.
    pub lines: Vec<Vec<(f64, f64)>>,
    /// Points with no finite neighbour, inside the plot.
    pub dots: Vec<(f64, f64)>,
    /// Closed outlines of the band: the highs left to right, then the lows back.
    pub bands: Vec<Vec<(f64, f64)>>,
}

/// The series that have something to draw, with their index (which picks the colour).
pub(super) fn visible(chart: &Chart) -> Vec<(usize, &Series)> {
    chart.series.iter().enumerate().filter(|(_, s)| s.points.iter().any(|&p| finite(p))).collect()
}

/// The x and y ranges of the plot: x fitted to the finite points; y the chart's fixed range when
/// it is usable, else fitted with 5 % room above and below. Empty or single-valued extents are
/// widened, so every axis has room.
pub(super) fn ranges(chart: &Chart, visible: &[(usize, &Series)]) -> (Range<f64>, Range<f64>) {
    let points = || visible.iter().flat_map(|(_, s)| s.points.iter().copied()).filter(|&p| finite(p));
    let extent = |values: &mut dyn Iterator<Item = f64>| {
        values.fold(None, |acc: Option<(f64, f64)>, v| Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v)))))
    };
    let x = widen(extent(&mut points().map(|p| p.0)).unwrap_or((0.0, 1.0)));
    let y = match chart.y_range.filter(|&(a, b)| a.is_finite() && b.is_finite() && a < b) {
        Some((a, b)) => a..b,
        None => {
            let fitted = widen(extent(&mut points().map(|p| p.1)).unwrap_or((0.0, 1.0)));
            let room = 0.05 * (fitted.end - fitted.start);
            let padded = (fitted.start - room)..(fitted.end + room);
            if (padded.end - padded.start).is_finite() {
                padded
            } else {
                fitted
            }
        }
    };
    (x, y)
}

/// `lo..hi` wide enough to divide: a single value gets ±10 % around it (±1 around zero); a
/// span too wide for an f64 is halved at both ends.
fn widen((lo, hi): (f64, f64)) -> Range<f64> {
    let scale = lo.abs().max(hi.abs());
    if !(hi - lo).is_finite() {
        return (lo / 2.0)..(hi / 2.0);
    }
    if hi - lo > scale * 1e-9 {
        return lo..hi;
    }
    let pad = if scale == 0.0 { 1.0 } else { scale * 0.1 };
    (lo - pad)..(hi + pad)
}

/// What of `series` falls on the plot spanned by `x` and `y`.
pub(super) fn pieces(series: &Series, x: &Range<f64>, y: &Range<f64>) -> Pieces {
    let rect = (x.start, y.start, x.end, y.end);
    let inside = |p: (f64, f64)| (x.start..=x.end).contains(&p.0) && (y.start..=y.end).contains(&p.1);
    let ok: Vec<Option<(f64, f64)>> = series.points.iter().map(|&p| Some(p).filter(|&p| finite(p))).collect();
    let mut out = Pieces::default();
    let mut run: Vec<(f64, f64)> = Vec::new();
    let flush = |run: &mut Vec<(f64, f64)>, lines: &mut Vec<Vec<(f64, f64)>>| {
        if run.len() >= 2 {
            lines.push(std::mem::take(run));
        }
        run.clear();
    };
    for pair in ok.windows(2) {
        match (pair[0], pair[1]) {
            (Some(a), Some(b)) => match clip(a, b, rect) {
                Some((ca, cb)) => {
                    if run.last() != Some(&ca) {
                        flush(&mut run, &mut out.lines);
                        run.push(ca);
                    }
                    run.push(cb);
                }
                None => flush(&mut run, &mut out.lines),
            },
            _ => flush(&mut run, &mut out.lines),
        }
    }
    flush(&mut run, &mut out.lines);
    for (k, p) in ok.iter().enumerate() {
        let joined = (k > 0 && ok[k - 1].is_some()) || ok.get(k + 1).is_some_and(Option::is_some);
        if let Some(p) = p.filter(|&p| !joined && inside(p)) {
            out.dots.push(p);
        }
    }
    out.bands = bands(&series.band, x, y);
    out
}

/// Outlines of the runs of finite (x, low, high) triples, clamped to the plot.
fn bands(band: &[(f64, f64, f64)], x: &Range<f64>, y: &Range<f64>) -> Vec<Vec<(f64, f64)>> {
    let clamp = |v: f64, r: &Range<f64>| v.clamp(r.start, r.end);
    let mut out = Vec::new();
    for run in band.split(|&(a, b, c)| !(a.is_finite() && b.is_finite() && c.is_finite())) {
        if run.len() < 2 {
            continue;
        }
        let high = run.iter().map(|&(a, _, c)| (clamp(a, x), clamp(c, y)));
        let low = run.iter().rev().map(|&(a, b, _)| (clamp(a, x), clamp(b, y)));
        out.push(high.chain(low).collect());
    }
    out
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
    if t0 > t1 || !(t0.is_finite() && t1.is_finite()) {
        return None;
    }
    let at = |t: f64| (a.0 + t * dx, a.1 + t * dy);
    Some((if t0 > 0.0 { at(t0) } else { a }, if t1 < 1.0 { at(t1) } else { b }))
}

/// Whether both coordinates are numbers a chart can place.
pub(super) fn finite((x, y): (f64, f64)) -> bool {
    x.is_finite() && y.is_finite()
}
