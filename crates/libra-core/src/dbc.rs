//! Deadline/budget-constrained planners for the broker (Nimrod/G section 17.4).
