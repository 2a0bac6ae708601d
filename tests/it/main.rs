//! planmux's integration tests, one module per area, in one test binary: every test
//! binary links the library and all its dependencies anew, so one binary links once
//! where ten linked ten times (ripgrep's `tests/tests.rs` does the same).
//! `cargo test --test it e2e::` runs one area.
//!
//! Paths to fixtures are taken from `CARGO_MANIFEST_DIR` (the repository root): the
//! fixtures stay in `tests/fixtures` and `tests/interop`, beside this directory.

mod approval;
mod catalog;
mod common;
mod e2e;
mod examples;
mod hostile;
mod hosts;
mod http;
mod http_routes;
mod interop;
mod plans;
mod routes;
mod safety;
mod startup;
mod tasks;
mod tidy;
