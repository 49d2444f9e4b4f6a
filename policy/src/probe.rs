//! A libtorch health probe: does libtorch load, what it can compute, and whether CUDA is there.

/// What the probe found about the libtorch this binary is linked against.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchReport {
    /// The sum of a small tensor computed on the CPU; proves the library loaded and ran.
    pub cpu_check: f64,
    /// Whether CUDA is usable from this process.
    pub cuda_available: bool,
    /// How many CUDA devices libtorch sees.
    pub cuda_devices: usize,
}

/// Loads libtorch by running a tiny computation, and asks it about CUDA.
///
/// Runs on the calling thread; call it from a blocking context, never on the async runtime.
pub fn probe() -> TorchReport {
    let t = tch::Tensor::arange(5, (tch::Kind::Float, tch::Device::Cpu));
    let cpu_check = t.sum(tch::Kind::Double).double_value(&[]);
    TorchReport {
        cpu_check,
        cuda_available: tch::Cuda::is_available(),
        cuda_devices: tch::Cuda::device_count().max(0) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_computes_on_cpu() {
        // 0 + 1 + 2 + 3 + 4, computed by libtorch.
        assert_eq!(probe().cpu_check, 10.0);
    }
}
