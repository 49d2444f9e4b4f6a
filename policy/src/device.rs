//! Where models run and in which precision: CUDA in bf16 when a GPU is there, the CPU in f32
//! otherwise, unless a [`Precision`] setting says which. A role's `device` setting
//! ([`DeviceChoice`]) is resolved once, at start, and the choice logged: `cuda` where libtorch
//! sees no CUDA device is an error, never a silent fall back to the CPU.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind};

pub use protocol::config::Precision;

/// The tensor kind `precision` gives on `device`: [`kind_for`] the device for `auto`.
pub fn precision_kind(precision: Precision, device: Device) -> Kind {
    match precision {
        Precision::Auto => kind_for(device),
        Precision::F32 => Kind::Float,
        Precision::Bf16 => Kind::BFloat16,
    }
}

/// The device a policy should run on: the first CUDA device when libtorch sees one, else the
/// CPU.
pub fn pick() -> Device {
    Device::cuda_if_available()
}

/// Where a role runs its model (`actor.device`, `learner.device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// The first CUDA device when libtorch sees one, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// The first CUDA device (an error at start when there is none).
    Cuda,
}

/// `device = "cuda"` where libtorch sees no CUDA device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{key} is \"cuda\" but libtorch sees no CUDA device (a GPU binary is built with REAGENT_LINK_CUDA=1 \
     against a CUDA libtorch, and runs where a driver is mounted); set {key} = \"auto\" or \"cpu\" to run on the CPU"
)]
pub struct NoCuda {
    /// The setting, e.g. `learner.device`.
    pub key: String,
}

/// Resolves `choice` (the setting `key`) to a device, logging what was chosen and why.
pub fn resolve(choice: DeviceChoice, key: &str) -> Result<Device, NoCuda> {
    let cuda = tch::Cuda::is_available();
    let device = match choice {
        DeviceChoice::Auto => pick(),
        DeviceChoice::Cpu => Device::Cpu,
        DeviceChoice::Cuda if cuda => Device::Cuda(0),
        DeviceChoice::Cuda => return Err(NoCuda { key: key.to_string() }),
    };
    let why = match (choice, device) {
        (DeviceChoice::Auto, Device::Cpu) => "auto: libtorch sees no CUDA device",
        (DeviceChoice::Auto, _) => "auto: the first CUDA device",
        _ => "as configured",
    };
    tracing::info!(setting = key, device = ?device, cuda_devices = tch::Cuda::device_count(), "model device: {why}");
    Ok(device)
}

/// The floating-point kind for weights and activations on `device`: bf16 on CUDA (half the
/// memory, tensor-core speed), f32 on the CPU (where bf16 is slow and imprecise).
pub fn kind_for(device: Device) -> Kind {
    match device {
        Device::Cuda(_) => Kind::BFloat16,
        _ => Kind::Float,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_runs_in_f32() {
        assert_eq!(kind_for(Device::Cpu), Kind::Float);
        assert_eq!(kind_for(Device::Cuda(0)), Kind::BFloat16);
        assert_eq!(precision_kind(Precision::Auto, Device::Cpu), Kind::Float);
        assert_eq!(precision_kind(Precision::Auto, Device::Cuda(0)), Kind::BFloat16);
        assert_eq!(precision_kind(Precision::Bf16, Device::Cpu), Kind::BFloat16);
        assert_eq!(precision_kind(Precision::F32, Device::Cuda(0)), Kind::Float);
        if !tch::Cuda::is_available() {
            assert_eq!(pick(), Device::Cpu);
        }
    }

    /// `cuda` where there is none is an error naming the setting, not the CPU in disguise.
    #[test]
    fn a_missing_gpu_is_an_error_naming_the_setting() {
        assert_eq!(resolve(DeviceChoice::Cpu, "learner.device"), Ok(Device::Cpu));
        if tch::Cuda::is_available() {
            assert_eq!(resolve(DeviceChoice::Cuda, "learner.device"), Ok(Device::Cuda(0)));
            return;
        }
        assert_eq!(resolve(DeviceChoice::Auto, "learner.device"), Ok(Device::Cpu));
        let err = resolve(DeviceChoice::Cuda, "learner.device").unwrap_err().to_string();
        assert!(err.starts_with("learner.device is \"cuda\" but libtorch sees no CUDA device"), "{err}");
    }
}
