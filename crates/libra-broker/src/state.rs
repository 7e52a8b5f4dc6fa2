//! An experiment's state and the changes allowed between states: by the engine (it ends done or
//! stalled, or carries out a cancel) and by steering (pause, resume, cancel, rerun), from any
//! process that opens the database.

use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentState {
    /// The engine dispatches its jobs.
    Running,
    /// No new jobs start; those running finish.
    Paused,
    /// Nothing more can run within the deadline and budget (or every resource failed): a new
    /// deadline or budget, then resume, runs it again.
    Stalled,
    Done,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("'{0}' is not an experiment state (running, paused, stalled, done, cancelled)")]
    Unknown(String),
    #[error("sweep {exp} is {from}: it cannot become {to}")]
    Transition { exp: i64, from: ExperimentState, to: ExperimentState },
    /// A rerun while a cancel is still being carried out: its engine is still marking the jobs
    /// cancelled, so the rerun would race with it (and count too few jobs to run again).
    #[error("sweep {exp} is being cancelled: rerun it once the cancel has ended (its status shows when it finished)")]
    Cancelling { exp: i64 },
}

impl ExperimentState {
    pub const ALL: [ExperimentState; 5] = [
        ExperimentState::Running,
        ExperimentState::Paused,
        ExperimentState::Stalled,
        ExperimentState::Done,
        ExperimentState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentState::Running => "running",
            ExperimentState::Paused => "paused",
            ExperimentState::Stalled => "stalled",
            ExperimentState::Done => "done",
            ExperimentState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Result<ExperimentState, StateError> {
        ExperimentState::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| StateError::Unknown(s.into()))
    }

    /// An engine is (or should be) working on it.
    pub fn is_active(self) -> bool {
        matches!(self, ExperimentState::Running | ExperimentState::Paused)
    }

    /// Nothing will run unless someone reruns it.
    pub fn is_final(self) -> bool {
        matches!(self, ExperimentState::Done | ExperimentState::Cancelled)
    }

    /// The allowed changes: staying put; pausing and resuming; cancelling what has not ended;
    /// the engine's ends (done, stalled) of a running experiment; and running again what stalled,
    /// ended or was cancelled (resume with a new deadline or budget, `rerun`).
    pub fn can_become(self, to: ExperimentState) -> bool {
        use ExperimentState::*;
        self == to
            || matches!(
                (self, to),
                (Running, Paused | Done | Stalled | Cancelled)
                    | (Paused, Running | Cancelled)
                    | (Stalled, Running | Cancelled)
                    | (Done | Cancelled, Running)
            )
    }
}

/// Compared with its name, as the database and the API spell it.
impl PartialEq<&str> for ExperimentState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for ExperimentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExperimentState::*;

    #[test]
    fn names_round_trip_and_only_sensible_changes_are_allowed() {
        for s in ExperimentState::ALL {
            assert_eq!(ExperimentState::parse(s.as_str()), Ok(s));
            assert!(s.can_become(s));
        }
        assert!(ExperimentState::parse("runing").is_err());
        assert!(Running.can_become(Paused) && Paused.can_become(Running));
        assert!(Stalled.can_become(Running) && Done.can_become(Running));
        // A paused experiment is not declared done or stalled behind its owner's back, and what
        // has ended cannot be paused or cancelled.
        for (from, to) in
            [(Paused, Done), (Paused, Stalled), (Done, Paused), (Done, Cancelled), (Cancelled, Paused)]
        {
            assert!(!from.can_become(to), "{from} -> {to}");
        }
    }
}
