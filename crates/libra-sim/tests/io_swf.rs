//! SWF reader and writer: the real traces, the Libra+$ subset facts, broken lines, round trips.

use libra_sim::swf::{
    read_swf, read_swf_from, write_swf, write_swf_to, LineErrorKind, ReadMode, SwfError, SwfHeader, SwfReader,
};
use std::path::PathBuf;

fn trace(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces").join(name);
    if p.exists() {
        Some(p)
    } else {
        println!("note: {} is absent; skipping this check", p.display());
        None
    }
}

const SDSC: &str = "SDSC-SP2-1998-4.2-cln.swf.gz";

#[test]
fn real_traces_parse_fully_with_the_readme_counts() {
    for (name, jobs, max_nodes, start) in [
        (SDSC, 59_715, 128, 893_466_664),
        ("KTH-SP2-1996-2.1-cln.swf.gz", 28_476, 100, -1),
        ("NASA-iPSC-1993-3.1-cln.swf.gz", 18_239, 128, 749_458_803),
    ] {
        let Some(p) = trace(name) else { continue };
        let t = read_swf(&p, ReadMode::Strict).unwrap();
        assert_eq!(t.records.len(), jobs, "{name}");
        assert_eq!(t.skipped_count, 0, "{name}");
        assert_eq!(t.header.max_nodes(), Some(max_nodes), "{name}");
        assert_eq!(t.header.max_procs(), Some(max_nodes), "{name}");
        if start > 0 {
            assert_eq!(t.header.unix_start_time(), Some(start), "{name}");
        } else {
            assert!(t.header.unix_start_time().is_some(), "{name}");
        }
        assert!(t.records.windows(2).all(|w| w[0].submit <= w[1].submit));
    }
}

#[test]
fn sdsc_header_is_parsed_with_continuations_and_fractions_kept() {
    let Some(p) = trace(SDSC) else { return };
    let t = read_swf(&p, ReadMode::Strict).unwrap();
    let h = &t.header;
    assert_eq!(h.version(), Some("2.2"));
    assert_eq!(h.computer(), Some("IBM SP2"));
    assert_eq!(h.max_jobs(), Some(73_496));
    let copyright = h.get("Copyright").unwrap();
    assert!(copyright.starts_with("JOBLOG Repository Data Usage Agreement:"));
    assert!(copyright.contains("Copyright 2000 The Regents of the University of\nCalifornia"));
    assert!(copyright.ends_with("referenced in any written or electronic publication."));
    assert_eq!(h.get_all("Queue").count(), 7);
    let info = h.get("Information").unwrap();
    assert_eq!(info.lines().count(), 2, "{info}");
    let note = h.get("Note").unwrap();
    assert!(note.contains("(944 jobs removed)"), "{note}");
    // Job 27 has 7.38 s of average CPU time.
    let j27 = t.records.iter().find(|r| r.job == 27).unwrap();
    assert_eq!(j27.avg_cpu_time, 7.38);
    assert_eq!(t.records.iter().filter(|r| r.run_time == -1).count(), 5_671);
}

#[test]
fn libraplus_subset_facts() {
    let Some(p) = trace(SDSC) else { return };
    let t = read_swf(&p, ReadMode::Strict).unwrap();
    let last = &t.records[t.records.len() - 5000..];
    assert_eq!(last[0].job, 68_497);
    assert_eq!(last[4999].job, 73_496);
    let n = last.len() as f64;
    let inter = (last[4999].submit - last[0].submit) as f64 / (n - 1.0);
    assert!((inter - 1969.0).abs() < 1.0, "mean inter-arrival {inter}");
    let procs = last.iter().map(|r| r.req_procs as f64).sum::<f64>() / n;
    assert!((procs - 16.9).abs() < 0.05, "mean procs {procs}");
    let run = last.iter().map(|r| r.run_time_or_zero() as f64).sum::<f64>() / n;
    assert!((run - 8671.0).abs() < 1.0, "mean runtime {run}");
    assert_eq!(last.iter().filter(|r| r.run_time == -1).count(), 466);
}

