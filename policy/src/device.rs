//! Where models run and in which precision: CUDA in bf16 when a GPU is there, the CPU in f32
//! otherwise, unless a [`Precision`] setting says which.

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
}
