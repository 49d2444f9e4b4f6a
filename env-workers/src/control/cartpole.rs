//! CartPole, with the dynamics and limits of Gymnasium's `CartPole-v1`: Euler integration at
//! 50 Hz, force ±10 N, failure past 12° or 2.4 m, episodes cut at 500 steps, reward 1 per step,
//! start state uniform in ±0.05.

use super::{ControlEnvironment, ControlObservation};
use crate::rng::Rng;
use crate::EnvError;

const GRAVITY: f64 = 9.8;
const MASS_CART: f64 = 1.0;
const MASS_POLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASS_CART + MASS_POLE;
const HALF_LENGTH: f64 = 0.5;
const POLE_MASS_LENGTH: f64 = MASS_POLE * HALF_LENGTH;
const FORCE: f64 = 10.0;
const TAU: f64 = 0.02;
const THETA_LIMIT: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
const X_LIMIT: f64 = 2.4;
/// Steps after which an episode is truncated.
pub const MAX_STEPS: u32 = 500;

/// The cart-pole system: state (x, ẋ, θ, θ̇).
#[derive(Debug, Clone)]
pub struct CartPole {
    state: [f64; 4],
    steps: u32,
    done: bool,
}

impl Default for CartPole {
    fn default() -> Self {
        let mut env = Self { state: [0.0; 4], steps: 0, done: false };
        env.reset(0);
        env
    }
}

impl CartPole {
    /// The state (x, ẋ, θ, θ̇).
    pub fn state(&self) -> [f64; 4] {
        self.state
    }

    /// Sets the state directly (tests and golden checks).
    pub fn set_state(&mut self, state: [f64; 4]) {
        self.state = state;
        self.steps = 0;
        self.done = false;
    }

    fn observation(&self) -> Vec<f32> {
        self.state.iter().map(|v| *v as f32).collect()
    }
}

impl ControlEnvironment for CartPole {
    fn observation_dim(&self) -> usize {
        4
    }

    fn action_count(&self) -> usize {
        2
    }

    fn reset(&mut self, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed, 0xCA27);
        self.state = std::array::from_fn(|_| rng.unit() * 0.1 - 0.05);
        self.steps = 0;
        self.done = false;
        self.observation()
    }

    fn step(&mut self, action: u32) -> Result<ControlObservation, EnvError> {
        if action > 1 {
            return Err(EnvError::BadAction { action, count: 2 });
        }
        if self.done {
            return Err(EnvError::EpisodeOver);
        }
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if action == 1 { FORCE } else { -FORCE };
        let (sin, cos) = theta.sin_cos();
        let temp = (force + POLE_MASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS;
        let theta_acc = (GRAVITY * sin - cos * temp) / (HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos * cos / TOTAL_MASS));
        let x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS;
        self.state = [x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot, theta_dot + TAU * theta_acc];
        self.steps += 1;
        let [x, _, theta, _] = self.state;
        let terminated = !(-X_LIMIT..=X_LIMIT).contains(&x) || !(-THETA_LIMIT..=THETA_LIMIT).contains(&theta);
        let truncated = !terminated && self.steps >= MAX_STEPS;
        self.done = terminated || truncated;
        Ok(ControlObservation { observation: self.observation(), reward: 1.0, terminated, truncated })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_step_matches_hand_computed_dynamics() {
        // From state 0 with action 1 (force +10):
        //   temp = 10 / 1.1 = 9.090909…;  θ̈ = (0 − 1·temp) / (0.5·(4/3 − 0.1/1.1)) = −14.634146…
        //   ẍ = temp − 0.05·θ̈/1.1 = 9.756097…; Euler: ẋ' = 0.02·ẍ, θ̇' = 0.02·θ̈, positions unchanged.
        let mut env = CartPole::default();
        env.set_state([0.0; 4]);
        let o = env.step(1).unwrap();
        let temp: f64 = 10.0 / 1.1;
        let theta_acc = -temp / (0.5 * (4.0 / 3.0 - 0.1 / 1.1));
        assert!((theta_acc - -14.634_146_341_463).abs() < 1e-9);
        let x_acc = temp - 0.05 * theta_acc / 1.1;
        let want = [0.0, 0.02 * x_acc, 0.0, 0.02 * theta_acc];
        for (got, want) in env.state().iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        assert_eq!((o.reward, o.terminated, o.truncated), (1.0, false, false));
    }

    #[test]
    fn falls_over_when_pushed_one_way_and_refuses_bad_actions() {
        let mut env = CartPole::default();
        env.reset(3);
        assert_eq!(env.step(2), Err(EnvError::BadAction { action: 2, count: 2 }));
        let mut steps = 0;
        loop {
            steps += 1;
            if env.step(1).unwrap().terminated {
                break;
            }
            assert!(steps < 200, "a constant push topples the pole quickly");
        }
        assert!((8..60).contains(&steps), "{steps}");
        assert_eq!(env.step(0), Err(EnvError::EpisodeOver));
    }

    #[test]
    fn resets_are_deterministic_and_small() {
        let (mut a, mut b) = (CartPole::default(), CartPole::default());
        assert_eq!(a.reset(11), b.reset(11));
        assert_ne!(a.reset(11), a.reset(12));
        assert!(a.reset(5).iter().all(|v| v.abs() <= 0.05));
    }
}
