//! A rejected job's suggestion is kept as JSON in `jobs.suggestion`. Rows written before money
//! fields were named `*_cents` hold `{"deadline": .., "budget": ..}`; they must still read, or the
//! suggestion would silently vanish from those jobs (the reader drops what it cannot parse).

use libra_core::policy::Suggestion;
use libra_core::Money;
use libra_server::store;
use rusqlite::params;

fn rejected_job_with(conn: &rusqlite::Connection, suggestion: &str) -> u64 {
    conn.execute("INSERT INTO users(name, pw_hash) VALUES ('alice', 'x')", []).unwrap();
    let user = conn.last_insert_rowid();
    conn.execute(
        "INSERT INTO jobs(user_id, name, state, command, estimate, procs, mem_mb, deadline, budget, \
         submit_time, deadline_at, reason, suggestion) \
         VALUES (?1, NULL, 'REJECTED', '[\"true\"]', 10.0, 1, 0, 12.0, 500, 100.0, 112.0, 'deadline', ?2)",
        params![user, suggestion],
    )
    .unwrap();
    conn.last_insert_rowid() as u64
}

#[test]
fn a_suggestion_stored_before_the_cents_names_still_reads() {
    let conn = store::open_memory().unwrap();
    let id = rejected_job_with(&conn, r#"{"deadline":20.5,"budget":1200}"#);
    let job = store::job(&conn, id).unwrap().expect("the job");
    assert_eq!(job.suggestion, Some(Suggestion { deadline: 20.5, budget: Money(1200) }));
    // And it goes out under the new name.
    let out = serde_json::to_value(&job).unwrap();
    assert_eq!(out["suggestion"], serde_json::json!({"deadline": 20.5, "budget_cents": 1200}));
}
