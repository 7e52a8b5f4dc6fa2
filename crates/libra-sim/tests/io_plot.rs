//! SVG charts: the file holds the title, axis labels, legend entries and one line per series.

use libra_sim::plot::{jobs_in_execution, line_chart, step_chart, PlotError, Series};

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn line_chart_has_readable_labels_and_a_legend() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fig2a.svg");
    let series: Vec<Series> = vec![
        ("libra+$".into(), vec![(0.1, 0.2), (0.5, 0.55), (1.0, 0.8)]),
        ("EDF-BF".into(), vec![(0.1, 0.1), (0.5, 0.3), (1.0, f64::NAN)]),
        ("Libra".into(), vec![(0.1, 0.25), (0.5, 0.6), (1.0, 0.85)]),
    ];
    line_chart(&p, "Impact of decreasing workload", "Arrival delay factor", "Job QoS Satisfaction", &series)
        .unwrap();
    let svg = std::fs::read_to_string(&p).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    for text in [
        "Impact of decreasing workload",
        "Arrival delay factor",
        "Job QoS Satisfaction",
        "EDF-BF",
        "Libra",
        "libra+$",
    ] {
        assert!(svg.contains(&format!(">{text}<")) || svg.contains(text), "missing text {text}");
    }
    // Tick labels on both axes are written as text.
    assert!(count(&svg, "<text") >= 3 + 3 + 6, "{}", count(&svg, "<text"));
    // One polyline per series plus one per legend marker; the NaN point is dropped.
    assert!(count(&svg, "<polyline") >= 6, "{}", count(&svg, "<polyline"));
    assert_eq!(count(&svg, "<circle"), 8);
    if let Ok(dir) = std::env::var("LIBRA_PLOT_KEEP") {
        std::fs::copy(&p, std::path::Path::new(&dir).join("line.svg")).unwrap();
    }
}

#[test]
fn step_chart_of_jobs_in_execution() {
    // Resource 0: a job 0..10 and one 5..20; resource 1: back to back jobs 0..5, 5..8.
    let ex = [(0, 0.0, 10.0), (0, 5.0, 20.0), (1, 0.0, 5.0), (1, 5.0, 8.0)];
    let names = vec!["node A".to_string(), "node B".to_string()];
    let series = jobs_in_execution(&ex, &names);
    assert_eq!(series.len(), 2);
    assert_eq!(series[0].0, "node A");
    assert_eq!(series[0].1, vec![(0.0, 1.0), (5.0, 2.0), (10.0, 1.0), (20.0, 0.0)]);
    // A job ending as the next starts leaves the count at one, with no spike.
    assert_eq!(series[1].1, vec![(0.0, 1.0), (5.0, 1.0), (8.0, 0.0)]);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("running.svg");
    step_chart(&p, "Jobs in execution", "Time (s)", "Jobs", &series).unwrap();
    let svg = std::fs::read_to_string(&p).unwrap();
    assert!(svg.contains("node A") && svg.contains("node B") && svg.contains("Time (s)"));
    if let Ok(dir) = std::env::var("LIBRA_PLOT_KEEP") {
        std::fs::copy(&p, std::path::Path::new(&dir).join("step.svg")).unwrap();
    }
}

#[test]
fn empty_or_flat_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.svg");
    let none: Vec<Series> = vec![("a".into(), vec![(f64::NAN, 1.0)])];
    assert!(matches!(line_chart(&p, "t", "x", "y", &none), Err(PlotError::NoData { .. })));
    assert!(matches!(line_chart(&p, "t", "x", "y", &[]), Err(PlotError::NoData { .. })));
    // A single point or a flat line still gets a usable range.
    let flat: Vec<Series> = vec![("a".into(), vec![(1.0, 0.0)])];
    line_chart(&p, "t", "x", "y", &flat).unwrap();
    let bad = dir.path().join("no/such/dir/x.svg");
    let e = line_chart(&bad, "t", "x", "y", &flat).unwrap_err();
    assert!(matches!(e, PlotError::Draw { .. }), "{e}");
}
