//! The command line at its edges, on the built binary: a reader that goes away early, tables on
//! a terminal and in a pipe, a job script that is not there, where a standalone sweep keeps its
//! database, daemons that must not die of SIGPIPE, and errors that name each cause once.

use libra_testkit::{free_port, wait_until, Scratch};
use std::fs::File;
use std::io::Read;
use std::os::unix::io::FromRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const EXE: &str = env!("CARGO_BIN_EXE_libra");

/// The test's own directory, removed when the test ends (passed or failed).
fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("cli-{name}"))
}

/// `libra ARGS` with nothing of the user's: no saved login, no server, its own data directory.
fn libra(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(EXE);
    c.args(args)
        .current_dir(dir)
        .env("LIBRA_CONFIG_DIR", dir.join("config"))
        .env("LIBRA_DATA_DIR", dir.join("data"))
        .env_remove("LIBRA_SERVER")
        .env_remove("LIBRA_TOKEN")
        .env_remove("LIBRA_BROKER_DB")
        .stdin(Stdio::null());
    c
}

/// A plan whose table of first jobs is wide: long text values in four columns.
const WIDE_PLAN: &str = "parameter alpha text select anyof \"the first of several rather long values\" \"b\"
parameter beta text select anyof \"another value that takes up a good deal of room\"
parameter gamma text select anyof \"and a third, so that the row is far wider than sixty columns\"
parameter delta integer range from 1 to 2 step 1
task main
    exec true
endtask
";

