//! `libra slurm ...`: what a site running Slurm installs so that Libra admits, prices and
//! enforces the jobs of the partitions it owns: an enforcement-only job_submit.lua, a
//! jobcomp.lua that tells the server when a job ends, and the slurm.conf lines. Each is printed
//! (to review, or to put in place by other means) or written with `--install`.

use crate::output::{emit, Render, Text};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const SLURM_ABOUT: &str = "\
Libra on an existing Slurm cluster: Libra's server is the front end (it admits, prices and holds \
credit, then hands each admitted job to Slurm with sbatch as its owner, on the node it chose), \
and Slurm runs the jobs. These commands print what a site installs on the Slurm controller:

  libra slurm conf                  the slurm.conf lines (Libra's partition, OverSubscribe=FORCE:N,
                                    jobcomp/lua, job_submit/lua, jobacct_gather/linux)
  libra slurm job-submit-lua        job_submit.lua: refuses submissions to Libra's partitions that
                                    did not come through Libra, and tells the user how to submit
  libra slurm jobcomp-lua --server URL --token-file FILE
                                    jobcomp.lua: tells Libra's server when a job ends

Each prints to standard output; --install writes the file under /etc/slurm (or --path). Then \
restart slurmctld, run `libra node --slurm` beside every slurmd of the partition, and set \
`[executor] kind = \"slurm\"` in the server's configuration.";

#[derive(Debug, Args)]
#[command(long_about = SLURM_ABOUT)]
pub struct SlurmArgs {
    #[command(subcommand)]
    pub cmd: SlurmCmd,
}

#[derive(Debug, Subcommand)]
pub enum SlurmCmd {
    /// The slurm.conf lines Libra needs (partition, OverSubscribe, jobcomp and job_submit plugins).
    Conf(ConfArgs),
    /// An enforcement-only job_submit.lua: only Libra may submit to the partitions Libra owns.
    JobSubmitLua(JobSubmitArgs),
    /// A jobcomp.lua that reports each Libra job's end to the server (state, times, exit code).
    JobcompLua(JobcompArgs),
}

/// Where a generated file goes: standard output, or installed.
#[derive(Debug, Args)]
pub struct Output {
    /// Write the file (atomically, mode 0644) instead of printing it.
    #[arg(long)]
    pub install: bool,
    /// Where --install writes (default: the file's usual place under /etc/slurm).
    #[arg(long, value_name = "FILE")]
    pub path: Option<PathBuf>,
    /// Print {"path": ..., "text": ...} as JSON instead of the text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(long_about = "\
The slurm.conf lines Libra needs on the controller. Libra's partition time-shares its nodes: \
OverSubscribe=FORCE:N lets N jobs share a node (Libra's server admits at most N per node: set \
the same N as `[executor] jobs_per_node`), and each gets the CPU share Libra promised it from \
`libra node --slurm`, which keeps the job's processes in a CPU group of its own. \
jobcomp/lua reports each job's end to Libra; job_submit/lua refuses submissions that did not \
come through Libra; jobacct_gather/linux keeps Slurm's own accounting out of the cpu \
controller Libra's agent uses.

With --install, the lines are written between '# BEGIN libra' and '# END libra' in slurm.conf \
(replacing an earlier block), and the settings they set elsewhere in the file are commented \
out. Changing JobCompType needs a restart of slurmctld.")]
pub struct ConfArgs {
    /// The partition Libra owns (`[executor] partition`).
    #[arg(long, default_value = "libra")]
    pub partition: String,
    /// The nodes of the partition (Slurm's node list syntax, e.g. n[1-8]).
    #[arg(long, default_value = "ALL")]
    pub nodes: String,
    /// Jobs per node at once: OverSubscribe=FORCE:N (`[executor] jobs_per_node`).
    #[arg(long, default_value_t = 4)]
    pub jobs_per_node: u32,
    /// Make Libra's partition the default one (jobs that name no partition).
    #[arg(long)]
    pub default: bool,
    #[command(flatten)]
    pub out: Output,
}

