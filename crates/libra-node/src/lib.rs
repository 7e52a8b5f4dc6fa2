//! `libra node`: the node agent. It joins a cluster with the join token, reports its capacity,
//! pulls jobs (long poll), runs each as a process in its own working directory with stdout and
//! stderr captured, enforces every job's CPU share (cgroup v2, cgroup v1, or user-space stride
//! scheduling), runs job control every period and reports progress and exits.

pub mod agent;
pub mod beside;
pub mod control;
pub mod cpu_account;
pub mod enforce;
pub mod job_groups;
pub mod kernel;
pub mod launch;
pub mod memory;
pub mod output_reads;
pub mod proc;
pub mod scratch;
pub mod scratch_pool;
pub mod slurm;
pub mod slurm_steps;
pub mod stat;
pub mod stride;

pub use agent::{group_name, Agent, AgentConfig, NodeError};
