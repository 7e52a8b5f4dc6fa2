//! The agent's reaper (`proc::wait_any`, every child that ends) beside a tool the agent waits for
//! (`proc::run_tool`): in a process of its own, since the reaper takes any child of the process.

use libra_node::proc::{run_tool, wait_any};
use std::process::Command;

/// A tool run beside the agent's reaper keeps its exit: without `CHILDREN` the reaper takes
/// some of them and `output` fails with ECHILD.
#[test]
fn a_tool_keeps_its_exit_from_the_reaper() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reaped = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reaper = {
        let (stop, reaped) = (stop.clone(), reaped.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match wait_any() {
                    Some((pid, _)) => reaped.lock().unwrap().push(pid),
                    None => std::thread::yield_now(),
                }
            }
        })
    };
    let mut pids = Vec::new();
    for i in 0..100 {
        let out = run_tool(Command::new("sh").args(["-c", &format!("echo $$; exit {}", i % 3)])).unwrap();
        assert_eq!(out.status.code(), Some(i % 3));
        pids.push(String::from_utf8_lossy(&out.stdout).trim().parse::<i32>().unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reaper.join().unwrap();
    let reaped = reaped.lock().unwrap();
    assert!(pids.iter().all(|p| !reaped.contains(p)), "the reaper took a tool's exit");
}