const GOOD: &str = "   1   0   5  100  4  90.5  -1  4  200  -1  1  7  1  -1  1  -1  -1  -1\n";

fn text(lines: &[&str]) -> String {
    let mut s = String::from("; Version: 2.2\n; MaxNodes: 8\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[test]
fn broken_lines_are_reported_with_their_line_numbers() {
    let body = text(&[
        GOOD.trim_end(),                                      // line 3
        "2 10 5 100 4 90 -1 4 200 -1 1 7 1 -1 1 -1 -1",       // 4: 17 fields
        "3 20 5 abc 4 90 -1 4 200 -1 1 7 1 -1 1 -1 -1 -1",    // 5: not a number
        "4 30 5 100 4 90 -1 4.5 200 -1 1 7 1 -1 1 -1 -1 -1",  // 6: fraction in field 8
        "5 40 5 100 4 90 -1 4 200 -1 1 7 1 -1 1 -1 -1 -1",    // 7: fine
        "6 5 5 100 4 90 -1 4 200 -1 1 7 1 -1 1 -1 -1 -1",     // 8: decreasing submit
        "",                                                   // 9: blank, ignored
        "7 40 5 100 4 90 -1 4 200 -1 1 7 1 -1 1 -1 -1 -7",    // 10: below -1
        "8 50 5 100 4 90 -1 4 200 -1 1 7 1 -1 1 -1 -1 -1",    // 11: fine
        "9 -1 5 100 4 90 -1 4 200 -1 1 7 1 -1 1 -1 -1 -1",    // 12: unknown submit
        "10 60 5 100 4 90 -1 4 200 -1 1 7 1 -1 1 -1 -1 -1 1", // 13: 19 fields
    ]);

    let mut strict = SwfReader::new(body.as_bytes(), ReadMode::Strict).unwrap();
    assert!(strict.next().unwrap().is_ok());
    let mut errors = Vec::new();
    for r in strict.by_ref() {
        if let Err(SwfError::Line(e)) = r {
            errors.push((e.line, e.kind));
        }
    }
    let lines: Vec<u64> = errors.iter().map(|e| e.0).collect();
    assert_eq!(lines, vec![4, 5, 6, 8, 10, 12, 13]);
    assert_eq!(errors[0].1, LineErrorKind::FieldCount { found: 17 });
    assert!(matches!(errors[1].1, LineErrorKind::NotANumber { field: 4, .. }));
    assert!(matches!(errors[2].1, LineErrorKind::NotAnInteger { field: 8, .. }));
    assert_eq!(errors[3].1, LineErrorKind::DecreasingSubmit { submit: 5, previous: 40 });
    assert!(matches!(errors[4].1, LineErrorKind::BelowUnknown { field: 18, .. }));
    assert_eq!(errors[5].1, LineErrorKind::UnknownSubmit);
    // The message names the line and the field.
    let msg = SwfError::Line(libra_sim::swf::SwfLineError { line: 5, kind: errors[1].1.clone() }).to_string();
    assert!(msg.contains("line 5") && msg.contains("Run Time") && msg.contains("abc"), "{msg}");

    // Strict read_all stops at the first bad line.
    match read_swf_from(body.as_bytes(), ReadMode::Strict) {
        Err(SwfError::Line(e)) => assert_eq!(e.line, 4),
        other => panic!("expected a line error, got {other:?}"),
    }

    let lenient = read_swf_from(body.as_bytes(), ReadMode::Lenient).unwrap();
    let jobs: Vec<i64> = lenient.records.iter().map(|r| r.job).collect();
    assert_eq!(jobs, vec![1, 5, 8]);
    let skipped: Vec<u64> = lenient.skipped.iter().map(|e| e.line).collect();
    assert_eq!(skipped, vec![4, 5, 6, 8, 10, 12, 13]);
    assert_eq!(lenient.skipped_count, 7);
}

#[test]
fn garbage_never_panics() {
    for s in [
        "",
        ";",
        "\u{0}\u{1}",
        "1 2 3",
        "; MaxNodes: x\n1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 1e999",
        "1 2 3 4 5 NaN 7 8 9 10 11 12 13 14 15 16 17 18",
        "99999999999999999999 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18",
    ] {
        let _ = read_swf_from(s.as_bytes(), ReadMode::Strict);
        let t = read_swf_from(s.as_bytes(), ReadMode::Lenient).unwrap();
        assert!(t.records.is_empty(), "{s:?}");
    }
    let bytes: &[u8] = b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 \xff\n";
    match read_swf_from(bytes, ReadMode::Strict) {
        Err(SwfError::Line(e)) => assert_eq!((e.line, e.kind), (1, LineErrorKind::NotText)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn write_then_read_round_trips() {
    let body = text(&[
        "; Note: a continued note",
        ";       on a second line",
        GOOD.trim_end(),
        "2 7 -1 -1 -1 -1 -1 16 3600 -1 5 3 1 -1 2 -1 -1 -1",
        "3 7 0 12 1 0.01 2048 1 60 4096 1 4 2 9 0 1 2 30",
    ]);
    let t = read_swf_from(body.as_bytes(), ReadMode::Strict).unwrap();
    assert_eq!(t.records.len(), 3);
    assert_eq!(t.header.get("Note"), Some("a continued note\non a second line"));
    let mut out = Vec::new();
    write_swf_to(&mut out, &t.header, &t.records).unwrap();
    let back = read_swf_from(out.as_slice(), ReadMode::Strict).unwrap();
    assert_eq!(back.records, t.records);
    assert_eq!(back.header, t.header);

    let dir = tempfile::tempdir().unwrap();
    for name in ["x.swf", "x.swf.gz"] {
        let p = dir.path().join(name);
        write_swf(&p, &t.header, &t.records).unwrap();
        let back = read_swf(&p, ReadMode::Strict).unwrap();
        assert_eq!(back.records, t.records, "{name}");
        assert_eq!(back.header.lines, t.header.lines, "{name}");
    }
}

#[test]
fn an_sdsc_excerpt_keeps_the_notice() {
    let Some(p) = trace(SDSC) else { return };
    let t = read_swf(&p, ReadMode::Strict).unwrap();
    let mut header = t.header.clone();
    header.add_note("excerpt: the last 5000 jobs");
    let last = &t.records[t.records.len() - 5000..];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("last5000.swf.gz");
    write_swf(&out, &header, last).unwrap();
    let back = read_swf(&out, ReadMode::Strict).unwrap();
    assert_eq!(back.records, last);
    assert_eq!(back.header.get("Copyright"), t.header.get("Copyright"));
    assert!(back.header.get_all("Note").any(|n| n == "excerpt: the last 5000 jobs"));
    assert_eq!(&back.header.lines[..t.header.lines.len()], &t.header.lines[..]);
}

#[test]
fn header_from_lines_matches_reader() {
    let h = SwfHeader::from_lines(["; MaxProcs: 64", "; UnixStartTime: 100", ";", ";   orphan"]);
    assert_eq!(h.max_procs(), Some(64));
    assert_eq!(h.unix_start_time(), Some(100));
    assert_eq!(h.max_nodes(), None);
    // An indented line after a blank comment line belongs to no label.
    assert_eq!(h.fields.last().map(|f| f.0.as_str()), Some(""));
}

#[test]
fn truncated_gzip_and_missing_files_are_errors() {
    let body = text(&[GOOD.trim_end(); 400]);
    let t = read_swf_from(body.as_bytes(), ReadMode::Strict).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.swf.gz");
    write_swf(&p, &t.header, &t.records).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    for mode in [ReadMode::Strict, ReadMode::Lenient] {
        match read_swf(&p, mode) {
            Err(SwfError::Read { line, .. }) => assert!(line >= 1),
            other => panic!("expected a read error, got {other:?}"),
        }
    }
    let e = read_swf(dir.path().join("absent.swf"), ReadMode::Strict).unwrap_err();
    assert!(matches!(e, SwfError::Open { .. }) && e.to_string().contains("absent.swf"));
}
