#!/usr/bin/env python3
"""Stand-in CUDA libraries that let PyPI's CUDA build of torch import on a machine without them.

The torch wheel in .libtorch (scripts/setup.sh) is PyPI's only Linux x86-64 build, the CUDA one.
Its libtorch_cuda.so and libtorch_python.so name cuDNN, cuBLAS, cuSPARSE, cuFFT, cuRAND, NCCL,
NVSHMEM, ... as needed libraries, so `import torch` fails with `libcudnn.so.9: cannot open shared
object file` unless those are present. PyPI has them (the nvidia-* wheels torch depends on), about
3 GB installed, for code that never runs here: the CartPole comparison runs torch on the CPU.

This script writes, for each needed library that is missing, a small shared library with the same
soname that defines every symbol (with the symbol versions) torch's libraries import from it.
Every stand-in function returns 1, a CUDA error status, so nothing can mistake a stub for
success; no CPU code path calls them. A venv imports them before torch (scripts/sb3_venv.sh puts a
.pth file that does so), and torch then loads as it does on a machine with CUDA but no GPU.

  python3 scripts/cuda_stubs.py LIBTORCH_ROOT OUT_DIR   # LIBTORCH_ROOT holds torch/ and nvidia/

Needs readelf (binutils) and a C compiler (cc). Prints the sonames it wrote.
"""

import pathlib
import re
import subprocess
import sys


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def dynamic_symbols(path):
    """(section index, name@version) of each dynamic symbol of an ELF file."""
    for line in run("readelf", "-W", "--dyn-syms", str(path)).splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].endswith(":") and f[0][:-1].isdigit():
            yield f[6], f[7]


def needed(path):
    return re.findall(r"NEEDED.*\[(.*)\]", run("readelf", "-d", str(path)))


def version_files(path):
    """Symbol version name -> the needed library it is required from (readelf -V)."""
    out, current = {}, None
    for line in run("readelf", "-V", "-W", str(path)).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and current:
            out[m.group(1)] = current
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    torch_libs = sorted((root / "torch").glob("_C*.so")) + sorted((root / "torch" / "lib").glob("*.so"))
    if not torch_libs:
        sys.exit(f"cuda_stubs: no torch libraries under {root}/torch")
    shipped = {p.name for p in root.rglob("*.so*")}
    system = run("ldconfig", "-p")
    missing = sorted({n for lib in torch_libs for n in needed(lib) if n not in shipped and f"{n} " not in system})

    owner, defined, wanted = {}, set(), {}
    for lib in torch_libs:
        owner.update(version_files(lib))
    system_paths = re.findall(r"=> (\S+)", system)
    for lib in torch_libs + sorted((root / "nvidia").rglob("*.so*")) + [pathlib.Path(p) for p in system_paths
                                                                          if re.search(r"/lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt)\.so", p)]:
        for index, name in dynamic_symbols(lib):
            base, _, version = name.partition("@")
            if index != "UND":
                defined.add(base)
            elif lib in torch_libs:
                wanted.setdefault(base, set()).add(version.lstrip("@"))

    # Versioned imports belong to the library their version is required from; unversioned ones
    # nothing present defines (NCCL's, the driver's) go into every stub, whichever loads first.
    nodes = {m: {} for m in missing}
    loose = set()
    for sym, versions in wanted.items():
        versions.discard("")
        mine = [v for v in versions if owner.get(v) in nodes]
        for v in mine:
            nodes[owner[v]].setdefault(v, set()).add(sym)
        if not versions and sym not in defined and not sym.startswith(("_", "Py")):
            loose.add(sym)

    out.mkdir(parents=True, exist_ok=True)
    for soname, by_version in nodes.items():
        if not by_version:
            by_version[soname] = set()
        first = next(iter(by_version))
        by_version[first] |= loose - {s for ss in by_version.values() for s in ss}
        symbols = sorted({s for ss in by_version.values() for s in ss})
        source, script = out / f"{soname}.c", out / f"{soname}.map"
        source.write_text(
            "/* Stand-in for a CUDA library torch names but never calls on the CPU (scripts/cuda_stubs.py). */\n"
            + "".join(f"int {s}(void) {{ return 1; }}\n" for s in symbols)
        )
        script.write_text("".join(
            f"{v} {{ global: {' '.join(f'{s};' for s in sorted(ss))} local: *; }};\n" for v, ss in by_version.items()
        ))
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-w", f"-Wl,-soname,{soname}",
                        f"-Wl,--version-script={script}", "-o", str(out / soname), str(source)], check=True)
        source.unlink()
        script.unlink()
        print(soname)


if __name__ == "__main__":
    main()
