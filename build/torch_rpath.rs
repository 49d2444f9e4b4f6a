//! Build script shared by every crate whose binaries or tests link libtorch.
//!
//! torch-sys finds libtorch (from `LIBTORCH`) and tells its direct dependents where the
//! libraries are through `DEP_TCH_LIBTORCH_LIB`. Link arguments from a build script apply only
//! to the package's own binaries and tests, so each such crate names this file as its `build`
//! script and lists `torch-sys` as a direct dependency. It:
//!
//! * sets an rpath to libtorch's `lib/` so binaries run without `LD_LIBRARY_PATH`;
//! * when the libtorch install carries the CUDA libraries it needs (a GPU machine's torch, with
//!   its `nvidia/cublas` wheel beside it), links `libtorch_cuda` with `--no-as-needed`, so that
//!   a GPU is found at run time (tch-rs issue 980). The CPU set-up of `scripts/setup.sh` carries
//!   only the CUDA runtime and CUPTI that `libtorch_cpu` links, so there it is left out.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-env-changed=REAGENT_LINK_CUDA");
    let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB").map(PathBuf::from) else {
        println!("cargo:warning=DEP_TCH_LIBTORCH_LIB is unset: no rpath to libtorch was set");
        return;
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    if wants_cuda(&lib) {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
    }
}

/// CUDA is linked when `REAGENT_LINK_CUDA=1`, or (unless it is `0`) when libtorch_cuda and the
/// cuBLAS wheel it depends on are both present.
fn wants_cuda(lib: &Path) -> bool {
    match std::env::var("REAGENT_LINK_CUDA").as_deref() {
        Ok("1") => return true,
        Ok("0") => return false,
        _ => {}
    }
    let site = lib.parent().and_then(Path::parent);
    let cublas =
        site.is_some_and(|s| s.join("nvidia/cublas").exists() || s.join("nvidia/cu13/lib/libcublas.so.13").exists());
    lib.join("libtorch_cuda.so").exists() && cublas
}
