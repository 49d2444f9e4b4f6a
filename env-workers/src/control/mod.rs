//! Control environments: vector observations and discrete actions (CartPole), the yardstick
//! for PPO correctness and actor-learner throughput. They have no verifier.

mod cartpole;

pub use cartpole::CartPole;

pub use protocol::wire::ControlObservation;

/// A control task with discrete actions.
pub trait ControlEnvironment: Send {
    /// Length of the observation vector.
    fn observation_dim(&self) -> usize;
    /// Number of discrete actions.
    fn action_count(&self) -> usize;
    /// Starts a new episode from `seed`; returns the first observation.
    fn reset(&mut self, seed: u64) -> Vec<f32>;
    /// Applies `action`. An action out of range is refused without changing the state.
    fn step(&mut self, action: u32) -> Result<ControlObservation, crate::EnvError>;
}
