//! Where models run and in which precision: CUDA in bf16 when a GPU is there, the CPU in f32
//! otherwise, unless a [`Precision`] setting says which. A role's `device` setting
//! ([`DeviceChoice`]) is resolved once, at start, and the choice logged: `cuda` where libtorch
//! sees no CUDA device is an error, never a silent fall back to the CPU.
//!
//! libtorch's CUDA half is loaded at run time ([`cuda_library`]), not linked: one binary runs on
//! a GPU machine and on a CPU-only one, and says which it found.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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
    if cuda_available() {
        Device::Cuda(0)
    } else {
        Device::Cpu
    }
}

/// Whether libtorch sees a CUDA device, after [`cuda_library`] has loaded libtorch's CUDA half.
/// Every question about CUDA in this workspace goes through here (or [`pick`], [`resolve`]):
/// `tch::Cuda::is_available()` asked before the library is loaded answers `false` on a GPU.
pub fn cuda_available() -> bool {
    cuda_library().is_ok() && tch::Cuda::is_available()
}

/// libtorch's CUDA library (`libtorch_cuda.so`), loaded into this process once, on the first
/// call: its path, or why it could not be loaded.
///
/// PyTorch splits its backend in two: `libtorch_cpu`, which every binary here links, and
/// `libtorch_cuda`, whose static initialisers register the CUDA kernels and hooks. A Rust binary
/// calls none of `libtorch_cuda`'s symbols, so the linker drops it (`--as-needed`) and CUDA stays
/// invisible (tch-rs issue 980); linking it by force instead (`--no-as-needed`) makes a binary
/// that cannot even start where the CUDA libraries it names (cuDNN, cuBLAS, NCCL, ...) are
/// absent. So it is opened here, with `dlopen`, from the directory of the `libtorch_cpu.so` this
/// process mapped: on a GPU machine it loads (its own rpath finds the `nvidia/*` libraries
/// beside it) and CUDA is seen; on a CPU-only machine the reason it cannot load is kept, logged
/// by [`resolve`] and shown by `reagent doctor`, and the CPU works as before.
pub fn cuda_library() -> &'static Result<PathBuf, String> {
    static LOADED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    LOADED.get_or_init(load_cuda_library)
}

fn load_cuda_library() -> Result<PathBuf, String> {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("cannot read /proc/self/maps to find libtorch: {e}"))?;
    if let Some(cuda) = mapped(&maps, "libtorch_cuda.so") {
        return Ok(cuda);
    }
    let cpu = mapped(&maps, "libtorch_cpu.so").ok_or("libtorch_cpu.so is not mapped into this process")?;
    let path = cpu.with_file_name("libtorch_cuda.so");
    if !path.exists() {
        return Err(format!("{} does not exist (a CPU-only libtorch)", path.display()));
    }
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: loading runs libtorch_cuda's static initialisers, which register CUDA kernels and
    // hooks with the libtorch_cpu already loaded, the same library version (it sits beside it),
    // as `import torch` does. No symbol is called through the handle.
    let library = unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) }
        .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
    // Never unloaded: the kernels it registered must outlive every tensor.
    std::mem::forget(library);
    Ok(path)
}

/// The path of the library named `file` in `/proc/self/maps`' text, if it is mapped.
fn mapped(maps: &str, file: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| Path::new(path).file_name().is_some_and(|f| f == file))
        .map(PathBuf::from)
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
    "{key} is \"cuda\" but libtorch sees no CUDA device ({why}); set {key} = \"auto\" or \"cpu\" to run on the CPU"
)]
pub struct NoCuda {
    /// The setting, e.g. `learner.device`.
    pub key: String,
    /// Why: [`no_cuda_reason`].
    pub why: String,
}

/// Why no CUDA device is seen: libtorch's CUDA library could not be loaded (and why), or it is
/// loaded and sees no device.
pub fn no_cuda_reason() -> String {
    match cuda_library() {
        Err(e) => format!("libtorch_cuda is not loaded: {e}"),
        Ok(path) => format!(
            "{} is loaded but no device is visible: no NVIDIA driver mounted, or CUDA_VISIBLE_DEVICES empty?",
            path.display()
        ),
    }
}

