//! Jobs as the in-memory view is rebuilt from them.

use crate::app::spec_of;
use libra_core::{JobSpec, Money};
use rusqlite::Connection;

/// Every active job's commitment, to rebuild the view at start: (id, spec, submit time, its
/// nodes comma-separated (none: queued), the least CPU any part has used, the work reserved).
#[allow(clippy::type_complexity)]
pub fn commitments(db: &Connection) -> rusqlite::Result<Vec<(u64, JobSpec, f64, String, f64, f64)>> {
    db.prepare(
        "SELECT id, estimate, deadline, budget, procs, mem_mb, submit_time, \
         (SELECT group_concat(node, ',') FROM job_nodes n WHERE n.job = jobs.id), \
         (SELECT MIN(cpu_seconds) FROM job_nodes n WHERE n.job = jobs.id), \
         COALESCE(reserved, estimate), cpus_per_task \
         FROM jobs WHERE state IN ('PENDING','RUNNING','SUSPENDED')",
    )?
    .query_map([], |r| {
        let spec = spec_of(
            r.get(1)?,
            r.get(2)?,
            Money(r.get(3)?),
            r.get(4)?,
            r.get::<_, i64>(5)?.max(0) as u64,
            r.get::<_, i64>(10)?.clamp(1, i64::from(u32::MAX)) as u32,
        );
        Ok((
            r.get::<_, i64>(0)? as u64,
            spec,
            r.get(6)?,
            r.get::<_, Option<String>>(7)?.unwrap_or_default(),
            r.get::<_, Option<f64>>(8)?.unwrap_or(0.0),
            r.get(9)?,
        ))
    })?
    .collect()
}