#[derive(Debug, Args)]
#[command(long_about = "\
An enforcement-only job_submit.lua: on the partitions Libra owns, Slurm accepts only jobs \
submitted by Libra's server (its Unix account: root, or --submit-user) carrying the comment \
'libra job=ID'. Anyone else is refused at once with a message telling them to submit with \
`libra submit` or `libra sbatch`, which answer with Libra's decision and price. Jobs for other \
partitions pass untouched. It makes no call-out: a call-out from job_submit.lua holds \
slurmctld's locks for every user while it waits.

A job that names no partition goes to Slurm's default partition: give --default-is-libra when \
that is Libra's, so that such jobs are checked too.")]
pub struct JobSubmitArgs {
    /// A partition Libra owns (repeatable).
    #[arg(long = "partition", default_value = "libra")]
    pub partitions: Vec<String>,
    /// An account besides root that may submit for Libra: the server's (repeatable).
    #[arg(long = "submit-user", value_name = "USER")]
    pub submit_users: Vec<String>,
    /// Slurm's default partition is one of Libra's.
    #[arg(long)]
    pub default_is_libra: bool,
    #[command(flatten)]
    pub out: Output,
}

#[derive(Debug, Args)]
#[command(long_about = "\
A jobcomp.lua (JobCompType=jobcomp/lua) that reports the end of every job Libra submitted \
(its Slurm id, state, start and end times, exit status) to POST /api/slurm/jobcomp on Libra's \
server, which settles the job's charge from it and the CPU its node agent measured. \
Other jobs are ignored.

The request carries the Slurm notifier's secret, read by the script from --token-file at each \
job's end (never on a command line others can see: curl reads it from a private temporary \
file). The same file is the server's `[executor] jobcomp_token_file`. When the file does not \
exist, this command makes it with a new random secret, mode 0600: make it readable by SlurmUser \
(chown) if slurmctld does not run as root. curl runs detached, so slurmctld never waits for the \
server.")]
pub struct JobcompArgs {
    /// Libra server's URL, as the Slurm controller reaches it.
    #[arg(long)]
    pub server: String,
    /// The file holding the Slurm notifier's secret.
    #[arg(long, default_value = "/etc/libra/slurm-jobcomp.token", value_name = "FILE")]
    pub token_file: PathBuf,
    /// A PEM certificate (or CA) the server's TLS certificate is checked against.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// The curl program.
    #[arg(long, default_value = "/usr/bin/curl", value_name = "PATH")]
    pub curl: PathBuf,
    #[command(flatten)]
    pub out: Output,
}

pub fn run(a: SlurmArgs) -> Result<()> {
    match a.cmd {
        SlurmCmd::Conf(c) => {
            check_name("--partition", &c.partition)?;
            if !(1..=64).contains(&c.jobs_per_node) {
                bail!(
                    "--jobs-per-node: {} is not accepted: give 1 to 64 (OverSubscribe=FORCE:N)",
                    c.jobs_per_node
                );
            }
            let text = conf(&c.partition, &c.nodes, c.jobs_per_node, c.default);
            if c.out.install {
                let path = c.out.path.clone().unwrap_or_else(|| "/etc/slurm/slurm.conf".into());
                let old =
                    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
                let new = merge_conf(&old, &text);
                return deliver(&c.out, "/etc/slurm/slurm.conf", &new);
            }
            deliver(&c.out, "/etc/slurm/slurm.conf", &text)
        }
        SlurmCmd::JobSubmitLua(j) => {
            for p in &j.partitions {
                check_name("--partition", p)?;
            }
            let mut uids = vec![0u32];
            for u in &j.submit_users {
                uids.push(uid_of(u)?);
            }
            let text = job_submit_lua(&j.partitions, &uids, j.default_is_libra);
            deliver(&j.out, "/etc/slurm/job_submit.lua", &text)
        }
        SlurmCmd::JobcompLua(j) => {
            let url = j.server.trim_end_matches('/');
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("--server: '{}' is not accepted: give the server's URL, http://HOST:PORT or https://HOST:PORT", j.server);
            }
            if !j.token_file.is_absolute() {
                bail!("--token-file: give an absolute path (slurmctld reads it from its own directory)");
            }
            ensure_token(&j.token_file)?;
            let text = jobcomp_lua(url, &j.token_file, j.ca.as_deref(), &j.curl);
            deliver(&j.out, "/etc/slurm/jobcomp.lua", &text)
        }
    }
}

