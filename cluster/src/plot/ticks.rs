//! Axis ticks at "nice" values (1, 2 or 5 times a power of ten) and labels with just the digits
//! those steps need, in exponent form when the numbers are very large or the steps very small.

/// Most ticks an axis carries whatever it is given; past it (absurd ranges) only the ends are
/// labelled.
const MAX_TICKS: f64 = 50.0;

/// One axis: the interval mapped onto the plot and its ticks as (value, label).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<(f64, String)>,
}

impl Axis {
    /// Ticks for `[lo, hi]`, about `target` of them. `expand` widens the interval out to the
    /// enclosing ticks (for ranges fitted to data); otherwise the interval is kept as given.
    /// An empty or non-finite interval is widened first, so every axis has room.
    pub fn new(lo: f64, hi: f64, target: usize, expand: bool) -> Axis {
        let (lo, hi) = widen(lo, hi);
        let step = nice_step(hi - lo, target.max(1));
        let usable = step.is_finite() && step > 0.0;
        let (lo, hi) =
            if expand && usable { ((lo / step).floor() * step, (hi / step).ceil() * step) } else { (lo, hi) };
        let (first, last) = ((lo / step - 1e-9).ceil(), (hi / step + 1e-9).floor());
        let count = last - first + 1.0;
        if !(usable && (1.0..=MAX_TICKS).contains(&count)) {
            let end = |v: f64| (v, format!("{v:.3e}"));
            return Axis { lo, hi, ticks: vec![end(lo), end(hi)] };
        }
        let largest = lo.abs().max(hi.abs());
        let exp = (largest >= 1e6 || step < 1e-4).then(|| (largest.log10() + 1e-9).floor() as i32);
        let ticks = (0..count as usize)
            .map(|k| {
                let v = (first + k as f64) * step;
                (v, label(v, step, exp))
            })
            .collect();
        Axis { lo, hi, ticks }
    }

    /// Where `v` falls when `lo` sits at pixel `a` and `hi` at pixel `b`.
    pub fn map(&self, v: f64, a: f64, b: f64) -> f64 {
        a + (v - self.lo) / (self.hi - self.lo) * (b - a)
    }
}

/// `lo..hi` in order, finite, and wide enough to divide: a single value gets ±10% around it
/// (±1 around zero); anything non-finite becomes 0..1.
fn widen(lo: f64, hi: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    let scale = lo.abs().max(hi.abs());
    if hi - lo > scale * 1e-9 {
        return (lo, hi);
    }
    let pad = if scale == 0.0 { 1.0 } else { scale * 0.1 };
    (lo - pad, hi + pad)
}

/// The 1, 2 or 5 × 10ⁿ step nearest to dividing `span` into `target` parts (Heckbert, "Nice
/// numbers for graph labels", Graphics Gems, 1990).
fn nice_step(span: f64, target: usize) -> f64 {
    let raw = span / target as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let nice = match raw / magnitude {
        f if f < 1.5 => 1.0,
        f if f < 3.0 => 2.0,
        f if f < 7.0 => 5.0,
        _ => 10.0,
    };
    nice * magnitude
}

/// `v` (a multiple of `step`) with as many decimals as `step` needs; in exponent form every
/// label of an axis shares the exponent of its largest end, `exp`, so they line up.
fn label(v: f64, step: f64, exp: Option<i32>) -> String {
    // Multiples of the step are either zero or at least a step away from it; this drops -0.
    let v = if v.abs() < step * 1e-6 { 0.0 } else { v };
    let step_exp = (step.log10() + 1e-9).floor() as i32;
    match exp {
        None => {
            let decimals = (-step_exp).clamp(0, 12) as usize;
            format!("{v:.decimals$}")
        }
        Some(_) if v == 0.0 => "0".to_string(),
        Some(exp) => {
            let decimals = (exp - step_exp).clamp(0, 6) as usize;
            format!("{:.decimals$}e{exp}", v / 10f64.powi(exp))
        }
    }
}
