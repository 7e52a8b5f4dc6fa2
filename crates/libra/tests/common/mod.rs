//! The whole-process tests' helpers live in the `libra-testkit` dev crate (one copy for every
//! crate's tests); this module only adds the path cargo gives the `libra` crate's own tests.

pub use libra_testkit::*;

/// (Not every test file uses it.)
#[allow(dead_code)]
pub const EXE: &str = env!("CARGO_BIN_EXE_libra");
