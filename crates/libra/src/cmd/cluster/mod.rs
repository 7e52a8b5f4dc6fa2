//! The running cluster: `libra server`, `libra node`, `libra up` and the user and administrator
//! commands. One module per command; `common` holds what they share.

mod admin;
mod bench;
mod burn;
pub(crate) mod common;
mod docs;
mod jobs;
mod login;
mod node;
mod queue;
mod quote;
mod sbatch;
mod server;
pub(crate) mod settings;
pub(crate) mod slurm;
mod submit;
mod torture;
mod up;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Run the cluster manager: HTTP API, admission, pricing, accounting.
    Server(server::ServerArgs),
    /// Run a node agent: join a server, run its jobs, enforce their CPU shares.
    Node(node::NodeArgs),
    /// Start a server and N local node agents in one command, with an admin and a demo user.
    Up(up::UpArgs),
    /// Run a CPU-bound busy loop for the given CPU seconds (a test job).
    Burn(burn::BurnArgs),
    /// Log in to a server and save the API token for the other commands.
    Login(login::LoginArgs),
    /// Revoke the saved API token on the server and forget it.
    Logout(login::LogoutArgs),
    /// Change your password (revokes your other tokens).
    Passwd(login::PasswdArgs),
    /// Submit a job with a runtime estimate, a deadline and a budget; the answer is immediate.
    Submit(submit::SubmitArgs),
    /// Submit a Slurm batch script as it is: its #SBATCH lines read with Slurm's meanings, plus
    /// a deadline and a budget; the same immediate answer as `libra submit`.
    Sbatch(sbatch::SbatchArgs),
    /// What a job would cost now, and the price per CPU-second on every node.
    ///
    /// With --estimate or --deadline it answers for that job, as `libra submit` would decide it,
    /// without submitting: exit status 0 when the job would be accepted, 1 when it would be
    /// rejected (the answer and the suggestion are printed either way), so that
    /// `libra quote ... && libra submit ...` submits only what would be taken.
    Quote(quote::QuoteArgs),
    /// Your jobs (or one job in detail).
    Status(jobs::StatusArgs),
    /// Cancel one of your jobs (what is charged: see `libra cancel --help`).
    Cancel(jobs::CancelArgs),
    /// Your credit: available, on hold, charged.
    Balance(jobs::BalanceArgs),
    /// Your finished and running jobs, filtered like Slurm's sacct (--starttime, --state, --format, --parsable).
    #[command(long_about = queue::HISTORY_ABOUT)]
    History(queue::HistoryArgs),
    /// Every unfinished job in the cluster, soonest deadline first (like squeue).
    #[command(long_about = queue::QUEUE_ABOUT)]
    Queue(queue::QueueArgs),
    /// Change a job's deadline or budget: re-decided and re-priced at once (like scontrol update).
    #[command(long_about = queue::UPDATE_ABOUT)]
    Update(queue::UpdateArgs),
    /// Hold a job that has not started: its promise and hold are given up (like scontrol hold).
    #[command(long_about = queue::HOLD_ABOUT)]
    Hold(queue::HoldArgs),
    /// Release a held job: admitted again like a new submission (like scontrol release).
    #[command(long_about = queue::RELEASE_ABOUT)]
    Release(queue::ReleaseArgs),
    /// A job's captured standard output and error.
    Output(jobs::OutputArgs),
    /// Administrator commands: nodes, jobs, usage, pricing, policy, users, credit.
    Admin(admin::AdminArgs),
    /// Benchmarks of the running cluster.
    Bench(bench::BenchArgs),
    /// Libra on an existing Slurm cluster: print or install slurm.conf lines, job_submit.lua, jobcomp.lua.
    #[command(long_about = slurm::SLURM_ABOUT)]
    Slurm(slurm::SlurmArgs),
    /// Write man pages for every command.
    Man(docs::ManArgs),
    /// Print a shell completion script.
    Completions(docs::CompletionsArgs),
    /// Run a job's command and record how it ended in the working directory (what node agents
    /// start each job through, so a job outlives a crashed agent; not for direct use).
    #[command(hide = true)]
    JobKeeper(node::KeeperArgs),
}

/// Adds one command's arguments to its (empty) `clap::Command`.
pub type AddArgs = fn(clap::Command) -> clap::Command;

