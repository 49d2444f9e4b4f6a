//! Build script shared by every crate whose binaries or tests link libtorch.
//!
//! torch-sys finds libtorch (from `LIBTORCH`) and tells its direct dependents where the
//! libraries are through `DEP_TCH_LIBTORCH_LIB`. Link arguments from a build script apply only
//! to the package's own binaries and tests, so each such crate names this file as its `build`
//! script and lists `torch-sys` as a direct dependency. It sets an rpath to libtorch's `lib/`
//! so binaries run without `LD_LIBRARY_PATH`.
//!
//! `libtorch_cuda` is not linked: `policy::device::cuda_library` loads it at run time from
//! beside `libtorch_cpu`, so the same binary runs on a GPU machine and on a CPU-only one.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") else {
        println!("cargo:warning=DEP_TCH_LIBTORCH_LIB is unset: no rpath to libtorch was set");
        return;
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", std::path::Path::new(&lib).display());
}
