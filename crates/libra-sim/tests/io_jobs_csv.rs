//! The explicit job list: parsing, errors that name line and column, round trips.

use libra_core::Money;
use libra_sim::workload::jobs_csv::{read_jobs_csv_from, write_jobs_csv_to, JobsCsvError};
use libra_sim::workload::{read_jobs_csv, write_jobs_csv, LibraBatch, SimJob};

fn parse(s: &str) -> Result<Vec<SimJob>, JobsCsvError> {
    read_jobs_csv_from(s.as_bytes())
}

const HEADER: &str = "id,submit,runtime,estimate,procs,deadline,budget,user\n";

#[test]
fn reads_a_list_and_sorts_it_by_submit() {
    let jobs = parse(&format!(
        "{HEADER}2,100,50,40,4,300,12.5,7\n1, 10 ,20,20,1,60,500,3\n# a comment\n3,100,5,,2,10,0.07,\n"
    ))
    .unwrap();
    let ids: Vec<u64> = jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    assert_eq!(jobs[0].submit, 10.0);
    assert_eq!(jobs[1].estimate, 40.0);
    assert_eq!(jobs[1].procs, 4);
    assert_eq!(jobs[1].deadline, 300.0);
    assert_eq!(jobs[1].budget, Money::from_cents(1250));
    assert_eq!(jobs[1].user, 7);
    // Empty optional cells take their defaults.
    assert_eq!(jobs[2].estimate, 5.0);
    assert_eq!(jobs[2].user, 0);
    assert_eq!(jobs[2].budget, Money::from_cents(7));
}

#[test]
fn columns_may_come_in_any_order_and_optional_ones_may_be_left_out() {
    let jobs = parse("budget,deadline,procs,runtime,submit,id\n3,30,2,10,0,9\n").unwrap();
    assert_eq!(jobs.len(), 1);
    let j = &jobs[0];
    assert_eq!((j.id, j.procs, j.runtime, j.estimate), (9, 2, 10.0, 10.0));
    assert_eq!(j.budget, Money::from_credits(3));
}

fn err(s: &str) -> String {
    parse(s).unwrap_err().to_string()
}

#[test]
fn errors_name_the_line_the_column_and_what_is_accepted() {
    let e = err(&format!("{HEADER}1,0,10,10,1,60,5,1\n2,0,-3,10,1,60,5,1\n"));
    assert!(e.contains("line 3") && e.contains("'runtime'") && e.contains("'-3'"), "{e}");
    assert!(e.contains("seconds from 0"), "{e}");

    let e = err(&format!("{HEADER}1,0,10,10,0,60,5,1\n"));
    assert!(e.contains("line 2") && e.contains("'procs'") && e.contains("from 1"), "{e}");

    let e = err(&format!("{HEADER}1,0,10,10,1,60,5.123,1\n"));
    assert!(e.contains("'budget'") && e.contains("two decimals"), "{e}");

    let e = err(&format!("{HEADER}1,0,10,10,1,60,-5,1\n"));
    assert!(e.contains("'budget'"), "{e}");

    let e = err(&format!("{HEADER}1,1e30,10,10,1,60,5,1\n"));
    assert!(e.contains("'submit'") && e.contains("1e10"), "{e}");

    let e = err(&format!("{HEADER}1,0,NaN,10,1,60,5,1\n"));
    assert!(e.contains("'runtime'"), "{e}");

    let e = err(&format!("{HEADER}x,0,10,10,1,60,5,1\n"));
    assert!(e.contains("'id'") && e.contains("whole number"), "{e}");

    let e = err(&format!("{HEADER}1,0,10,10,1,,5,1\n"));
    assert!(e.contains("'deadline'") && e.contains("''"), "{e}");

    let e = err(&format!("{HEADER}1,0,10,10,1,60,5\n"));
    assert!(e.contains("line 2") && e.contains("7 values") && e.contains("8 columns"), "{e}");

    let e = err(&format!("{HEADER}4,0,10,10,1,60,5,1\n5,0,10,10,1,60,5,1\n4,0,1,1,1,6,5,1\n"));
    assert!(
        matches!(
            parse(&format!("{HEADER}4,0,10,10,1,60,5,1\n4,0,1,1,1,6,5,1\n")),
            Err(JobsCsvError::DuplicateId { id: 4, line: 3, first_line: 2 })
        ),
        "{e}"
    );
    assert!(e.contains("line 4") && e.contains("line 2"), "{e}");
}

#[test]
fn header_errors() {
    let e = err("id,submit,runtime,procs,deadline,budget,colour\n");
    assert!(e.contains("unknown column 'colour'") && e.contains("accepted columns"), "{e}");
    let e = err("id,submit,runtime,procs,deadline\n");
    assert!(e.contains("'budget' is missing"), "{e}");
    let e = err("id,submit,runtime,procs,deadline,budget,id\n");
    assert!(e.contains("'id' appears twice"), "{e}");
    assert!(matches!(parse(""), Err(JobsCsvError::NoHeader)));
}

#[test]
fn write_then_read_is_exact() {
    let mut jobs = LibraBatch::batch2().generate(5);
    jobs.reverse(); // the writer sorts
    let mut out = Vec::new();
    write_jobs_csv_to(&mut out, &jobs).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(text.starts_with(HEADER));
    let back = read_jobs_csv_from(out.as_slice()).unwrap();
    jobs.reverse();
    assert_eq!(back, jobs);

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("jobs.csv");
    write_jobs_csv(&p, &jobs).unwrap();
    assert_eq!(read_jobs_csv(&p).unwrap(), jobs);
    let missing = read_jobs_csv(dir.path().join("nope.csv")).unwrap_err();
    assert!(missing.to_string().contains("nope.csv"));
}
