//! Properties of the readers and writers: any valid data round-trips exactly, and no input
//! makes a reader panic.

use libra_core::Money;
use libra_sim::swf::{read_swf_from, write_swf_to, ReadMode, SwfHeader, SwfRecord};
use libra_sim::workload::jobs_csv::{read_jobs_csv_from, write_jobs_csv_to};
use libra_sim::SimJob;
use proptest::prelude::*;

fn field() -> impl Strategy<Value = i64> {
    prop_oneof![Just(-1i64), 0i64..100, 0i64..2_000_000_000]
}

fn record() -> impl Strategy<Value = SwfRecord> {
    (
        proptest::collection::vec(field(), 17),
        prop_oneof![Just(-1.0f64), 0.0f64..1e7, (0i64..100_000).prop_map(|c| c as f64 / 100.0)],
        0i64..10_000,
    )
        .prop_map(|(f, cpu, gap)| SwfRecord {
            job: f[0],
            submit: gap,
            wait: f[1],
            run_time: f[2],
            alloc_procs: f[3],
            avg_cpu_time: cpu,
            used_memory: f[4],
            req_procs: f[5],
            req_time: f[6],
            req_memory: f[7],
            status: f[8],
            user: f[9],
            group: f[10],
            executable: f[11],
            queue: f[12],
            partition: f[13],
            preceding_job: f[14],
            think_time: f[15],
        })
}

fn job() -> impl Strategy<Value = SimJob> {
    (0.0f64..1e9, 0.0f64..1e8, 0.0f64..1e8, 1u32..100_000, 0.0f64..1e9, 0i64..10_000_000_000, any::<u32>())
        .prop_map(|(submit, runtime, estimate, procs, deadline, cents, user)| SimJob {
            id: 0,
            submit,
            runtime,
            estimate,
            procs,
            deadline,
            budget: Money::from_cents(cents),
            user,
            urgent: false,
        })
}

proptest! {
    #[test]
    fn swf_round_trips(mut recs in proptest::collection::vec(record(), 0..40)) {
        // Submit times as running sums of the drawn gaps: never decreasing.
        let mut t = 0;
        for r in &mut recs {
            t += r.submit;
            r.submit = t;
        }
        let header = SwfHeader::from_lines(["; Version: 2.2", "; MaxNodes: 128", ";   more", ";"]);
        let mut out = Vec::new();
        write_swf_to(&mut out, &header, &recs).unwrap();
        let back = read_swf_from(out.as_slice(), ReadMode::Strict).unwrap();
        prop_assert_eq!(back.records, recs);
        prop_assert_eq!(back.header, header);
    }

    #[test]
    fn swf_reader_never_panics(text in "(;[ -~]{0,20}\n|[-0-9. a-z]{0,60}\n){0,8}") {
        let _ = read_swf_from(text.as_bytes(), ReadMode::Strict);
        let lenient = read_swf_from(text.as_bytes(), ReadMode::Lenient).unwrap();
        prop_assert!(lenient.skipped.iter().all(|e| e.line >= 1));
    }

    #[test]
    fn jobs_csv_round_trips(mut jobs in proptest::collection::vec(job(), 0..40)) {
        for (i, j) in jobs.iter_mut().enumerate() {
            j.id = i as u64 * 7 + 3;
        }
        let mut out = Vec::new();
        write_jobs_csv_to(&mut out, &jobs).unwrap();
        let back = read_jobs_csv_from(out.as_slice()).unwrap();
        let mut want = jobs.clone();
        want.sort_by(|a, b| a.submit.total_cmp(&b.submit).then(a.id.cmp(&b.id)));
        prop_assert_eq!(back, want);
    }

    #[test]
    fn jobs_csv_reader_never_panics(text in "(id,submit,runtime,procs,deadline,budget\n)?([-0-9.,a-z\" ]{0,40}\n){0,6}") {
        let _ = read_jobs_csv_from(text.as_bytes());
    }
}
