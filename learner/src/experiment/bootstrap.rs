//! Paired bootstrap intervals for a difference in held-out success between two feedback modes
//! trained from the same cold start with the same seeds and evaluated on the same tasks with the
//! same random draws: the pairing removes the task-to-task and draw-to-draw variance that both
//! share, so what is left is the modes' difference and the training seeds' spread.
//!
//! ```text
//!  d[s][i] = success_A(seed s, task i) − success_B(seed s, task i)      (fractions of the samples)
//!  point   = mean over s, i
//!  replicate: draw S seeds with replacement, and for each N tasks with replacement → mean d
//!  interval = the 2.5th and 97.5th percentiles of R replicates
//! ```
//!
//! Resampling the seeds as well as the tasks matters: with few seeds, the runs' own variance
//! (one RL run moves further than another from the same start) dominates, and an interval over
//! tasks alone would claim a precision the experiment does not have.

use crate::rng::SampleRng;
use serde::Serialize;

/// A difference of two modes with its interval, in percentage points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// The first mode (minuend).
    pub a: String,
    /// The second mode (subtrahend).
    pub b: String,
    /// Mean of `a − b`, in points.
    pub points: f64,
    /// 2.5th percentile of the bootstrap replicates, in points.
    pub low: f64,
    /// 97.5th percentile, in points.
    pub high: f64,
}

impl Difference {
    /// Whether the interval excludes 0.
    pub fn significant(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// The paired difference of `a` and `b` (`[seed][task]` success fractions of equal shapes), with
/// a percentile interval from `replicates` bootstrap draws seeded by `seed`.
pub fn paired(a_name: &str, a: &[Vec<f64>], b_name: &str, b: &[Vec<f64>], replicates: usize, seed: u64) -> Difference {
    let d: Vec<Vec<f64>> = a.iter().zip(b).map(|(x, y)| x.iter().zip(y).map(|(p, q)| p - q).collect()).collect();
    let mean = |rows: &[&Vec<f64>], picks: &[Vec<usize>]| -> f64 {
        let (mut sum, mut n) = (0.0, 0usize);
        for (row, idx) in rows.iter().zip(picks) {
            for &i in idx {
                sum += row[i];
                n += 1;
            }
        }
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    };
    let all: Vec<&Vec<f64>> = d.iter().collect();
    let identity: Vec<Vec<usize>> = d.iter().map(|r| (0..r.len()).collect()).collect();
    let point = mean(&all, &identity);
    let mut rng = SampleRng::new(seed);
    let mut reps: Vec<f64> = (0..replicates)
        .map(|_| {
            let rows: Vec<&Vec<f64>> = (0..d.len()).map(|_| &d[rng.below(d.len().max(1))]).collect();
            let picks: Vec<Vec<usize>> =
                rows.iter().map(|r| (0..r.len()).map(|_| rng.below(r.len().max(1))).collect()).collect();
            mean(&rows, &picks)
        })
        .collect();
    reps.sort_by(f64::total_cmp);
    let at = |q: f64| if reps.is_empty() { point } else { reps[((reps.len() - 1) as f64 * q).round() as usize] };
    Difference {
        a: a_name.into(),
        b: b_name.into(),
        points: 100.0 * point,
        low: 100.0 * at(0.025),
        high: 100.0 * at(0.975),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_difference_has_a_point_interval_and_noise_widens_it() {
        let a = vec![vec![1.0; 50]; 3];
        let b = vec![vec![0.0; 50]; 3];
        let d = paired("a", &a, "b", &b, 200, 1);
        assert_eq!((d.points, d.low, d.high), (100.0, 100.0, 100.0));
        assert!(d.significant());
        // Half the tasks differ by one, half by none: the mean is 50 points, the interval about
        // ±1.96·√(0.25/150)·100 ≈ ±8 points around it (tasks) and wider with seeds resampled.
        let a2: Vec<Vec<f64>> = (0..3).map(|_| (0..50).map(|i| f64::from(i % 2 == 0)).collect()).collect();
        let d2 = paired("a", &a2, "b", &b, 2000, 2);
        assert!((d2.points - 50.0).abs() < 1e-9);
        assert!(d2.low < 50.0 && d2.high > 50.0 && d2.low > 35.0 && d2.high < 65.0, "{d2:?}");
        // Identical modes: the interval holds 0.
        let same = paired("a", &a2, "b", &a2, 500, 3);
        assert_eq!((same.points, same.low, same.high), (0.0, 0.0, 0.0));
        assert!(!same.significant());
    }

    #[test]
    fn seed_to_seed_spread_widens_the_interval_beyond_the_tasks_alone() {
        // Seed 0 gains 40 points, seed 1 none, seed 2 twenty: a real but uncertain gain.
        let b = vec![vec![0.0; 100]; 3];
        let a: Vec<Vec<f64>> =
            [0.4, 0.0, 0.2].iter().map(|&g| (0..100).map(|i| f64::from((i as f64) < g * 100.0)).collect()).collect();
        let d = paired("a", &a, "b", &b, 4000, 4);
        assert!((d.points - 20.0).abs() < 1e-9);
        assert!(d.low <= 5.0 && d.high >= 35.0, "seeds resampled: {d:?}");
    }
}
