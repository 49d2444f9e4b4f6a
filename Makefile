# Reagent: the two commands a newcomer needs are `make run` and `make test`.
# Both do all set-up first (redis-server from apt, libtorch from the torch wheel), idempotently.

SHELL := /bin/bash
export LIBTORCH := $(CURDIR)/.libtorch/torch
export LIBTORCH_BYPASS_VERSION_CHECK := 0
CARGO ?= cargo
REAGENT := target/release/reagent

.PHONY: run test setup build lint fmt unit k8s bench doctor clean-runs

## run: set up, build, and run the main job (`reagent run`: the default job of config/default.toml)
run: setup
	$(CARGO) build --release -p cluster --bin reagent
	$(REAGENT) doctor
	$(REAGENT) run

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

## unit: every test. A failing test's output is printed again after the summary, and without a
## backtrace, so the last lines of a CI log name what failed and why (RUST_BACKTRACE=1 by hand
## when a backtrace is wanted).
unit:
	@if command -v cargo-nextest >/dev/null; then \
		RUST_BACKTRACE=0 $(CARGO) nextest run --workspace --locked --no-fail-fast --failure-output immediate-final; \
	else \
		$(CARGO) test --workspace --locked --no-fail-fast; \
	fi

## bench: queue throughput beside redis-benchmark (results go to BENCHMARKS.md by hand)
bench: setup
	$(CARGO) build --release -p cluster --bin reagent
	$(REAGENT) bench queue

fmt:
	$(CARGO) fmt --all

clean-runs:
	rm -rf runs
