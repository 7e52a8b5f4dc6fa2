//! The plan language: Nimrod/G's (Figure 17.11) in the form nimrodg accepts today.
//!
//! ```text
//! parameter angle_degree integer range from 1 to 165 step 1;
//! parameter time_base_value integer default 5;
//! task main
//!     copy calc.$OS node:calc
//!     node:execute ./calc $angle_degree $time_base_value
//!     copy node:output ./output.$jobname
//! endtask
//! ```

mod expand;
mod lexer;
mod parser;
mod subst;
#[cfg(test)]
mod tests;

pub use expand::{count_jobs, expand, JobParams, MAX_JOBS};
pub use parser::parse;
pub use subst::{substitute, Vars};

use serde::{Deserialize, Serialize};

/// A plan error: where it is and what was expected there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}, column {col}: expected {expected}{found}")]
pub struct PlanError {
    pub line: usize,
    pub col: usize,
    pub expected: String,
    /// ", found 'x'" or empty.
    pub found: String,
}

impl PlanError {
    pub fn at(line: usize, col: usize, expected: impl Into<String>) -> Self {
        PlanError { line, col, expected: expected.into(), found: String::new() }
    }
    pub fn found(line: usize, col: usize, expected: impl Into<String>, found: &str) -> Self {
        PlanError { line, col, expected: expected.into(), found: format!(", found '{found}'") }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    Integer,
    Float,
    Text,
    Files,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Domain {
    Default(String),
    Range { from: f64, to: f64, step: Option<f64>, points: Option<u64> },
    Random { from: f64, to: f64, points: u64 },
    Select(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parameter {
    pub name: String,
    pub label: Option<String>,
    pub ty: ParamType,
    pub domain: Domain,
    pub line: usize,
}

/// Where a file lives: the root (the machine the broker runs on, relative to the plan's
/// directory) or the node (the job's working directory on the resource).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Loc {
    Root,
    Node,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRef {
    pub loc: Loc,
    pub path: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stream {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecKind {
    /// `exec` and the seed's `node:execute`: program found on PATH, words as arguments.
    Exec,
    /// `shexec "cmd"`: through `/bin/sh -c`.
    Shexec,
    /// `lexec`: the program is a path, not searched on PATH.
    Lexec,
    /// `lpexec`: the program is searched on PATH.
    Lpexec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    OnError { ignore: bool },
    Redirect { stream: Stream, append: bool, target: Option<String> },
    Copy { from: FileRef, to: FileRef },
    Exec { kind: ExecKind, args: Vec<String> },
    Substitute { input: String, output: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub line: usize,
    pub command: Command,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Plan {
    pub parameters: Vec<Parameter>,
    /// Run once on each resource before its first job.
    pub nodestart: Vec<Step>,
    /// Run for every job.
    pub main: Vec<Step>,
}

/// Names every plan may use besides its parameters.
pub const BUILTIN_VARS: [&str; 3] = ["jobname", "nimrod_jobindex", "OS"];