/// Resolves `choice` (the setting `key`) to a device, logging what was chosen and why.
pub fn resolve(choice: DeviceChoice, key: &str) -> Result<Device, NoCuda> {
    let device = match choice {
        DeviceChoice::Auto => pick(),
        DeviceChoice::Cpu => Device::Cpu,
        DeviceChoice::Cuda if cuda_available() => Device::Cuda(0),
        DeviceChoice::Cuda => return Err(NoCuda { key: key.to_string(), why: no_cuda_reason() }),
    };
    let why = match (choice, device) {
        (DeviceChoice::Auto, Device::Cpu) => format!("auto: no CUDA device ({})", no_cuda_reason()),
        (DeviceChoice::Auto, _) => "auto: the first CUDA device".to_string(),
        _ => "as configured".to_string(),
    };
    let cuda_devices = if device == Device::Cpu { 0 } else { tch::Cuda::device_count() };
    tracing::info!(setting = key, device = ?device, cuda_devices, "model device: {why}");
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
        if !cuda_available() {
            assert_eq!(pick(), Device::Cpu);
        }
    }

    /// The first question about CUDA loads libtorch_cuda from beside libtorch_cpu, or keeps why
    /// it could not (on a machine without the CUDA libraries: the first one missing, by name).
    #[test]
    fn libtorch_cuda_is_loaded_at_run_time_or_the_reason_kept() {
        let maps = || std::fs::read_to_string("/proc/self/maps").unwrap();
        let cpu = mapped(&maps(), "libtorch_cpu.so").expect("libtorch_cpu is linked");
        match cuda_library() {
            Ok(path) => {
                assert_eq!(path, &cpu.with_file_name("libtorch_cuda.so"));
                assert_eq!(mapped(&maps(), "libtorch_cuda.so").as_ref(), Some(path), "loaded means mapped");
            }
            Err(why) => {
                assert!(why.contains("libtorch_cuda.so"), "{why}");
                assert!(mapped(&maps(), "libtorch_cuda.so").is_none(), "{why}");
                assert!(!cuda_available());
                assert!(no_cuda_reason().starts_with("libtorch_cuda is not loaded: "), "{}", no_cuda_reason());
            }
        }
        // The same answer each time: loaded once.
        assert!(std::ptr::eq(cuda_library(), cuda_library()));
    }

    #[test]
    fn a_mapped_library_is_found_by_its_file_name_only() {
        let maps = "7f00-7f01 r-xp 00000000 fd:01 42 /opt/t/lib/libtorch_cpu.so\n\
                    7f02-7f03 r--p 00000000 fd:01 43 /opt/t/lib/libtorch_cpu.so.bak\n\
                    7f04-7f05 rw-p 00000000 00:00 0 \n";
        assert_eq!(mapped(maps, "libtorch_cpu.so"), Some(PathBuf::from("/opt/t/lib/libtorch_cpu.so")));
        assert_eq!(mapped(maps, "libtorch_cuda.so"), None);
    }

    /// `cuda` where there is none is an error naming the setting, not the CPU in disguise.
    #[test]
    fn a_missing_gpu_is_an_error_naming_the_setting() {
        assert_eq!(resolve(DeviceChoice::Cpu, "learner.device"), Ok(Device::Cpu));
        if cuda_available() {
            assert_eq!(resolve(DeviceChoice::Cuda, "learner.device"), Ok(Device::Cuda(0)));
            return;
        }
        assert_eq!(resolve(DeviceChoice::Auto, "learner.device"), Ok(Device::Cpu));
        let err = resolve(DeviceChoice::Cuda, "learner.device").unwrap_err().to_string();
        assert!(err.starts_with("learner.device is \"cuda\" but libtorch sees no CUDA device"), "{err}");
    }
}
