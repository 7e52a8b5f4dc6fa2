//! What a /tmp of its own costs a job (`libra node --tmp-mb`): the time from the launch of a
//! program that does nothing to its end, with the node's /tmp and with a tmpfs of its own in a
//! mount namespace of its own (without copies of the two file systems made ahead beside it),
//! side by side in one run (rounds alternate the two, so both see the same machine). Needs root:
//!
//!     cargo bench -p libra-node --bench private_tmp
//!
//! Prints medians (and the spread).

use libra_node::proc::{can_give_private_tmp, launch, try_reap, Launch};
use std::time::Instant;

const ROUNDS: usize = 51;

fn main() {
    if let Err(e) = can_give_private_tmp() {
        eprintln!("jobs cannot be given a /tmp of their own here ({e}): nothing to measure");
        return;
    }
    // Outside /tmp, which a job with a /tmp of its own does not see. An agent's work directory:
    // the job's own directory, and two file systems made ahead beside it (`scratch_pool::READY`),
    // which the job's namespace detaches (`libra_node::beside`), as it does on a node.
    let dir = tempfile::Builder::new().prefix("libra-bench-").tempdir_in("/var/lib").unwrap();
    let record = dir.path().join("job-1");
    std::fs::create_dir(&record).unwrap();
    for n in 0..2 {
        let at = dir.path().join(libra_node::scratch_pool::POOL_DIR).join(n.to_string());
        std::fs::create_dir_all(&at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mounting a tmpfs on {}", at.display());
    }
    let argv = vec!["/bin/true".to_string()];
    let out = record.join("o");
    let run = |tmp_mb: Option<u64>| -> f64 {
        let t = Instant::now();
        let pid =
            launch(&Launch { tmp_mb, record: Some(&record), ..Launch::plain(&argv, &record, &out) }).unwrap();
        loop {
            if let Some(e) = try_reap(pid) {
                assert_eq!(e.code, Some(0));
                break;
            }
            std::hint::spin_loop();
        }
        t.elapsed().as_secs_f64()
    };
    let (mut shared, mut own) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        shared.push(run(None));
        own.push(run(Some(1024)));
    }
    println!("{ROUNDS} rounds of /bin/true from launch to exit, milliseconds: median (min - max)");
    row("the node's /tmp", &mut shared);
    row("a /tmp of its own (1024 MiB tmpfs)", &mut own);
    let (s, o) = (median(&mut shared), median(&mut own));
    println!("a /tmp of its own costs {:.2} ms more per job start ({:.2}x)", (o - s) * 1e3, o / s);
    libra_node::scratch::unmount_all_under(dir.path());
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn row(what: &str, v: &mut [f64]) {
    let m = median(v);
    println!("{what:<40} {:.2} ({:.2} - {:.2})", m * 1e3, v[0] * 1e3, v[v.len() - 1] * 1e3);
}
