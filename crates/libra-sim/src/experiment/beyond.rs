//! The policies past the seeds (`libra-edf`, `libra-risk`, `libra-risk-est`) against the
//! published ones: the arrival delay factor study with Libra+$ pricing, and the under-estimate
//! study at beta 0.1 and 0.5 (each risk variant at both, to compare at the same beta).

use super::libraplus::{Axis, Study};

/// The two studies of `libra sim experiment beyond`.
pub fn studies() -> Vec<Study> {
    vec![
        Study {
            name: "beyond-arrival-delay",
            study: "arrival-delay",
            axis: Axis::ArrivalDelay,
            x_label: "arrival delay factor",
            xs: vec![0.1, 0.25, 0.5, 0.75, 1.0],
            series: vec![
                ("libra", Some(0.1)),
                ("libra+$", Some(0.1)),
                ("edf-bf", Some(0.1)),
                ("libra-edf", Some(0.1)),
            ],
        },
        Study {
            name: "beyond-under-estimate",
            study: "under-estimate",
            axis: Axis::UnderEstimatePercent,
            x_label: "runtime under-estimate (%)",
            xs: vec![0.0, 10.0, 20.0, 30.0, 40.0],
            series: vec![
                ("libra", Some(0.1)),
                ("libra+$", Some(0.1)),
                ("libra+$", Some(0.5)),
                ("libra-edf", Some(0.1)),
                ("libra-risk", Some(0.1)),
                ("libra-risk", Some(0.5)),
                ("libra-risk-est", Some(0.1)),
                ("libra-risk-est", Some(0.5)),
            ],
        },
    ]
}
