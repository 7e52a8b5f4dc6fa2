//! The Slurm test cluster itself (scripts/slurm-cluster.sh through tests/common/slurm.rs): it comes
//! up with every node idle, runs a batch job inside Slurm's cgroups on the partition it promises,
//! honours the knobs, and `down` leaves no daemon behind.

mod common;

use common::slurm::*;
use common::wait_until;
use std::process::Command;

fn status_ok() -> bool {
    Command::new(cluster_script()).arg("status").output().unwrap().status.success()
}

#[test]
fn the_slurm_test_cluster_comes_up_runs_a_job_in_its_cgroups_and_goes_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    // A knob: extra slurm.conf lines are appended (the last value of a key wins).
    let extra = dir.path().join("extra.conf");
    std::fs::write(&extra, "MinJobAge=123\n").unwrap();
    let knobs = SlurmKnobs { nodes: Some(2), extra_conf: Some(extra), ..Default::default() };
    let Some(slurm) = SlurmCluster::up("slurm_script_e2e", knobs) else { return };
    assert_eq!(slurm.nodes, ["n1", "n2"]);
    assert!(status_ok(), "status must exit 0 while the cluster is up");
    let conf = Command::new("scontrol").args(["show", "config"]).output().unwrap();
    let conf = String::from_utf8_lossy(&conf.stdout);
    assert!(conf.lines().any(|l| l.starts_with("MinJobAge") && l.contains("123")), "{conf}");
    let part = Command::new("scontrol").args(["show", "partition", "libra"]).output().unwrap();
    let part = String::from_utf8_lossy(&part.stdout);
    assert!(part.contains("Default=YES") && part.contains("OverSubscribe=FORCE:4"), "{part}");

    let out = dir.path().join("job-%j.out");
    let sb = Command::new("sbatch")
        .args(["--parsable", "-c", "1", "-o"])
        .arg(&out)
        .args(["--wrap", "cat /proc/self/cgroup; echo node=$SLURMD_NODENAME"])
        .output()
        .unwrap();
    assert!(sb.status.success(), "sbatch: {}", String::from_utf8_lossy(&sb.stderr));
    let id = String::from_utf8_lossy(&sb.stdout).trim().to_string();
    wait_until("the job completes", || {
        slurm.job(&id).filter(|j| j.get("JobState").map(String::as_str) == Some("COMPLETED"))
    });
    let text = std::fs::read_to_string(dir.path().join(format!("job-{id}.out"))).unwrap();
    // proctrack/cgroup + task/cgroup: the batch step sits in Slurm's per-node cpuset and freezer groups.
    assert!(
        text.lines().any(|l| l.contains(":cpuset:/slurm_n") && l.contains(&format!("/job_{id}/"))),
        "{text}"
    );
    assert!(text.lines().any(|l| l.contains(":freezer:/slurm_n")), "{text}");
    assert!(text.contains("node=n1") || text.contains("node=n2"), "{text}");

    let pids: Vec<i32> = std::fs::read_dir("/var/tmp/libra-slurm/pids")
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap().trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 4, "munged, slurmctld and two slurmd: {pids:?}");
    drop(slurm);
    assert!(!status_ok(), "status must exit non-zero once the cluster is down");
    for pid in pids {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "daemon {pid} outlived down");
    }
}

/// The Lua knobs: LIBRA_SLURM_JOB_SUBMIT_LUA's script decides every submission (a refusal's
/// message reaches sbatch's user), LIBRA_SLURM_JOBCOMP_LUA's hears of every job's end; three
/// nodes with LIBRA_SLURM_NODES.
#[test]
fn the_lua_knobs_install_job_submit_and_jobcomp_scripts_that_slurm_runs() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("ended.txt");
    let submit = dir.path().join("submit.lua");
    std::fs::write(
        &submit,
        "function slurm_job_submit(job_desc, part_list, submit_uid)\n\
         \x20 if job_desc.comment ~= 'ok' then\n\
         \x20   slurm.log_user('refused by the test policy: say --comment=ok')\n\
         \x20   return slurm.ESLURM_ACCESS_DENIED\n\
         \x20 end\n\
         \x20 return slurm.SUCCESS\n\
         end\n\
         function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)\n  return slurm.SUCCESS\nend\n\
         return slurm.SUCCESS\n",
    )
    .unwrap();
    let jobcomp = dir.path().join("jobcomp.lua");
    std::fs::write(
        &jobcomp,
        format!(
            "function slurm_jobcomp_log_record(job)\n\
             \x20 local f = io.open('{}', 'a')\n\
             \x20 f:write(job.job_id .. ' ' .. tostring(job.exit_code) .. '\\n')\n\
             \x20 f:close()\n\
             \x20 return slurm.SUCCESS\n\
             end\n\
             function slurm_jobcomp_get_jobs(job_cond)\n  return {{}}\nend\n\
             return slurm.SUCCESS\n",
            record.display()
        ),
    )
    .unwrap();
    let knobs = SlurmKnobs {
        nodes: Some(3),
        job_submit_lua: Some(submit),
        jobcomp_lua: Some(jobcomp),
        ..Default::default()
    };
    let Some(slurm) = SlurmCluster::up("slurm_script_e2e", knobs) else { return };
    assert_eq!(slurm.nodes, ["n1", "n2", "n3"]);
    let refused = Command::new("sbatch").args(["-o", "/dev/null", "--wrap", "true"]).output().unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("refused by the test policy"), "{err}");
    let sb = Command::new("sbatch")
        .args(["--parsable", "--comment=ok", "-o", "/dev/null", "--wrap", "exit 3"])
        .output()
        .unwrap();
    assert!(sb.status.success(), "{}", String::from_utf8_lossy(&sb.stderr));
    let id = String::from_utf8_lossy(&sb.stdout).trim().to_string();
    let line = wait_until("jobcomp.lua records the job's end", || {
        std::fs::read_to_string(&record).ok().filter(|t| t.starts_with(&format!("{id} ")))
    });
    // Slurm's exit code is a wait status: exit 3 is 3 << 8.
    assert_eq!(line.lines().next(), Some(format!("{id} 768").as_str()), "the job exited 3");
}
