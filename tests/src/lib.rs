//! Multi-role integration tests.
