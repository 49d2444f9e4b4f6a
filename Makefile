# Reagent: the two commands a newcomer needs are `make run` and `make test`.
# Both do all set-up first (redis-server from apt, libtorch from the torch wheel), idempotently.

SHELL := /bin/bash
export LIBTORCH := $(CURDIR)/.libtorch/torch
export LIBTORCH_BYPASS_VERSION_CHECK := 0
CARGO ?= cargo
REAGENT := target/release/reagent

.PHONY: run test setup build lint fmt unit k8s bench fuzz doctor clean-runs

## run: set up, build, and run a job: by default examples/smollm2/job.toml, the real pretrained
## SmolLM2-135M-Instruct learning the calculator tool (about 20 minutes on two cores);
## `make run JOB=config/default.toml` runs the built-in micro model's job instead
JOB ?= examples/smollm2/job.toml
run: setup
	$(CARGO) build --release -p reagent
	$(REAGENT) --config $(JOB) doctor
	$(REAGENT) --config $(JOB) run

## test: set up, check formatting and lints, and run every test
test: setup lint k8s unit

setup:
	@bash scripts/setup.sh all

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

## k8s: every overlay renders (kubectl kustomize), validates against the Kubernetes schemas,
## and sets only config keys that exist
k8s:
	@bash scripts/k8s_check.sh

## unit: every test, under cargo-nextest (installed by scripts/setup.sh when missing), after
## scripts/build_tests.sh has built them (it names the first errors, free disk and memory when the
## build fails, as the last lines of the log). The heavy
## tests run one at a time (.config/nextest.toml), and a failing test's output is printed again
## after the summary, without a backtrace, so the last lines of a CI log name what failed and why
## (RUST_BACKTRACE=1 by hand when a backtrace is wanted). The multi-host test is #[ignore]d: it
## runs where scripts/netns_check.sh can make network namespaces, and always with
## REAGENT_REQUIRE_NETNS=1 (CI), where it fails if they cannot be made; elsewhere nextest
## reports it as skipped.
unit:
	@bash scripts/setup.sh nextest
	@CARGO="$(CARGO)" bash scripts/build_tests.sh --locked
	@if [ "$${REAGENT_REQUIRE_NETNS:-0}" != 0 ]; then \
		hosts="--run-ignored all"; echo "unit: REAGENT_REQUIRE_NETNS is set: the multi-host test must run"; \
	elif reason="$$(bash scripts/netns_check.sh)"; then \
		hosts="--run-ignored all"; \
	else \
		hosts=""; echo "unit: the multi-host test will be reported as skipped: $$reason"; \
	fi; \
	RUST_BACKTRACE=0 $(CARGO) nextest run --workspace --locked $$hosts

## bench: queue throughput beside redis-benchmark (results go to BENCHMARKS.md by hand)
bench: setup
	$(CARGO) build --release -p reagent
	$(REAGENT) bench queue

## fuzz: each cargo-fuzz target in fuzz/ for FUZZ_SECONDS (default 60) on the nightly toolchain,
## installing cargo-fuzz when missing; not part of `make test` (CI has no nightly). Crashes land
## in fuzz/artifacts/<target>/ and become regression tests in the owning crate. The config
## loader starts from config/default.toml (random bytes are rarely TOML).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= codec_decode action_parse calc_parse judge_output config_load
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		seeds=""; if [ $$t = config_load ]; then mkdir -p fuzz/corpus/$$t; seeds="fuzz/corpus/$$t config"; fi; \
		$(CARGO) +nightly fuzz run $$t $$seeds -- -max_total_time=$(FUZZ_SECONDS) -max_len=32768 || exit 1; \
	done

fmt:
	$(CARGO) fmt --all

clean-runs:
	rm -rf runs
