#[macro_use]
pub mod browser;