/// Each command's name and how it gets its arguments: what the derive does for each variant
/// above, for one command alone (`crate::parse` builds only the command typed). A command
/// missing here is still parsed, through the whole tree; `main`'s tests check that every one is
/// here and gets the same arguments as in the tree.
pub const COMMANDS: &[(&str, AddArgs)] = &[
    ("server", <server::ServerArgs as clap::Args>::augment_args),
    ("node", <node::NodeArgs as clap::Args>::augment_args),
    ("up", <up::UpArgs as clap::Args>::augment_args),
    ("burn", <burn::BurnArgs as clap::Args>::augment_args),
    ("login", <login::LoginArgs as clap::Args>::augment_args),
    ("logout", <login::LogoutArgs as clap::Args>::augment_args),
    ("passwd", <login::PasswdArgs as clap::Args>::augment_args),
    ("submit", <submit::SubmitArgs as clap::Args>::augment_args),
    ("sbatch", <sbatch::SbatchArgs as clap::Args>::augment_args),
    ("quote", <quote::QuoteArgs as clap::Args>::augment_args),
    ("status", <jobs::StatusArgs as clap::Args>::augment_args),
    ("cancel", <jobs::CancelArgs as clap::Args>::augment_args),
    ("balance", <jobs::BalanceArgs as clap::Args>::augment_args),
    ("history", <queue::HistoryArgs as clap::Args>::augment_args),
    ("queue", <queue::QueueArgs as clap::Args>::augment_args),
    ("update", <queue::UpdateArgs as clap::Args>::augment_args),
    ("hold", <queue::HoldArgs as clap::Args>::augment_args),
    ("release", <queue::ReleaseArgs as clap::Args>::augment_args),
    ("output", <jobs::OutputArgs as clap::Args>::augment_args),
    ("admin", <admin::AdminArgs as clap::Args>::augment_args),
    ("bench", <bench::BenchArgs as clap::Args>::augment_args),
    ("slurm", <slurm::SlurmArgs as clap::Args>::augment_args),
    ("man", <docs::ManArgs as clap::Args>::augment_args),
    ("completions", <docs::CompletionsArgs as clap::Args>::augment_args),
    ("job-keeper", <node::KeeperArgs as clap::Args>::augment_args),
];

impl ClusterCommand {
    /// The server and the node agent start logging themselves, from their configuration.
    pub fn configures_logging(&self) -> bool {
        matches!(self, ClusterCommand::Server(_) | ClusterCommand::Node(_))
    }

    /// Whether the command serves or runs work rather than only printing (see
    /// `cmd::quiet_on_closed_stdout`). The benchmark runs a server and node agents in this process.
    pub fn serves(&self) -> bool {
        use ClusterCommand::*;
        matches!(self, Server(_) | Node(_) | Up(_) | JobKeeper(_) | Bench(_))
    }
}

pub fn run(cmd: ClusterCommand) -> anyhow::Result<()> {
    match cmd {
        ClusterCommand::Server(a) => server::run(a),
        ClusterCommand::Node(a) => node::run(a),
        ClusterCommand::Up(a) => up::run(a),
        ClusterCommand::Burn(a) => burn::run(a),
        ClusterCommand::Login(a) => login::run(a),
        ClusterCommand::Logout(a) => login::logout(a),
        ClusterCommand::Passwd(a) => login::passwd(a),
        ClusterCommand::Submit(a) => submit::run(a),
        ClusterCommand::Sbatch(a) => sbatch::run(a),
        ClusterCommand::Quote(a) => quote::run(a),
        ClusterCommand::Status(a) => jobs::status(a),
        ClusterCommand::Cancel(a) => jobs::cancel(a),
        ClusterCommand::Balance(a) => jobs::balance(a),
        ClusterCommand::History(a) => queue::history(a),
        ClusterCommand::Queue(a) => queue::queue(a),
        ClusterCommand::Update(a) => queue::update(a),
        ClusterCommand::Hold(a) => queue::hold(a),
        ClusterCommand::Release(a) => queue::release(a),
        ClusterCommand::Output(a) => jobs::output(a),
        ClusterCommand::Admin(a) => admin::run(a),
        ClusterCommand::Bench(a) => bench::run(a),
        ClusterCommand::Slurm(a) => slurm::run(a),
        ClusterCommand::Man(a) => docs::man(a),
        ClusterCommand::Completions(a) => docs::completions(a),
        ClusterCommand::JobKeeper(a) => std::process::exit(libra_node::proc::keep(&a.record, &a.command)),
    }
}