#[test]
fn printing_into_a_pipe_closed_early_ends_quietly() {
    let dir = scratch("pipe");
    std::fs::write(dir.join("plan.pln"), WIDE_PLAN).unwrap();
    let man = dir.join("man").display().to_string();
    for args in [
        &["completions", "zsh"][..],
        &["completions", "bash"],
        &["completions", "fish"],
        &["man", "--out", &man],
        &["sweep", "check", "plan.pln"],
        &["sim", "experiment", "list"],
    ] {
        let mut child = libra(&dir, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // `| head -0`: the reader is gone before the first line is written.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.is_empty(), "libra {args:?} complained about a closed stdout: {err}");
        assert!(
            o.status.success() || o.status.signal() == Some(libc::SIGPIPE),
            "libra {args:?} ended {:?}",
            o.status
        );
    }
}

/// Whether SIGPIPE is ignored by process `pid` (the `SigIgn` mask of /proc/PID/status).
fn ignores_sigpipe(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).unwrap().trim();
    u64::from_str_radix(mask, 16).unwrap() & (1 << (libc::SIGPIPE - 1)) != 0
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn daemons_and_sweep_engines_keep_sigpipe_ignored() {
    let dir = scratch("daemons");
    let port = free_port();
    let db = dir.join("server.db").display().to_string();
    let server = Killed(
        libra(&dir, &["server", "--listen", &format!("127.0.0.1:{port}"), "--db", &db])
            .args(["--no-fsync"])
            .env("LIBRA_JOIN_TOKEN", "test-join-token")
            .env("LIBRA_ADMIN_PASSWORD", "pw")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut server = server;
    wait_until("the server", || {
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!("the server ended: {status}");
        }
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    assert!(ignores_sigpipe(server.0.id()), "a peer closing a socket would kill the server");
    drop(server);

    // A standalone sweep runs its engine in the `libra sweep run` process.
    std::fs::write(
        dir.join("plan.pln"),
        "parameter x integer range from 1 to 3 step 1\ntask main\n    exec true\nendtask\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("res.toml"),
        "[[resource]]\nname = \"q\"\nkind = \"testqueue\"\nslots = 1\nprice = 1\nwall = 10\ntime_scale = 0.1\n",
    )
    .unwrap();
    let sweep = Killed(
        libra(&dir, &["sweep", "run", "plan.pln", "-r", "res.toml", "--deadline", "10m", "--budget", "1000"])
            .args(["--db", "engine.db"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The engine runs once the sweep is in its database.
    wait_until("the sweep's database", || dir.join("engine.db").exists().then_some(()));
    assert!(ignores_sigpipe(sweep.0.id()), "a closed pipe or socket would kill the sweep's engine");
    drop(sweep);
}

/// A plan of two `true` jobs (`plan.pln`) and one fast test queue (`res.toml`) in `dir`.
fn two_job_sweep(dir: &Path) {
    std::fs::write(
        dir.join("plan.pln"),
        "parameter x integer range from 1 to 2 step 1\ntask main\n    exec true\nendtask\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("res.toml"),
        "[[resource]]\nname = \"q\"\nkind = \"testqueue\"\nwall = 1\ntime_scale = 0.01\n",
    )
    .unwrap();
}

/// `two_job_sweep`, started as sweep 1 (`--detach`: its engine runs on in the background).
fn start_two_job_sweep(dir: &Path) {
    two_job_sweep(dir);
    let o = libra(dir, &["sweep", "run", "plan.pln", "-r", "res.toml", "--deadline", "10m", "--budget", "9"])
        .arg("--detach")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_standalone_sweep_keeps_its_database_in_libra_data_dir() {
    let dir = scratch("datadir");
    start_two_job_sweep(&dir);
    assert!(dir.join("data/broker.db").is_file(), "no broker.db in LIBRA_DATA_DIR");
    // And every later command finds it there.
    let o = libra(&dir, &["sweep", "status", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list["experiments"].as_array().map(Vec::len), Some(1), "{list}");
}

/// A negative sweep budget, or one past the largest a job may have, is refused by its flag, by
/// every command that takes one, before a database is made (`sweep simulate` planned with one,
/// "cost 0.00 of -1.00").
#[test]
fn a_negative_or_absurd_sweep_budget_is_refused_by_every_command_that_takes_one() {
    let dir = scratch("budget");
    two_job_sweep(&dir);
    for (budget, says) in [
        ("-1", "is negative: a budget is zero or more credits"),
        ("2000000000000", "at most 1000000000000 credits"),
    ] {
        let flag = format!("--budget={budget}");
        let common = ["plan.pln", "-r", "res.toml", "--deadline", "10m", &flag];
        let set = if budget.starts_with('-') { "-0.01" } else { budget };
        for args in [
            [&["sweep", "simulate"][..], &common].concat(),
            [&["sweep", "run"][..], &common].concat(),
            vec!["sweep", "set-budget", "1", "--", set],
        ] {
            let o = libra(&dir, &args).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{args:?} was accepted: {}", String::from_utf8_lossy(&o.stdout));
            assert!(err.contains(says), "{args:?}: {err}");
            assert!(!dir.join("data/broker.db").exists(), "{args:?} made a database");
        }
    }
}

/// A state no sweep job can be in is refused with the states, and a sweep that is not there is
/// named: both showed an empty table, as if the sweep had no such jobs.
#[test]
fn sweep_results_refuses_a_state_that_is_not_one_and_a_sweep_that_is_not_there() {
    let dir = scratch("results-state");
    let o = libra(&dir, &["sweep", "results", "1", "--state", "finished"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(err.contains("'finished'") && err.contains("pending, running, done, failed, cancelled"), "{err}");
    // Before any sweep, no database: asked about a sweep, the command names where it looked and
    // makes nothing there (a --db with a typo left an empty database behind); the list is empty.
    for args in [&["sweep", "results", "1"][..], &["sweep", "status", "1"], &["sweep", "pause", "1"]] {
        let o = libra(&dir, args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("no sweep 1: there is no broker database at"),
            "{args:?}: {err}"
        );
    }
    let o = libra(&dir, &["sweep", "status", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list["experiments"], serde_json::json!([]));
    assert!(!dir.join("data/broker.db").exists(), "a read made the database");
    start_two_job_sweep(&dir);
    let o = libra(&dir, &["sweep", "results", "2"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("no sweep 2"), "{err}{}", String::from_utf8_lossy(&o.stdout));
    let o = libra(&dir, &["sweep", "results", "1", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `sweep simulate --svg` into a missing directory, or onto a directory, is refused before the
/// plan is simulated, by the flag (it was the plotting library's "backend error" afterwards).
#[test]
fn sweep_simulate_refuses_an_svg_path_it_cannot_write() {
    let dir = scratch("simulate-svg");
    two_job_sweep(&dir);
    std::fs::create_dir(dir.join("plots")).unwrap();
    for (svg, says) in [("no-such-dir/x.svg", "is not a directory"), ("plots", "is a directory")] {
        let args = [
            "sweep",
            "simulate",
            "plan.pln",
            "-r",
            "res.toml",
            "--deadline",
            "10m",
            "--budget",
            "9",
            "--svg",
            svg,
        ];
        let o = libra(&dir, &args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(&format!("--svg {svg}: ")) && err.contains(says),
            "{svg}: {err}"
        );
    }
}

/// `sweep bench`'s counts out of range are refused by their flag with the range (0 rounds ran
/// one, quietly).
#[test]
fn sweep_bench_counts_out_of_range_are_refused_by_flag() {
    let dir = scratch("bench-flags");
    for (flag, value, range) in [
        ("--rounds", "0", "1..=100"),
        ("--rounds", "101", "1..=100"),
        ("--jobs", "0", "1..=10000000"),
        ("--slots", "0", "1..=100000"),
    ] {
        let o = libra(&dir, &["sweep", "bench", "--no-xargs", flag, value]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{flag} {value} ran: {}", String::from_utf8_lossy(&o.stdout));
        assert!(
            err.contains(flag) && err.contains(&format!("{value} is not in {range}")),
            "{flag} {value}: {err}"
        );
    }
}

/// `nan` and `inf` are refused at parsing where a number goes to the server or sizes a node:
/// sent as JSON they arrived as null, as if not given (`admin pricing --beta nan` changed
/// nothing and said so as a success), and `up` took a NaN capacity for the default. No server
/// is needed: nothing may be sent.
#[test]
fn numbers_that_are_not_finite_are_refused_before_anything_is_sent() {
    let dir = scratch("finite");
    for (args, flag) in [
        (&["admin", "pricing", "--beta", "nan"][..], "--beta"),
        (&["admin", "pricing", "--alpha", "inf"], "--alpha"),
        (&["admin", "pricing", "--libra-gamma", "-inf"], "--libra-gamma"),
        (&["admin", "pricing", "--libra-delta", "NaN"], "--libra-delta"),
        (&["admin", "pricing", "--price-base", "inf", "--node", "n1"], "--price-base"),
        (&["up", "--cpus-per-node", "nan", "--no-demo", "--exit"], "--cpus-per-node"),
    ] {
        let o = libra(&dir, args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} was accepted: {}", String::from_utf8_lossy(&o.stdout));
        assert!(err.contains(flag) && err.contains("is not a finite number"), "{args:?}: {err}");
    }
    // Nor a capacity of nothing: `up` refuses it before it makes its state directory.
    for c in ["0", "-1"] {
        let o = libra(&dir, &["up", "--cpus-per-node", c, "--no-demo", "--exit"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(&format!("--cpus-per-node: {c} is not accepted")),
            "{c}: {err}"
        );
        assert!(!dir.join("data/up").exists(), "{c}: a state directory was made");
    }
}

/// A node name the server would refuse is refused by the agent before it makes anything
/// under it: it made its working directory and its control groups first, and left them.
#[test]
fn a_node_name_the_server_would_refuse_is_refused_before_anything_is_made() {
    let dir = scratch("node-name");
    std::fs::write(dir.join("token"), "abcdefghijkl\n").unwrap();
    for name in ["", "../etc", "a/b", "with space", &"n".repeat(65)] {
        let workdir = dir.join("work");
        let mut agent =
            libra(&dir, &["node", "--server", "http://127.0.0.1:9", "--cpus", "0.1", "--name", name])
                .arg("--join-token-file")
                .arg(dir.join("token"))
                .arg("--workdir")
                .arg(&workdir)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
        // An agent that took the name would try the (closed) server for ever: stopped here.
        let t0 = std::time::Instant::now();
        while agent.try_wait().unwrap().is_none() && t0.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = agent.kill();
        let o = agent.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "'{name}' was taken: {err}");
        assert!(err.contains(&format!("name: '{name}' is not a valid node name")), "'{name}': {err}");
        assert!(!workdir.exists(), "'{name}': the working directory was made");
    }
}

/// A limit of processes and threads a job could not start under, or past any machine's, is
/// refused by name before the agent contacts anyone; a negative one by the same check.
#[test]
fn a_task_limit_out_of_range_is_refused_by_name() {
    let dir = scratch("max-tasks");
    std::fs::write(dir.join("token"), "abcdefghijkl\n").unwrap();
    for n in ["1", "15", "4194305", "-5"] {
        let o = libra(&dir, &["node", "--server", "http://127.0.0.1:9", "--cpus", "0.1", "--max-tasks", n])
            .arg("--join-token-file")
            .arg(dir.join("token"))
            .arg("--workdir")
            .arg(dir.join("work"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "--max-tasks {n} was taken: {err}");
        assert!(err.contains(&format!("{n} is not accepted")) && err.contains("max"), "{n}: {err}");
        assert!(err.contains("16") && err.contains("0 (no limit)") || n == "-5", "{n}: {err}");
    }
    // The node's other counts and sizes say what they take too.
    for flag in ["--scratch-mb", "--scratch-ahead", "--tmp-mb", "--mem-mb", "--max-tasks"] {
        let o = libra(&dir, &["node", "--server", "http://127.0.0.1:9", flag, "-1"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{flag} -1 was taken: {err}");
        assert!(
            err.contains(flag) && err.contains("-1 is not accepted: give a whole number"),
            "{flag}: {err}"
        );
    }
}

#[test]
fn a_lone_argument_that_is_no_file_is_a_missing_job_script() {
    let dir = scratch("missing");
    let o =
        libra(&dir, &["submit", "--estimate", "1m", "-d", "1h", "-b", "5", "missing.sh"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("job script missing.sh: no such file") && err.contains("after `--`"), "{err}");
    // After `--` it is a program to run: the submission goes on (and finds no server here).
    let o = libra(&dir, &["submit", "--estimate", "1m", "-d", "1h", "-b", "5", "--", "missing.sh"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("no server") && !err.contains("job script"), "{err}");
    // With a warning that it is no program here either.
    assert!(err.contains("warning: missing.sh is not on your PATH here"), "{err}");
}

/// A name the server would refuse is refused before a password is asked for (on a terminal the
/// administrator would type one for nothing): with stdin closed, the error is the name's.
#[test]
fn a_bad_user_name_is_refused_before_a_password_is_asked() {
    let dir = scratch("user-name");
    let o = libra(&dir, &["admin", "user", "add", "bad name", "--server", "http://127.0.0.1:1"])
        .env("LIBRA_TOKEN", "t")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("name: 'bad name' is not accepted"), "{err}");
    assert!(!err.contains("password"), "{err}");
}

/// Runs `libra ARGS` on a terminal `cols` columns wide (a pseudo-terminal that is the process's
/// controlling terminal and its stdout) and returns what it printed.
fn on_a_terminal(dir: &Path, args: &[&str], cols: u16) -> String {
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize { ws_row: 40, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes two descriptors into the integers given; the rest may be null.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (mut master, slave) = unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) };
    let mut cmd = libra(dir, args);
    cmd.stdout(slave.try_clone().unwrap()).stderr(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            libc::ioctl(1, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    drop(slave);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // Reading the master fails (EIO) once every copy of the slave is closed: the child is done.
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert!(child.wait().unwrap().success());
    String::from_utf8_lossy(&out).replace("\r\n", "\n")
}

fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[test]
fn tables_fit_the_terminal_and_are_left_alone_in_pipes() {
    let dir = scratch("width");
    std::fs::write(dir.join("plan.pln"), WIDE_PLAN).unwrap();
    let piped = libra(&dir, &["sweep", "check", "plan.pln"]).output().unwrap();
    let piped = String::from_utf8(piped.stdout).unwrap();
    assert!(widest(&piped) > 100, "the test's table is not wide enough:\n{piped}");
    let shown = on_a_terminal(&dir, &["sweep", "check", "plan.pln"], 60);
    let table: String =
        shown.lines().filter(|l| l.starts_with(['┌', '│', '├', '└', '╞'])).collect::<Vec<_>>().join("\n");
    assert!(table.lines().count() > 3, "no table on the terminal:\n{shown}");
    assert!(widest(&table) <= 60, "the table overflows a 60-column terminal:\n{shown}");
    // Nothing is lost, only wrapped.
    assert!(table.contains("rather") && table.contains("sixty"), "{shown}");
}

/// A job keeper asked to start a program that is still open for writing (a user's copy not yet
/// finished) waits until it is closed, instead of failing the job with "text file busy".
#[test]
fn a_job_program_still_being_written_starts_once_it_is_closed() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("busy-program");
    let record = dir.join("record");
    std::fs::create_dir(&record).unwrap();
    let prog = dir.join("job.sh");
    let mut writer = File::create(&prog).unwrap();
    writer.write_all(b"#!/bin/sh\necho started\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let launch = serde_json::json!({
        "argv": [prog],
        "env": [["PATH", "/usr/bin:/bin"]],
        "cwd": &*dir,
        "stdout": dir.join("out"),
        "stderr": null,
        "append": false,
        "identity": null,
    });
    std::fs::write(record.join("libra.launch"), launch.to_string()).unwrap();
    let keeper = libra(&dir, &["job-keeper", "--record", record.to_str().unwrap()]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(writer);
    let out = keeper.wait_with_output().unwrap();
    let exit = std::fs::read_to_string(record.join("libra.exit")).unwrap();
    assert!(out.status.success(), "keeper: {:?}, exit file: {exit}", out.status);
    assert!(exit.starts_with("0 - "), "{exit}");
    assert_eq!(std::fs::read_to_string(dir.join("out")).unwrap(), "started\n");
}

#[test]
fn an_error_names_each_of_its_causes_once() {
    let dir = scratch("causes");
    let server = format!("http://127.0.0.1:{}", free_port());
    // An array range in a batch script (checked before anything is sent): it said "--array:
    // --array: ...".
    std::fs::write(dir.join("arr.sh"), "#!/bin/sh\n#SBATCH --time=1\n#SBATCH --array=5-1\ntrue\n").unwrap();
    for (args, once) in [
        (
            vec!["sim", "run", "--trace", "no-such-trace.swf"],
            vec!["No such file or directory", "no-such-trace.swf"],
        ),
        (vec!["status", "--server", &server], vec!["Connection refused", &server]),
        (vec!["sbatch", "--deadline", "1h", "--budget", "50", "arr.sh"], vec!["--array", "reversed"]),
    ] {
        let o = libra(&dir, &args).env("LIBRA_TOKEN", "any").output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {err}");
        for needle in once {
            assert_eq!(err.matches(needle).count(), 1, "{args:?}, {needle}: {err}");
        }
    }
}
