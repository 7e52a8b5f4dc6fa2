//! Where and how a job runs on this node, from what the server sent: its working directory (the
//! directory it was submitted from, as sbatch does), its output files (patterns with `%j`,
//! `%x`, `%N`, `%t`), its environment (the one captured at submission, never the agent's own,
//! plus the `LIBRA_*` variables), and the chunks of output sent back to the server as it runs.

use crate::proc::Identity;
use libra_api::{OutputChunk, StartJob, Stream, OUTPUT_LIMIT};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The default output file, in the job's working directory (Slurm's is `slurm-%j.out`).
pub const DEFAULT_OUTPUT: &str = "libra-%j.out";

/// How long a job's start waits for its working directory's file system to answer.
pub const DIR_LOOK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The most output of one stream sent with one report of a running job.
pub const RUNNING_CHUNK: u64 = 256 * 1024;

/// An output file the agent sends on to the server, from where the server's copy ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Watched {
    pub stream: Stream,
    pub path: PathBuf,
    /// Where the server's copy ends (its last acknowledgement).
    pub acked: u64,
    /// The file is sent only while it belongs to this account (the job's): the agent reads as
    /// root, and a job must not get another file shown to its owner by naming it, or a link to
    /// it, as its output. None: any owner (the agent's own account runs the job).
    pub owner: Option<u32>,
}

/// A job's files on this node.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFiles {
    pub cwd: PathBuf,
    pub stdout: PathBuf,
    /// None: standard error goes to the standard output file.
    pub stderr: Option<PathBuf>,
    /// Appended to, not truncated: several nodes of one job may share the file.
    pub append: bool,
    /// The files this node sends to the server (a file shared by every rank is sent by rank 0).
    pub watched: Vec<Watched>,
}

/// Where each job has a /tmp of its own (`AgentConfig::tmp_mb`): the reason a job cannot start
/// when its working directory or an output file is under /tmp or /var/tmp, which the job would
/// not see (it sees its own). Said at once, rather than as a missing directory.
pub fn under_private_tmp(files: &JobFiles, node: &str) -> Option<String> {
    let hidden = |p: &Path| -> bool {
        // The path as given, and as it resolves (a link into /tmp is under /tmp too); an output
        // file that does not exist yet resolves by its directory.
        let real = std::fs::canonicalize(p)
            .ok()
            .or_else(|| Some(std::fs::canonicalize(p.parent()?).ok()?.join(p.file_name()?)));
        std::iter::once(p.to_path_buf())
            .chain(real)
            .any(|q| q.starts_with("/tmp") || q.starts_with("/var/tmp"))
    };
    let what = [
        ("working directory", Some(&files.cwd)),
        ("output file", Some(&files.stdout)),
        ("error file", files.stderr.as_ref()),
    ];
    what.into_iter().find_map(|(what, p)| {
        let p = p?;
        hidden(p).then(|| {
            format!(
                "its {what} {} is under /tmp or /var/tmp, which each job on node {node} has of its own (tmp_mb): \
                 submit from another directory, or give one with -D/--chdir and -o/-e",
                p.display()
            )
        })
    })
}

/// `%j` job id, `%x` job name, `%N` node, `%t` rank, `%A`/`%a` array job id / task id (array
/// tasks only), `%%` a percent sign; any other `%` sequence is left as it is.
pub fn expand(pattern: &str, s: &StartJob, node: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('j') => out.push_str(&s.job.to_string()),
            Some('x') => out.push_str(&job_name(s)),
            Some('N') => out.push_str(node),
            Some('t') => out.push_str(&s.rank.to_string()),
            // Slurm's array job id and task id; in a job that is no array task they are left as
            // written (there is no id to put there).
            Some('A') if s.array_id.is_some() => out.push_str(&s.array_id.unwrap_or_default().to_string()),
            Some('a') if s.array_task.is_some() => {
                out.push_str(&s.array_task.unwrap_or_default().to_string())
            }
            Some('%') => out.push('%'),
            _ => {
                out.push('%');
                continue;
            }
        }
        chars.next();
    }
    out
}

/// The job's name, else its program's base name.
pub fn job_name(s: &StartJob) -> String {
    s.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| {
        s.command
            .first()
            .and_then(|p| Path::new(p).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "job".into())
    })
}

fn per_rank(pattern: &str) -> bool {
    pattern.contains("%t") || pattern.contains("%N")
}

