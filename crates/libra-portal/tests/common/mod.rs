#[macro_use]
pub mod browser;
pub mod cluster;
