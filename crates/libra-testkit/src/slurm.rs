//! A real Slurm cluster for a test: `SlurmCluster::up` takes the machine-wide flock on
//! /var/tmp/libra-slurm.lock (two developers and the test suite share one machine, and Slurm's
//! daemons, /etc/slurm and the cgroups are one per machine), runs `scripts/slurm-cluster.sh up`
//! with the test's knobs, and `down` when dropped, then lets the lock go.
//!
//! Use it as `let Some(slurm) = SlurmCluster::up("test name", SlurmKnobs::default()) else { return };`:
//! where the machine cannot run Slurm (not root, no writable cgroup v1 cpu controller) the test
//! prints why and passes, unless LIBRA_REQUIRE_SLURM_TEST=1 (CI), where it fails.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const SLURM_LOCK: &str = "/var/tmp/libra-slurm.lock";

/// The environment knobs of scripts/slurm-cluster.sh (see the comment at its top).
#[derive(Default, Clone, Debug)]
pub struct SlurmKnobs {
    /// Number of nodes n1..nN (the script's default, 2, when None).
    pub nodes: Option<usize>,
    pub job_submit_lua: Option<PathBuf>,
    pub jobcomp_lua: Option<PathBuf>,
    /// Lines appended to slurm.conf.
    pub extra_conf: Option<PathBuf>,
}

pub struct SlurmCluster {
    /// Held for the cluster's whole life; closing it (on drop, after `down`) releases the flock.
    lock: File,
    pub nodes: Vec<String>,
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn cluster_script() -> PathBuf {
    workspace_root().join("scripts/slurm-cluster.sh")
}

/// Why this machine cannot run the test cluster, or None when it can.
pub fn slurm_unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (the cluster script installs packages and starts Slurm's daemons)".into());
    }
    let cpu = Path::new("/sys/fs/cgroup/cpu");
    // One name per call: the tests of one binary probe at once from threads of one process.
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = cpu.join(format!("libra-slurm-probe-{}-{n}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            None
        }
        Err(e) => Some(format!(
            "{} is not a writable cgroup v1 controller ({e}); the cluster uses cgroup v1",
            cpu.display()
        )),
    }
}

impl SlurmCluster {
    /// Takes the lock (waiting for other users of the machine), brings the cluster up with
    /// `knobs`. None (after printing why) when the machine cannot run Slurm and the test may skip.
    pub fn up(test: &str, knobs: SlurmKnobs) -> Option<SlurmCluster> {
        if let Some(why) = slurm_unavailable() {
            assert_ne!(
                std::env::var("LIBRA_REQUIRE_SLURM_TEST").as_deref(),
                Ok("1"),
                "LIBRA_REQUIRE_SLURM_TEST=1 but this machine cannot run the Slurm test cluster: {why}"
            );
            eprintln!("SKIPPED {test}: {why} (LIBRA_REQUIRE_SLURM_TEST=1 makes this a failure)");
            return None;
        }
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(SLURM_LOCK)
            .unwrap_or_else(|e| panic!("open {SLURM_LOCK}: {e}"));
        let waited = Instant::now();
        // SAFETY: a valid open descriptor; LOCK_EX blocks until the other holder lets go.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock {SLURM_LOCK}: {}", std::io::Error::last_os_error());
        if waited.elapsed() > Duration::from_secs(1) {
            eprintln!("{test}: waited {:.1}s for {SLURM_LOCK}", waited.elapsed().as_secs_f64());
        }
        let mut cmd = Command::new(cluster_script());
        cmd.arg("up");
        if let Some(n) = knobs.nodes {
            cmd.env("LIBRA_SLURM_NODES", n.to_string());
        }
        for (var, path) in [
            ("LIBRA_SLURM_JOB_SUBMIT_LUA", &knobs.job_submit_lua),
            ("LIBRA_SLURM_JOBCOMP_LUA", &knobs.jobcomp_lua),
            ("LIBRA_SLURM_EXTRA_CONF", &knobs.extra_conf),
        ] {
            match path {
                Some(p) => cmd.env(var, p),
                None => cmd.env_remove(var),
            };
        }
        // The cluster is built before the guard exists: if `up` fails half-way, stop what it
        // started before panicking (the guard's drop would not run).
        let out = cmd.output().expect("run scripts/slurm-cluster.sh up");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            let _ = Command::new(cluster_script()).arg("down").output();
            panic!("slurm-cluster.sh up failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        }
        // "slurm up: nodes n1 n2 (0.6s)"
        let nodes = stdout
            .lines()
            .find_map(|l| l.strip_prefix("slurm up: nodes "))
            .map(|rest| rest.split_whitespace().filter(|w| !w.starts_with('(')).map(String::from).collect())
            .unwrap_or_default();
        eprintln!("{test}: {}", stdout.trim());
        Some(SlurmCluster { lock, nodes })
    }

    /// Job ids Slurm still lists (pending, running or completing).
    pub fn queue(&self) -> Vec<String> {
        let out = Command::new("squeue").args(["-h", "-o", "%i"]).output().expect("squeue");
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
    }

    /// `scontrol show job ID` as key=value pairs (None once Slurm has forgotten the job).
    pub fn job(&self, id: &str) -> Option<std::collections::BTreeMap<String, String>> {
        let out = Command::new("scontrol").args(["show", "job", "-o", id]).output().expect("scontrol");
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        Some(
            text.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        match Command::new(cluster_script()).arg("down").output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!("slurm-cluster.sh down failed: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => eprintln!("slurm-cluster.sh down: {e}"),
        }
        // The flock goes with the descriptor when `lock` is closed right after this.
        let _ = &self.lock;
    }
}