impl JobFiles {
    /// Plans a job's files. `record` is the agent's own directory for the job (its record, and
    /// the job's working directory when the server sent none). Refused, with the reason the
    /// user will read, when the working directory is not on this node.
    pub fn plan(s: &StartJob, record: &Path, node: &str, owner: Option<u32>) -> Result<JobFiles, String> {
        let Some(dir) = &s.workdir else {
            // A client that sent no directory: the job runs in a scratch directory of its own
            // inside the agent's directory for it.
            let scratch = scratch_dir(record);
            return Ok(JobFiles {
                cwd: scratch.clone(),
                stdout: scratch.join("stdout"),
                stderr: Some(scratch.join("stderr")),
                append: false,
                watched: vec![
                    Watched { stream: Stream::Stdout, path: scratch.join("stdout"), acked: 0, owner },
                    Watched { stream: Stream::Stderr, path: scratch.join("stderr"), acked: 0, owner },
                ],
            });
        };
        let cwd = PathBuf::from(dir);
        // Looked at off the agent's loop: a directory on a file system that does not answer
        // (a hard NFS mount whose server is away) would hold every job's reports meanwhile.
        let Some(is_dir) = crate::output_reads::is_dir_within(&cwd, DIR_LOOK_WAIT) else {
            return Err(format!(
                "the working directory {dir} did not answer within {} s on node {node}: its file system does not respond",
                DIR_LOOK_WAIT.as_secs()
            ));
        };
        if !is_dir {
            return Err(format!(
                "the working directory {dir} does not exist on node {node}: a job runs in the directory it was \
                 submitted from (or --chdir), so submit from a directory the nodes share"
            ));
        }
        let out_pattern = s.stdout.as_deref().unwrap_or(DEFAULT_OUTPUT);
        let stdout = cwd.join(expand(out_pattern, s, node));
        let stderr = s.stderr.as_deref().map(|p| cwd.join(expand(p, s, node))).filter(|e| *e != stdout);
        let mut watched = Vec::new();
        if s.rank == 0 || per_rank(out_pattern) {
            watched.push(Watched { stream: Stream::Stdout, path: stdout.clone(), acked: 0, owner });
        }
        if let (Some(path), Some(p)) = (&stderr, &s.stderr) {
            if s.rank == 0 || per_rank(p) {
                watched.push(Watched { stream: Stream::Stderr, path: path.clone(), acked: 0, owner });
            }
        }
        Ok(JobFiles { cwd, stdout, stderr, append: s.procs > 1, watched })
    }
}

/// Where a job that was given no working directory runs: inside the agent's directory for it,
/// owned by the job's account.
pub fn scratch_dir(record: &Path) -> PathBuf {
    record.join("work")
}

