//! Upgrades: a store written by every earlier released schema version (a fixture file per
//! version, as that release left it) opens under this build, is migrated to the current
//! schema, keeps every row, and serves.

use libra_server::store::{self, SCHEMA_VERSION};
use libra_server::{App, Config};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

fn fixture(version: i64) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/store-v{version}.sqlite"))
}

fn user_version(c: &Connection) -> i64 {
    c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
}

type Users = Vec<(i64, String, bool)>;
type Jobs = Vec<(i64, String, String, i64, i64)>;
type Ledger = Vec<(String, i64, i64)>;

/// The rows every fixture holds, read the same way before and after the upgrade.
fn rows(c: &Connection) -> (Users, Jobs, Ledger) {
    let users = c
        .prepare("SELECT id, name, admin FROM users ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let jobs = c
        .prepare("SELECT id, name, state, cost, charged FROM jobs ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let ledger = c
        .prepare("SELECT kind, amount, dep_total - hold_total FROM ledger ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    (users, jobs, ledger)
}

#[test]
fn every_released_schema_upgrades_to_the_current_one_with_its_data() {
    const { assert!(SCHEMA_VERSION > 2, "the fixtures stand for versions 1 and 2") };
    for version in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("server.db");
        std::fs::copy(fixture(version), &db).unwrap();
        let before = {
            let c = Connection::open(&db).unwrap();
            assert_eq!(user_version(&c), version, "fixture v{version}");
            rows(&c)
        };
        assert_eq!(before.1.len(), 2, "v{version}: the fixture's jobs");
        assert_eq!(before.2.len(), 3, "v{version}: the fixture's ledger");

        let c = store::open(&db, false).unwrap_or_else(|e| panic!("v{version}: {e}"));
        assert_eq!(user_version(&c), SCHEMA_VERSION, "v{version}");
        assert_eq!(rows(&c), before, "v{version}: rows changed in the upgrade");
        // The later steps' columns are there, with their defaults for old rows.
        let (cpt, drained, unix_user): (i64, bool, Option<String>) = c
            .query_row(
                "SELECT (SELECT cpus_per_task FROM jobs WHERE id = 2), (SELECT drained FROM nodes WHERE name = 'n1'), \
                 (SELECT unix_user FROM users WHERE name = 'ada')",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((cpt, drained, unix_user), (1, false, None), "v{version}");
        if version == 2 {
            // What version 2 stored in its own columns survives.
            let j = store::job(&c, 1).unwrap().unwrap();
            assert_eq!(j.workdir.as_deref(), Some("/home/ada"));
            assert_eq!(j.cpus_per_task, 2);
            assert_eq!(j.settlement.as_deref(), Some("charged 15.10"));
            let out = store::output(&c, 1, j.state, None, 0, 0).unwrap();
            assert_eq!(out.stdout, "hello\n");
        }
        // Ended jobs keep no environment (step 17).
        let envs: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM jobs WHERE env IS NOT NULL AND state IN ('COMPLETED','FAILED','CANCELLED','DEADLINE','REJECTED','TIMEOUT')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(envs, 0, "v{version}: an ended job's environment was kept");
        // Each user's kept output is counted from what the old store kept (step 16).
        let uncounted: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM users u WHERE output_bytes != (SELECT COALESCE(SUM(LENGTH(COALESCE(p.out, X'')) \
                 + LENGTH(COALESCE(p.err, X''))), 0) FROM job_nodes p JOIN jobs j ON j.id = p.job WHERE j.user_id = u.id)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(uncounted, 0, "v{version}: a user's output_bytes is not what the store keeps");
        if version == 2 {
            let ada: i64 =
                c.query_row("SELECT output_bytes FROM users WHERE name = 'ada'", [], |r| r.get(0)).unwrap();
            assert!(ada >= "hello\n".len() as i64, "v2: ada's kept output counts {ada} bytes");
        }
        // Accounts: every user's credit is their personal account, named after them and their
        // default, and old jobs are charged to it.
        for (id, name, _) in &before.0 {
            let b = libra_server::ledger::balance(&c, *id).unwrap();
            let mine = libra_server::projects::mine(&c, *id, 0.0).unwrap();
            assert_eq!(mine.len(), 1, "v{version}: {name}");
            assert_eq!(
                (&mine[0].account.name, mine[0].default, mine[0].account.personal),
                (name, true, true)
            );
            assert_eq!(
                (mine[0].account.available, mine[0].account.held),
                (b.available, b.held),
                "v{version}: {name}"
            );
        }
        assert_eq!(store::job(&c, 1).unwrap().unwrap().account.as_deref(), Some("ada"), "v{version}");
        // The ledger is still append-only after the upgrade.
        assert!(c.execute("DELETE FROM ledger", []).is_err(), "v{version}: the ledger trigger is gone");
        drop(c);

        // The upgraded store serves: the server loads it (its node, its jobs, its policy).
        let app = App::open(Config {
            db: db.clone(),
            join_token: "fixture-join-token".into(),
            ..Config::default()
        })
        .unwrap_or_else(|e| panic!("v{version}: {e}"));
        let g = app.lock();
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.policy_name(), "libra+$");
        let j = store::job(&g.db, 1).unwrap().unwrap();
        assert_eq!((j.user.as_str(), j.charged.0), ("ada", 1510));
        drop(g);
        drop(app);
        // And opening it again applies nothing twice.
        let c = store::open(&db, false).unwrap();
        assert_eq!(rows(&c), before);
    }
}

#[test]
fn a_store_from_a_newer_version_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    std::fs::copy(fixture(2), &db).unwrap();
    Connection::open(&db).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
    let e = store::open(&db, false).unwrap_err().to_string();
    assert!(e.contains("newer Libra"), "{e}");
    let c = Connection::open(&db).unwrap();
    assert_eq!(user_version(&c), SCHEMA_VERSION + 1);
    let has_drained: bool = c
        .prepare("SELECT 1 FROM pragma_table_info('nodes') WHERE name = 'drained'")
        .unwrap()
        .exists([])
        .unwrap();
    assert!(!has_drained, "a refused store was migrated anyway");
}
