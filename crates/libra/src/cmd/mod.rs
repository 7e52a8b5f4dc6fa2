//! One module per command family: `sim` (simulator), `sweep` (broker), `cluster` (server, node
//! agent and the user and administrator commands).

pub mod cluster;
pub mod sim;
pub mod sweep;
pub mod time;

/// A table for people. On a terminal its columns are wrapped to the terminal's width (comfy-table
/// asks the terminal); in a pipe it stays as wide as its content, for grep and friends.
pub fn new_table() -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
    t
}
