//! Where models run and in which precision: CUDA in bf16 when a GPU is there, the CPU in f32
//! otherwise.

use tch::{Device, Kind};

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
        if !tch::Cuda::is_available() {
            assert_eq!(pick(), Device::Cpu);
        }
    }
}
