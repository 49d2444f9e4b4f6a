# syntax=docker/dockerfile:1.7
# The `reagent` image: one image for every role, the role chosen by the command
# (`reagent learner|actor|rrm|env-worker --config /etc/reagent/reagent.toml`; docs/kubernetes.md).
#
#   docker build -t reagent:dev .                                   # CPU libtorch (laptops, CI)
#   docker build --build-arg TORCH_VARIANT=cuda -t reagent:cuda .   # with the CUDA libraries
#
# Stage 1 installs libtorch the way scripts/setup.sh does (PyPI's torch wheel, pinned to the
# version tch expects) and builds the binary; stage 2 carries only the binary and the shared
# libraries it loads, and runs as a non-root user. BuildKit is needed (the default builder of
# Docker 23 and later).

ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------------
FROM ${RUST_IMAGE} AS build

# cpu: torch's CPU library and the two CUDA wheels it links (CUDA runtime, CUPTI), as
#      scripts/setup.sh installs them; the image has no libtorch_cuda.
# cuda: torch with every CUDA wheel it depends on. The binary is the same in both: it loads
#      libtorch_cuda at run time when it is there (policy::device::cuda_library), so this image
#      finds the GPU the NVIDIA runtime mounts, and runs on the CPU where none is mounted.
ARG TORCH_VARIANT=cpu
# Keep these three in step with scripts/setup.sh (tch 0.24 <-> torch 2.11.0, DESIGN.md section 6).
ARG TORCH_VERSION=2.11.0
ARG CUDA_RUNTIME_VERSION=13.0.96
ARG CUDA_CUPTI_VERSION=13.0.85

RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-pip \
 && rm -rf /var/lib/apt/lists/*

# libtorch in a layer of its own: it is fetched again only when a version above changes.
# torch's wheel is built for CPython 3.11, Debian bookworm's python3.
RUN set -eux; \
    case "$TORCH_VARIANT" in \
      cpu)  python3 -m pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
              --no-compile --no-deps --target /opt/libtorch \
              "torch==$TORCH_VERSION" \
              "nvidia-cuda-runtime==$CUDA_RUNTIME_VERSION" \
              "nvidia-cuda-cupti==$CUDA_CUPTI_VERSION" ;; \
      cuda) python3 -m pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
              --no-compile --target /opt/libtorch \
              "torch==$TORCH_VERSION" ;; \
      *)    echo "TORCH_VARIANT must be cpu or cuda, not '$TORCH_VARIANT'" >&2; exit 2 ;; \
    esac; \
    test -f /opt/libtorch/torch/lib/libtorch_cpu.so

# As the Makefile: LIBTORCH fixed (changing it rebuilds torch-sys); the binary gets an rpath to
# /opt/libtorch/torch/lib, which the runtime stage keeps.
ENV LIBTORCH=/opt/libtorch/torch \
    LIBTORCH_BYPASS_VERSION_CHECK=0 \
    CARGO_TERM_COLOR=never

WORKDIR /src
COPY . .

# The cargo registry and target directory are BuildKit caches: a rebuild after a code change
# recompiles only what changed. The binary is copied out of the cache in the same step.
RUN --mount=type=cache,id=reagent-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=reagent-target-${TORCH_VARIANT},target=/src/target \
    set -eux; \
    cargo build --release -p reagent --locked; \
    install -D -m 0755 target/release/reagent /out/usr/local/bin/reagent

# The shared libraries the binary loads from libtorch, at the same paths (its rpath, and
# libtorch's own $ORIGIN-relative rpaths to nvidia/*/lib, keep working). `ldd` finds what is
# linked; for CUDA, libraries that libtorch_cuda and cuDNN open at run time (cuDNN's engines,
# NVRTC) are not linked, so every CUDA library comes along. Python's parts stay behind.
RUN set -eux; \
    ldd /out/usr/local/bin/reagent | awk '$2 == "=>" && $3 ~ "^/opt/libtorch/" { print $3 }' \
      | while read -r lib; do \
          lib="$(realpath -s "$lib")"; \
          mkdir -p "/out$(dirname "$lib")"; cp -L "$lib" "/out$lib"; \
        done; \
    if [ "$TORCH_VARIANT" = cuda ]; then \
      cp -a /opt/libtorch/torch/lib/. /out/opt/libtorch/torch/lib/; \
      rm -f /out/opt/libtorch/torch/lib/libtorch_python.so; \
      mkdir -p /out/opt/libtorch/nvidia; \
      cd /opt/libtorch/nvidia; \
      find . \( -name '*.so' -o -name '*.so.*' \) -exec cp -a --parents {} /out/opt/libtorch/nvidia/ \; ; \
    fi; \
    du -sh /out/opt/libtorch

# ---------------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime

# ca-certificates: the RRM worker's OpenAI-compatible judge may be reached over https.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 reagent \
 && useradd --system --uid 10001 --gid reagent --home-dir /var/lib/reagent --no-create-home \
      --shell /usr/sbin/nologin reagent \
 && mkdir -p /var/lib/reagent /etc/reagent \
 && chown reagent:reagent /var/lib/reagent

COPY --from=build /out/ /

# Fail the build, not the pod, when a shared library is missing, then run the binary; in the
# CUDA image, also load libtorch_cuda and everything it needs (doctor's cuda line: "loaded, but
# no device is visible" here, where no driver is mounted; its other checks may fail, no Redis).
ARG TORCH_VARIANT=cpu
RUN set -eu; \
    missing="$(ldd /usr/local/bin/reagent | awk '/not found/ { print $1 }')"; \
    if [ -n "$missing" ]; then echo "reagent: shared libraries missing from the image: $missing" >&2; exit 1; fi; \
    reagent --version; \
    if [ "$TORCH_VARIANT" = cuda ]; then \
      line="$(reagent doctor 2>&1 | grep ' cuda ' || true)"; echo "$line"; \
      case "$line" in *"libtorch_cuda.so loaded"*) ;; *) echo "reagent: libtorch_cuda does not load in this image" >&2; exit 1 ;; esac; \
    fi

# The NVIDIA container runtime mounts the driver (libcuda) for these capabilities.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility

USER 10001:10001
WORKDIR /var/lib/reagent
EXPOSE 9090 7070
ENTRYPOINT ["reagent"]
CMD ["--help"]