fn check_name(flag: &str, v: &str) -> Result<()> {
    if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        bail!("{flag}: '{v}' is not accepted: give a Slurm partition name (letters, digits, '-', '_', '.')");
    }
    Ok(())
}

fn uid_of(user: &str) -> Result<u32> {
    if let Ok(n) = user.parse::<u32>() {
        return Ok(n);
    }
    match libra_node::proc::Identity::lookup(user) {
        Ok(Some(id)) => Ok(id.uid),
        _ => bail!("--submit-user: '{user}' is not a Unix account on this machine: give the account Libra's server runs as"),
    }
}

/// A generated file: printed, or written in place with `--install`.
#[derive(serde::Serialize)]
struct Generated<'a> {
    path: &'a Path,
    text: &'a str,
    installed: bool,
}

impl Render for Generated<'_> {
    fn text(&self) -> Text {
        // Installed: the file is the answer, and "wrote PATH" went to stderr.
        if self.installed {
            Text::new()
        } else {
            Text::verbatim(self.text)
        }
    }
}

fn deliver(out: &Output, default: &str, text: &str) -> Result<()> {
    let path = out.path.clone().unwrap_or_else(|| default.into());
    if out.install {
        write_atomic(&path, text)?;
        if !out.json {
            eprintln!("wrote {}", path.display());
        }
    }
    emit(&Generated { path: &path, text, installed: out.install }, out.json)
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // Beside the file, then renamed over it: slurmctld never reads half a file.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".libra-new");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Makes the secret file (0600, a new random secret) if it does not exist.
fn ensure_token(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if path.exists() {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("--token-file: creating {}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("--token-file: creating {}", path.display()))?;
    writeln!(f, "{}", libra_server::auth::new_token())?;
    eprintln!(
        "made the Slurm notifier's secret in {} (mode 0600): give the server the same file ([executor] jobcomp_token_file)",
        path.display()
    );
    Ok(())
}

const BEGIN: &str = "# BEGIN libra (libra slurm conf)";
const END: &str = "# END libra";

/// The slurm.conf lines.
pub fn conf(partition: &str, nodes: &str, jobs_per_node: u32, default: bool) -> String {
    format!(
        "{BEGIN}\n\
         # Libra admits and prices; Slurm runs. Jobs time-share the partition's nodes, at most {jobs_per_node} per node\n\
         # (Libra's [executor] jobs_per_node); libra node --slurm enforces each job's CPU share.\n\
         JobSubmitPlugins=lua\n\
         JobCompType=jobcomp/lua\n\
         JobAcctGatherType=jobacct_gather/linux\n\
         SelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core_Memory\n\
         PartitionName={partition} Nodes={nodes} OverSubscribe=FORCE:{jobs_per_node} Default={} MaxTime=INFINITE State=UP\n\
         {END}\n",
        if default { "YES" } else { "NO" }
    )
}

/// `old` slurm.conf with Libra's block in place of an earlier one, and the settings the block
/// sets commented out elsewhere (Slurm refuses some settings given twice).
pub fn merge_conf(old: &str, block: &str) -> String {
    let keys: Vec<String> = block
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().to_ascii_lowercase()))
        .filter(|k| k != "partitionname")
        .collect();
    let partition_line = block.lines().find(|l| l.starts_with("PartitionName=")).unwrap_or_default();
    let partition = partition_line.split_whitespace().next().unwrap_or_default().to_ascii_lowercase();
    let mut out = String::new();
    let mut inside = false;
    for line in old.lines() {
        if line.trim() == BEGIN {
            inside = true;
            continue;
        }
        if inside {
            if line.trim() == END {
                inside = false;
            }
            continue;
        }
        let key = line.split_once('=').map(|(k, _)| k.trim().to_ascii_lowercase()).unwrap_or_default();
        let first = line.split_whitespace().next().unwrap_or_default().to_ascii_lowercase();
        if !line.trim_start().starts_with('#')
            && (keys.contains(&key) || (!partition.is_empty() && first == partition))
        {
            out.push_str(&format!("#libra: {line}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str(block);
    out
}

fn lua_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The enforcement-only job_submit.lua.
pub fn job_submit_lua(partitions: &[String], uids: &[u32], default_is_libra: bool) -> String {
    let parts: Vec<String> = partitions.iter().map(|p| format!("[{}] = true", lua_string(p))).collect();
    let uids: Vec<String> = uids.iter().map(|u| format!("[{u}] = true")).collect();
    format!(
        r#"-- job_submit.lua made by `libra slurm job-submit-lua`: enforcement only, no call-outs.
-- On the partitions Libra owns, only Libra's server submits (as the job's owner, with
-- sbatch --uid), and every job it submits carries the comment "libra job=ID". Anyone else is
-- refused and told how to submit. Jobs for other partitions pass untouched.

local LIBRA_PARTITIONS = {{ {parts} }}
local LIBRA_SUBMIT_UIDS = {{ {uids} }}
local DEFAULT_IS_LIBRA = {default_is_libra}
local PREFIX = "libra job="

local function libra_partition(partition)
   if partition == nil or partition == "" then
      return DEFAULT_IS_LIBRA
   end
   for p in string.gmatch(partition, "[^,]+") do
      if LIBRA_PARTITIONS[p] then
         return true
      end
   end
   return false
end

local function from_libra(uid, comment)
   return LIBRA_SUBMIT_UIDS[uid] == true and comment ~= nil and string.sub(comment, 1, #PREFIX) == PREFIX
end

local function refuse(partition)
   slurm.log_user("partition %s is scheduled by Libra: submit with libra submit / libra sbatch "
      .. "(give a deadline and a budget; Libra answers at once with its decision, the price and the Slurm job id)",
      partition or "(default)")
   return slurm.ESLURM_ACCESS_DENIED
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   if not libra_partition(job_desc.partition) then
      return slurm.SUCCESS
   end
   if from_libra(submit_uid, job_desc.comment) then
      return slurm.SUCCESS
   end
   return refuse(job_desc.partition)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   if LIBRA_SUBMIT_UIDS[modify_uid] then
      return slurm.SUCCESS
   end
   -- Moving a job into Libra's partition, or changing the comment that names a Libra job,
   -- would bypass admission.
   if job_desc.partition ~= nil and libra_partition(job_desc.partition) then
      return refuse(job_desc.partition)
   end
   if job_desc.comment ~= nil and job_rec ~= nil and libra_partition(job_rec.partition) then
      return refuse(job_rec.partition)
   end
   return slurm.SUCCESS
end

return slurm.SUCCESS
"#,
        parts = parts.join(", "),
        uids = uids.join(", "),
    )
}

/// The jobcomp.lua.
pub fn jobcomp_lua(server: &str, token_file: &Path, ca: Option<&Path>, curl: &Path) -> String {
    let ca = match ca {
        Some(p) => format!("cacert = {}\\n", curl_quote(&p.display().to_string())),
        None => String::new(),
    };
    format!(
        r#"-- jobcomp.lua made by `libra slurm jobcomp-lua` (JobCompType=jobcomp/lua): when a job Libra
-- submitted ends, report its state, times and exit status to Libra's server, which settles its
-- charge. The secret is read from TOKEN_FILE at each call and handed to curl in a private
-- temporary file, never on a command line; curl runs detached so slurmctld does not wait.

local URL = {url}
local TOKEN_FILE = {token}
local CURL = {curl}
local CA = "{ca}"
local PREFIX = "libra job="

local function num(v)
   return math.floor(tonumber(v) or 0)
end

local function read_token()
   local f = io.open(TOKEN_FILE, "r")
   if f == nil then
      return nil
   end
   local t = f:read("*l")
   f:close()
   if t == nil or t == "" then
      return nil
   end
   return t
end

function slurm_jobcomp_log_record(job)
   local comment = job.comment
   if comment == nil or string.sub(comment, 1, #PREFIX) ~= PREFIX then
      return slurm.SUCCESS
   end
   local libra_job = string.match(comment, "^libra job=(%d+)")
   if libra_job == nil then
      return slurm.SUCCESS
   end
   local token = read_token()
   if token == nil or string.find(token, "[^%w%-_%.]") then
      slurm.log_error("libra jobcomp: no usable secret in %s: job %s not reported", TOKEN_FILE, tostring(job.job_id))
      return slurm.SUCCESS
   end
   local partition = string.gsub(tostring(job.partition or ""), "[^%w%-_%.,]", "")
   local body = string.format('{{"job_id":%d,"job_state":%d,"exit_code":%d,"start":%d,"end":%d,"comment":"libra job=%s","partition":"%s"}}',
      num(job.job_id), num(job.job_state), num(job.exit_code), num(job.start_time), num(job.end_time), libra_job, partition)
   local tmp = os.tmpname()
   local f = io.open(tmp, "w")
   if f == nil then
      slurm.log_error("libra jobcomp: cannot write %s: job %s not reported", tmp, tostring(job.job_id))
      return slurm.SUCCESS
   end
   f:write("url = \"" .. URL .. "/api/slurm/jobcomp\"\n")
   f:write("header = \"Authorization: Bearer " .. token .. "\"\n")
   f:write("header = \"Content-Type: application/json\"\n")
   f:write("data = \"" .. string.gsub(body, '"', '\\"') .. "\"\n")
   f:write(CA)
   f:close()
   os.execute(string.format("(%s -sS -m 10 --retry 3 -o /dev/null --config '%s'; rm -f '%s') >/dev/null 2>&1 &", CURL, tmp, tmp))
   return slurm.SUCCESS
end

return slurm.SUCCESS
"#,
        url = lua_string(server),
        token = lua_string(&token_file.display().to_string()),
        curl = lua_string(&curl.display().to_string()),
        ca = ca.replace('"', "\\\""),
    )
}

fn curl_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_install_replaces_its_block_and_comments_out_what_it_sets() {
        let old = "ClusterName=x\nJobCompType=jobcomp/none\nPartitionName=libra Nodes=n1 Default=YES\nPartitionName=batch Nodes=n2\n";
        let block = conf("libra", "n[1-2]", 4, false);
        let once = merge_conf(old, &block);
        assert!(once.contains("#libra: JobCompType=jobcomp/none"), "{once}");
        assert!(once.contains("#libra: PartitionName=libra Nodes=n1"), "{once}");
        assert!(once.contains("\nPartitionName=batch Nodes=n2\n"), "{once}");
        assert!(once.contains("OverSubscribe=FORCE:4"), "{once}");
        // Installing again changes nothing.
        assert_eq!(merge_conf(&once, &block), once);
    }

    #[test]
    fn the_lua_scripts_name_the_partitions_uids_and_secret_file() {
        let s = job_submit_lua(&["libra".into(), "l2".into()], &[0, 995], true);
        assert!(s.contains(r#"["libra"] = true, ["l2"] = true"#), "{s}");
        assert!(s.contains("[0] = true, [995] = true"), "{s}");
        assert!(s.contains("ESLURM_ACCESS_DENIED") && s.contains("libra submit / libra sbatch"));
        let c = jobcomp_lua("http://h:1", Path::new("/etc/libra/t"), None, Path::new("/usr/bin/curl"));
        assert!(c.contains(r#"local TOKEN_FILE = "/etc/libra/t""#), "{c}");
        // The secret reaches curl in a file, never on its command line.
        let exec = c.lines().find(|l| l.contains("os.execute")).unwrap();
        assert!(!exec.contains("token"), "{exec}");
    }
}
