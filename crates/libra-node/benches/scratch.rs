//! What a scratch file system of its own costs a job (`libra_node::scratch`): the time to make
//! and mount one at the job's start (template copy, loop mount), or to take one made ahead
//! (`libra_node::scratch_pool`: rename and bind), and to detach and remove it, against a plain
//! directory, side by side in one run. Needs root and loop devices:
//!
//!     cargo bench -p libra-node --bench scratch
//!
//! Prints medians (and the spread) over rounds that alternate the two, so both see the same
//! machine.

use libra_node::{scratch, scratch_pool};
use std::time::Instant;

const ROUNDS: usize = 31;

fn main() {
    let base = std::env::temp_dir().join(format!("libra-scratch-bench-{}", std::process::id()));
    if let Err(e) = scratch::probe(&std::env::temp_dir()) {
        eprintln!("scratch file systems cannot be made here ({e}): nothing to measure");
        return;
    }
    std::fs::create_dir_all(&base).unwrap();
    let template = scratch::Template::make(&base, scratch::DEFAULT_MB).unwrap();
    let mut plain = (Vec::new(), Vec::new());
    let mut fs = (Vec::new(), Vec::new());
    let mut ahead = (Vec::new(), Vec::new());
    let pool = scratch_pool::Pool::start(&base, template.clone(), scratch_pool::READY).unwrap();
    for round in 0..ROUNDS {
        let record = base.join(format!("job-{round}"));
        let work = record.join("work");
        let t = Instant::now();
        std::fs::create_dir_all(&work).unwrap();
        plain.0.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::fs::remove_dir_all(&record).unwrap();
        plain.1.push(t.elapsed().as_secs_f64());

        std::fs::create_dir_all(&work).unwrap();
        let t = Instant::now();
        scratch::mount(&record, &work, &template, Some((65534, 65534))).unwrap();
        fs.0.push(t.elapsed().as_secs_f64());
        std::fs::write(work.join("out"), vec![1u8; 1 << 20]).unwrap();
        let t = Instant::now();
        scratch::unmount(&work);
        std::fs::remove_dir_all(&record).unwrap();
        fs.1.push(t.elapsed().as_secs_f64());

        // Made ahead: the pool refills between rounds, as between a node's starts.
        while pool.ready() < scratch_pool::READY {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::fs::create_dir_all(&work).unwrap();
        let t = Instant::now();
        assert!(pool.take(&record, &work, Some((65534, 65534))).unwrap());
        ahead.0.push(t.elapsed().as_secs_f64());
        std::fs::write(work.join("out"), vec![1u8; 1 << 20]).unwrap();
        let t = Instant::now();
        scratch::unmount(&work);
        std::fs::remove_dir_all(&record).unwrap();
        ahead.1.push(t.elapsed().as_secs_f64());
    }
    drop(pool);
    let _ = std::fs::remove_dir_all(&base);
    println!("{ROUNDS} rounds, {} MiB scratch, milliseconds: median (min - max)", scratch::DEFAULT_MB);
    println!("{:<44} {:>24} {:>24}", "", "make (or take)", "detach and remove");
    row("plain directory", &mut plain);
    row("file system of its own (template copy, loop)", &mut fs);
    row("file system of its own, made ahead (bind)", &mut ahead);
    let ratio = median(&mut fs.0) / median(&mut plain.0);
    println!(
        "making a file system costs {:.1} ms more per job start ({ratio:.0}x)",
        (median(&mut fs.0) - median(&mut plain.0)) * 1e3
    );
    println!(
        "taking one made ahead costs {:.2} ms more per job start ({:.1}x a plain directory; {:.0}x less than making one)",
        (median(&mut ahead.0) - median(&mut plain.0)) * 1e3,
        median(&mut ahead.0) / median(&mut plain.0),
        median(&mut fs.0) / median(&mut ahead.0)
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn row(what: &str, (make, remove): &mut (Vec<f64>, Vec<f64>)) {
    let cell = |v: &mut Vec<f64>| {
        let m = median(v);
        format!("{:.2} ({:.2} - {:.2})", m * 1e3, v[0] * 1e3, v[v.len() - 1] * 1e3)
    };
    println!("{what:<44} {:>24} {:>24}", cell(make), cell(remove));
}