/// The job's environment: a minimal base (PATH, HOME, USER, LOGNAME, SHELL of the account the
/// job runs as), then what was captured at submission (all of it for `--export=ALL`), then the
/// `LIBRA_*` variables, which nothing overrides. Nothing of the agent's own environment.
pub fn environment(
    s: &StartJob,
    node: &str,
    files: &JobFiles,
    account: Option<&Identity>,
) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    env.insert("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into());
    if let Some(a) = account {
        env.insert("HOME".into(), a.home.clone());
        env.insert("USER".into(), a.user.clone());
        env.insert("LOGNAME".into(), a.user.clone());
        env.insert("SHELL".into(), a.shell.clone());
    }
    if let Some(captured) = &s.env {
        env.extend(captured.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let submit_dir = s.workdir.clone().unwrap_or_else(|| files.cwd.display().to_string());
    let libra = [
        ("LIBRA_JOB_ID", s.job.to_string()),
        ("LIBRA_JOB_NAME", job_name(s)),
        ("LIBRA_NODE", node.to_string()),
        ("LIBRA_NNODES", s.procs.to_string()),
        ("LIBRA_PROCID", s.rank.to_string()),
        ("LIBRA_NODELIST", if s.nodes.is_empty() { node.to_string() } else { s.nodes.join(",") }),
        ("LIBRA_DEADLINE", format!("{:.0}", s.deadline_at)),
        ("LIBRA_SUBMIT_DIR", submit_dir),
        ("LIBRA_CPUS_PER_TASK", s.cpus_per_task.to_string()),
    ];
    env.extend(libra.into_iter().map(|(k, v)| (k.to_string(), v)));
    if let (Some(a), Some(t)) = (s.array_id, s.array_task) {
        env.insert("LIBRA_ARRAY_JOB_ID".into(), a.to_string());
        env.insert("LIBRA_ARRAY_TASK_ID".into(), t.to_string());
    }
    if s.slurm_env {
        slurm_variables(&mut env);
    }
    env.into_iter().collect()
}

/// The `SLURM_*` variables a Slurm batch job's script reads, for a job submitted as one (`libra
/// sbatch`), from the `LIBRA_*` ones just set. Any `SLURM_*` captured from the submitter goes
/// first: submitted from inside a Slurm job, its ids (an array task's, say) would be taken for
/// this job's. Each node of a multi-node job runs the script (Slurm runs it on the first and
/// leaves the rest to `srun`), so its rank is its `SLURM_PROCID` and `SLURM_NODEID`.
fn slurm_variables(env: &mut BTreeMap<String, String>) {
    env.retain(|k, _| !k.starts_with("SLURM_"));
    let get = |k: &str| env.get(k).cloned().unwrap_or_default();
    let mut slurm = vec![
        ("SLURM_JOB_ID", get("LIBRA_JOB_ID")),
        ("SLURM_JOBID", get("LIBRA_JOB_ID")),
        ("SLURM_JOB_NAME", get("LIBRA_JOB_NAME")),
        ("SLURM_SUBMIT_DIR", get("LIBRA_SUBMIT_DIR")),
        ("SLURM_JOB_NUM_NODES", get("LIBRA_NNODES")),
        ("SLURM_NNODES", get("LIBRA_NNODES")),
        ("SLURM_NTASKS", get("LIBRA_NNODES")),
        ("SLURM_NPROCS", get("LIBRA_NNODES")),
        ("SLURM_JOB_NODELIST", get("LIBRA_NODELIST")),
        ("SLURM_NODELIST", get("LIBRA_NODELIST")),
        ("SLURMD_NODENAME", get("LIBRA_NODE")),
        ("SLURM_PROCID", get("LIBRA_PROCID")),
        ("SLURM_NODEID", get("LIBRA_PROCID")),
        ("SLURM_LOCALID", "0".to_string()),
        ("SLURM_CPUS_PER_TASK", get("LIBRA_CPUS_PER_TASK")),
        ("SLURM_CPUS_ON_NODE", get("LIBRA_CPUS_PER_TASK")),
    ];
    if let (Some(a), Some(t)) = (env.get("LIBRA_ARRAY_JOB_ID"), env.get("LIBRA_ARRAY_TASK_ID")) {
        slurm.push(("SLURM_ARRAY_JOB_ID", a.clone()));
        slurm.push(("SLURM_ARRAY_TASK_ID", t.clone()));
    }
    env.extend(slurm.into_iter().map(|(k, v)| (k.to_string(), v)));
}

/// The output of `w` past what the server has, at most `max` bytes: None when there is nothing
/// new. When more than the server keeps has piled up, it skips to the last `OUTPUT_LIMIT`
/// bytes (the server marks its copy truncated).
pub fn chunk(w: &Watched, max: u64) -> Option<OutputChunk> {
    let mut f = open_output(w)?;
    let meta = f.metadata().ok()?;
    let len = meta.len();
    if len <= w.acked {
        return None;
    }
    let start = w.acked.max(len.saturating_sub(OUTPUT_LIMIT as u64));
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.take(max.min(len - start)).read_to_end(&mut buf).ok()?;
    (!buf.is_empty()).then(|| OutputChunk::new(w.stream, start, &buf))
}

/// `w`'s file opened for reading, when it is a regular file of the job's account. The path is
/// the job's to choose and to change while it runs, and the agent reads as root: it may have
/// become a pipe no one writes to (an open for reading would wait for a writer, and the agent's
/// reports for every job on the node with it) or a link to a device (whose open may do something
/// of its own). So the path is first taken without opening what it names (`O_PATH`), the kind
/// and owner are checked on that descriptor, and only a regular file is opened, through the
/// descriptor (the same file, whatever the path names by then).
fn open_output(w: &Watched) -> Option<std::fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let c = std::ffi::CString::new(w.path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path; the descriptor returned is ours alone.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    let path_only = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let meta = path_only.metadata().ok()?;
    if !meta.is_file() || w.owner.is_some_and(|uid| meta.uid() != uid) {
        return None;
    }
    std::fs::File::open(format!("/proc/self/fd/{}", path_only.as_raw_fd())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(job: u64, workdir: Option<&Path>) -> StartJob {
        StartJob {
            job,
            command: vec!["/usr/bin/simulate".into(), "--steps".into()],
            estimate: 10.0,
            submit_time: 0.0,
            deadline_at: 1_800_000_000.4,
            share: 0.5,
            suspended: false,
            mem_mb: 0,
            procs: 2,
            cpus_per_task: 1,
            name: None,
            rank: 1,
            nodes: vec!["n1".into(), "n2".into()],
            workdir: workdir.map(|w| w.display().to_string()),
            env: None,
            stdout: None,
            stderr: None,
            time_limit: None,
            unix_user: None,
            allow_root: false,
            array_id: None,
            array_task: None,
            slurm_job_id: None,
            slurm_env: false,
        }
    }

    #[test]
    fn patterns_expand_like_slurms() {
        let mut s = start(42, None);
        assert_eq!(expand("out-%j-%x-%N-%t-%%-%q.txt", &s, "n2"), "out-42-simulate-n2-1-%-%q.txt");
        s.name = Some("sweep".into());
        assert_eq!(expand("%x.%j", &s, "n2"), "sweep.42");
        assert_eq!(expand("trailing%", &s, "n2"), "trailing%");
    }

    #[test]
    fn array_patterns_and_variables_only_for_array_tasks() {
        let mut s = start(42, None);
        assert_eq!(expand("%A_%a.out", &s, "n2"), "%A_%a.out");
        s.array_id = Some(40);
        s.array_task = Some(7);
        assert_eq!(expand("%A_%a-%j.out", &s, "n2"), "40_7-42.out");
        let files = JobFiles {
            cwd: PathBuf::from("/"),
            stdout: PathBuf::from("/o"),
            stderr: None,
            append: false,
            watched: Vec::new(),
        };
        let env: BTreeMap<_, _> = environment(&s, "n2", &files, None).into_iter().collect();
        assert_eq!(env.get("LIBRA_ARRAY_JOB_ID").map(String::as_str), Some("40"));
        assert_eq!(env.get("LIBRA_ARRAY_TASK_ID").map(String::as_str), Some("7"));
    }

    #[test]
    fn files_are_planned_in_the_submit_directory_and_refused_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("job-42");
        let mut s = start(42, Some(dir.path()));
        let f = JobFiles::plan(&s, &record, "n2", None).unwrap();
        assert_eq!(
            (f.cwd.as_path(), f.stdout.clone(), f.stderr.clone()),
            (dir.path(), dir.path().join("libra-42.out"), None)
        );
        // Rank 1 shares rank 0's file: rank 0 sends it.
        assert!(f.watched.is_empty() && f.append);
        s.stdout = Some("o-%t.txt".into());
        s.stderr = Some("e-%N.txt".into());
        let f = JobFiles::plan(&s, &record, "n2", None).unwrap();
        assert_eq!(f.stderr, Some(dir.path().join("e-n2.txt")));
        assert_eq!(f.watched.len(), 2);
        s.workdir = Some("/nonexistent/libra/dir".into());
        let err = JobFiles::plan(&s, &record, "n2", None).unwrap_err();
        assert!(err.contains("/nonexistent/libra/dir") && err.contains("n2"), "{err}");
    }

    #[test]
    fn the_environment_is_the_captured_one_and_libras() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = start(7, Some(dir.path()));
        s.env = Some(BTreeMap::from([
            ("FOO".to_string(), "bar".to_string()),
            ("PATH".to_string(), "/opt/bin".to_string()),
            ("LIBRA_JOB_ID".to_string(), "forged".to_string()),
        ]));
        let f = JobFiles::plan(&s, dir.path(), "n2", None).unwrap();
        let me = Identity::current();
        let env: BTreeMap<String, String> = environment(&s, "n2", &f, me.as_ref()).into_iter().collect();
        assert_eq!(env["FOO"], "bar");
        assert_eq!(env["PATH"], "/opt/bin");
        assert_eq!(env["LIBRA_JOB_ID"], "7");
        assert_eq!(env["LIBRA_PROCID"], "1");
        assert_eq!(env["LIBRA_NNODES"], "2");
        assert_eq!(env["LIBRA_NODELIST"], "n1,n2");
        assert_eq!(env["LIBRA_DEADLINE"], "1800000000");
        assert_eq!(env["LIBRA_SUBMIT_DIR"], dir.path().display().to_string());
        // Nothing of the agent's (this test's) own environment.
        assert!(!env.keys().any(|k| k.starts_with("CARGO")), "{env:?}");
        s.env = None;
        let env: BTreeMap<String, String> = environment(&s, "n2", &f, me.as_ref()).into_iter().collect();
        assert_eq!(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
        assert!(!env.contains_key("FOO"));
    }

    #[test]
    fn paths_under_the_nodes_tmp_are_named_where_each_job_has_its_own() {
        let files = |cwd: &str, out: &str, err: Option<&str>| JobFiles {
            cwd: cwd.into(),
            stdout: out.into(),
            stderr: err.map(PathBuf::from),
            append: false,
            watched: Vec::new(),
        };
        assert_eq!(under_private_tmp(&files("/home/a", "/home/a/o", None), "n1"), None);
        assert_eq!(under_private_tmp(&files("/tmpx", "/tmpx/o", None), "n1"), None, "a name, not a prefix");
        let e = under_private_tmp(&files("/tmp/run", "/home/a/o", None), "n1").unwrap();
        assert!(
            e.starts_with("its working directory /tmp/run is under /tmp") && e.contains("node n1"),
            "{e}"
        );
        let e = under_private_tmp(&files("/home/a", "/var/tmp/o", None), "n1").unwrap();
        assert!(e.starts_with("its output file /var/tmp/o"), "{e}");
        let e = under_private_tmp(&files("/home/a", "/home/a/o", Some("/tmp/e")), "n1").unwrap();
        assert!(e.starts_with("its error file /tmp/e"), "{e}");
        // A link into /tmp is under /tmp.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(std::env::temp_dir(), &link).unwrap();
        if std::fs::canonicalize(&link).unwrap().starts_with("/tmp") {
            let out = link.join("new.out");
            let e = under_private_tmp(&files("/home/a", out.to_str().unwrap(), None), "n1").unwrap();
            assert!(e.starts_with("its output file"), "{e}");
        }
    }

    #[test]
    fn a_slurm_scripts_job_gets_slurms_variables_and_no_stale_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = start(7, Some(dir.path()));
        s.name = Some("sim".into());
        s.cpus_per_task = 4;
        // Submitted from inside a Slurm array task: its ids are not this job's.
        s.env = Some(BTreeMap::from([
            ("SLURM_JOB_ID".to_string(), "999".to_string()),
            ("SLURM_ARRAY_TASK_ID".to_string(), "3".to_string()),
            ("SLURM_CONF".to_string(), "/etc/slurm/slurm.conf".to_string()),
        ]));
        let f = JobFiles::plan(&s, dir.path(), "n2", None).unwrap();
        let env = |s: &StartJob| -> BTreeMap<String, String> {
            environment(s, "n2", &f, None).into_iter().collect()
        };
        // A job submitted with `libra submit` keeps what its owner exported.
        let plain = env(&s);
        assert_eq!((plain["SLURM_JOB_ID"].as_str(), plain["SLURM_ARRAY_TASK_ID"].as_str()), ("999", "3"));
        s.slurm_env = true;
        let e = env(&s);
        for (k, v) in [
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOBID", "7"),
            ("SLURM_JOB_NAME", "sim"),
            ("SLURM_NNODES", "2"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_NODELIST", "n1,n2"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NODEID", "1"),
            ("SLURMD_NODENAME", "n2"),
            ("SLURM_CPUS_PER_TASK", "4"),
        ] {
            assert_eq!(e.get(k).map(String::as_str), Some(v), "{k}: {e:?}");
        }
        assert_eq!(e["SLURM_SUBMIT_DIR"], dir.path().display().to_string());
        assert!(!e.contains_key("SLURM_ARRAY_TASK_ID") && !e.contains_key("SLURM_CONF"), "{e:?}");
        s.array_id = Some(40);
        s.array_task = Some(5);
        let e = env(&s);
        assert_eq!((e["SLURM_ARRAY_JOB_ID"].as_str(), e["SLURM_ARRAY_TASK_ID"].as_str()), ("40", "5"));
    }

    #[test]
    fn chunks_continue_from_the_servers_copy_and_skip_what_it_would_drop() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out");
        std::fs::write(&p, b"hello world").unwrap();
        let mut w = Watched { stream: Stream::Stdout, path: p.clone(), acked: 0, owner: None };
        let c = chunk(&w, 5).unwrap();
        assert_eq!((c.offset, c.bytes().unwrap()), (0, b"hello".to_vec()));
        w.acked = 6;
        assert_eq!(chunk(&w, 100).unwrap().bytes().unwrap(), b"world".to_vec());
        w.acked = 11;
        assert!(chunk(&w, 100).is_none());
        let big = vec![b'x'; OUTPUT_LIMIT + 10];
        std::fs::write(&p, &big).unwrap();
        w.acked = 0;
        assert_eq!(chunk(&w, 4).unwrap().offset, 10);
    }

    #[test]
    fn an_output_file_become_a_pipe_gives_nothing_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        // (In a thread of its own: an open that waits for a writer would wait for ever.)
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for path in [p, link] {
                let w = Watched { stream: Stream::Stdout, path, acked: 0, owner: None };
                tx.send(chunk(&w, 100).is_none()).unwrap();
            }
        });
        for _ in 0..2 {
            let nothing = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("reading a pipe waited for a writer");
            assert!(nothing);
        }
    }
}
