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
    /// libtorch's CUDA library, loaded at run time ([`crate::device::cuda_library`]): its path,
    /// or why it could not be loaded. Without it no device can ever be seen; with it and none
    /// seen, the driver is missing.
    pub cuda_library: Result<std::path::PathBuf, String>,
    /// With CUDA: the sum of a 64 × 64 matrix product of ones on `cuda:0` (262,144 when the
    /// kernel ran right), or why it failed.
    pub cuda_check: Option<Result<f64, String>>,
}

/// Loads libtorch by running a tiny computation, and asks it about CUDA.
///
/// Runs on the calling thread; call it from a blocking context, never on the async runtime.
pub fn probe() -> TorchReport {
    let t = tch::Tensor::arange(5, (tch::Kind::Float, tch::Device::Cpu));
    let cpu_check = t.sum(tch::Kind::Double).double_value(&[]);
    let cuda_available = crate::device::cuda_available();
    TorchReport {
        cpu_check,
        cuda_available,
        cuda_devices: tch::Cuda::device_count().max(0) as usize,
        cuda_library: crate::device::cuda_library().clone(),
        cuda_check: cuda_available.then(cuda_kernel),
    }
}

/// The sum of ones(64, 64) · ones(64, 64) computed on `cuda:0`, brought back to the host.
fn cuda_kernel() -> Result<f64, String> {
    let run = || -> Result<f64, tch::TchError> {
        let ones = tch::Tensor::f_ones([64, 64], (tch::Kind::Float, tch::Device::Cuda(0)))?;
        let product = ones.f_matmul(&ones)?;
        product.f_sum(tch::Kind::Double)?.f_double_value(&[])
    };
    run().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_computes_on_cpu() {
        // 0 + 1 + 2 + 3 + 4, computed by libtorch.
        let report = probe();
        assert_eq!(report.cpu_check, 10.0);
        // A CUDA device is only seen where libtorch_cuda is loaded; where one is seen, the kernel
        // runs and gives 64 · 64 · 64.
        assert!(!report.cuda_available || report.cuda_library.is_ok(), "{report:?}");
        match report.cuda_check {
            Some(result) => assert_eq!(result, Ok(262_144.0)),
            None => assert!(!report.cuda_available),
        }
    }
}
