//! A measurement, not a test (ignored by default): how long reads (a user's job list and
//! balance) and `/api/health` take while four clients submit as fast as they can, each
//! submission durable (full sync) before it is answered. Run it with
//! `cargo test -p libra-server --release --test read_latency -- --ignored --nocapture`.

mod common;

use libra_api::{Client, SubmitRequest, UserAdd};
use libra_core::{JobSpec, Money};
use libra_server::start_background;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn reads_during_a_submission_flood() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::test_config(dir.path());
    config.sync_full = true;
    config.submit_rate = 1e6;
    config.submit_burst = u32::MAX;
    config.read_rate = 1e6;
    config.read_burst = u32::MAX;
    config.max_active_jobs = u32::MAX;
    let bg = start_background(config).unwrap();
    let url = format!("http://{}", bg.addr);
    let admin = Client::new(&url, Some(Client::new(&url, None).login("admin", "admin-pw").unwrap().token));
    for u in ["writer", "reader"] {
        admin.user_add(&UserAdd::new(u, &format!("pw-{u}"), false)).unwrap();
        admin.credit(u, Money::from_credits(1_000_000)).unwrap();
    }
    let writer = Client::new(&url, Some(Client::new(&url, None).login("writer", "pw-writer").unwrap().token));
    let reader = Client::new(&url, Some(Client::new(&url, None).login("reader", "pw-reader").unwrap().token));

    let stop = Arc::new(AtomicBool::new(false));
    let submitted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let flood: Vec<_> = (0..4)
        .map(|_| {
            let (w, stop, n) = (writer.clone(), stop.clone(), submitted.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let req = SubmitRequest::new(
                        JobSpec::simple(1.0, 1e6, Money::from_credits(1)),
                        vec!["true".into()],
                    );
                    let _ = w.submit(&req);
                    n.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let time = |f: &dyn Fn()| {
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64() * 1000.0
    };
    let (mut reads, mut health) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for _ in 0..200 {
        reads.push(time(&|| {
            reader.jobs(false).unwrap();
        }));
        reads.push(time(&|| {
            reader.balance().unwrap();
        }));
        health.push(time(&|| {
            let _: Result<String, _> =
                ureq::get(&format!("{url}/api/health")).call().map(|r| r.into_string().unwrap());
        }));
    }
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for f in flood {
        f.join().unwrap();
    }
    reads.sort_by(f64::total_cmp);
    health.sort_by(f64::total_cmp);
    println!(
        "submissions during the reads: {:.0}/s",
        submitted.load(Ordering::Relaxed) as f64 / (elapsed + 0.5)
    );
    for (what, v) in [("reads (job list, balance)", &reads), ("/api/health", &health)] {
        println!(
            "{what}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
            percentile(v, 0.5),
            percentile(v, 0.99),
            v[v.len() - 1],
            v.len()
        );
    }
}
