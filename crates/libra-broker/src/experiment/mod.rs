//! The seed's experiments, reproduced on virtual time (deterministic, instant).

pub mod table17_4;
pub mod table17_6;
#[cfg(test)]
mod tests;
pub mod virtual_time;
