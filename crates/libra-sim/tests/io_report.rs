//! Report writers: CSV, JSON, Markdown and terminal tables from one table of strings.

use libra_sim::report::{
    print_table, to_json_pretty, to_markdown, to_terminal, write_csv, write_csv_to, write_json,
    write_markdown, ReportError, Table,
};

fn table() -> Table {
    let mut t = Table::new(["policy", "qos_satisfaction", "profit | share", "note"]);
    t.push_row(["libra+$", "0.712", "12.5", "best"]).unwrap();
    t.push_row(["FCFS-BF", "0.41", "7", "a|b"]).unwrap();
    t.push_row(["EDF-BF", "1", "", "x, \"quoted\""]).unwrap();
    t
}

#[test]
fn rows_must_match_the_headers() {
    let mut t = table();
    let e = t.push_row(["only", "two"]).unwrap_err();
    assert!(matches!(e, ReportError::RowLength { row: 4, found: 2, expected: 4 }), "{e}");
    t.rows.push(vec!["x".into()]);
    assert!(to_markdown(&t).is_err());
    assert!(to_terminal(&t).is_err());
    assert!(write_csv_to(Vec::new(), &t).is_err());
}

#[test]
fn csv_round_trips_through_the_csv_crate() {
    let t = table();
    let mut out = Vec::new();
    write_csv_to(&mut out, &t).unwrap();
    let mut r = csv::Reader::from_reader(out.as_slice());
    let headers: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(headers, t.headers);
    let rows: Vec<Vec<String>> = r.records().map(|x| x.unwrap().iter().map(String::from).collect()).collect();
    assert_eq!(rows, t.rows);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.csv");
    write_csv(&p, &t).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), out);
    let e = write_csv(dir.path().join("no/dir/t.csv"), &t).unwrap_err();
    assert!(e.to_string().contains("t.csv"), "{e}");
}

#[test]
fn markdown_is_a_pipe_table_with_numbers_right_aligned() {
    let md = to_markdown(&table()).unwrap();
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(lines[0].starts_with("| policy "), "{md}");
    // Column 2 is numeric (right-aligned), columns 1 and 4 are text.
    let seps: Vec<&str> = lines[1].trim_matches('|').split('|').map(str::trim).collect();
    assert!(seps[0].starts_with('-') && !seps[0].ends_with(':'), "{md}");
    assert!(seps[1].ends_with(':') && seps[2].ends_with(':'), "{md}");
    assert!(!seps[3].ends_with(':'), "{md}");
    // A pipe inside a cell is escaped; every line has the same number of unescaped pipes.
    assert!(md.contains("a\\|b") && md.contains("profit \\| share"), "{md}");
    let pipes = |l: &str| l.replace("\\|", "").matches('|').count();
    assert!(lines.iter().all(|l| pipes(l) == 5), "{md}");
    // All rows are padded to one width.
    assert!(lines.iter().all(|l| l.chars().count() == lines[0].chars().count()), "{md}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.md");
    write_markdown(&p, Some("Figure 2"), &table()).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.starts_with("# Figure 2\n\n| policy"));
}

#[test]
fn json_writers() {
    let t = table();
    let v = t.to_json_value();
    assert_eq!(v[0]["policy"], "libra+$");
    assert_eq!(v[0]["qos_satisfaction"], 0.712);
    assert_eq!(v[1]["profit | share"], 7);
    assert_eq!(v[2]["profit | share"], "");
    assert_eq!(v[2]["qos_satisfaction"], 1);
    let text = to_json_pretty(&serde_json::json!({"points": v})).unwrap();
    assert!(text.contains("\n  \"points\": [\n") && text.ends_with("}\n"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.json");
    write_json(&p, &serde_json::json!({"points": v})).unwrap();
    let back: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(back["points"], v);
}

#[test]
fn terminal_table_shows_every_cell() {
    let t = table();
    let s = to_terminal(&t).unwrap();
    for cell in t.headers.iter().chain(t.rows.iter().flatten()) {
        assert!(s.contains(cell.as_str()), "missing {cell} in\n{s}");
    }
    print_table(&t).unwrap();
}
