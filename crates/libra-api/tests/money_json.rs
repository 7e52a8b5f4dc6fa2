//! Every amount of money on the wire is an integer count of cents in a field whose JSON name ends
//! in `_cents`: a bare `"available": 100000` was read as 100,000 credits when the tables print
//! 1,000.00. Each API type that holds money is serialised here with every `Money` set to a
//! distinct marker value, and the key each marker lands under must end in `_cents`. A new type
//! or field holding money belongs in `samples` below, with its amounts from `m.next()`.

use libra_api::*;
use libra_core::job::JobSpec;
use libra_core::policy::Suggestion;
use libra_core::Money;
use serde_json::Value;

/// Hands out marker amounts far from any other number in the samples.
struct Markers(i64);

impl Markers {
    const FIRST: i64 = 7_000_000_001;

    fn next(&mut self) -> Money {
        let m = Money(self.0);
        self.0 += 1;
        m
    }

    fn is_marker(&self, v: i64) -> bool {
        (Markers::FIRST..self.0).contains(&v)
    }
}

fn job_info(m: &mut Markers) -> JobInfo {
    JobInfo {
        id: 3,
        user: "alice".into(),
        name: Some("sweep-7".into()),
        state: JobState::Rejected,
        command: vec!["true".into()],
        estimate: 10.0,
        procs: 2,
        deadline: 60.0,
        budget: m.next(),
        submit_time: 1.0,
        deadline_at: 61.0,
        start_time: Some(2.0),
        end_time: Some(3.0),
        nodes: vec!["n0".into(), "n1".into()],
        share: 0.5,
        cost: m.next(),
        charged: m.next(),
        cpu_seconds: 4.0,
        exit_code: Some(0),
        reason: Some("deadline".into()),
        suggestion: Some(Suggestion { deadline: 90.0, budget: m.next() }),
        cpus_per_task: 1,
        workdir: Some("/home/alice".into()),
        stdout: Some("out-%j".into()),
        stderr: None,
        time_limit: Some(60.0),
        settlement: Some("charged for 4.0 of 20.0 CPU-s used".into()),
        array_id: None,
        array_task: None,
        dependencies: Vec::new(),
        waiting: false,
        account: Some("physics".into()),
        slurm_job_id: None,
        parts_running: 0,
        command_cut: None,
    }
}

fn sweep_info(m: &mut Markers) -> SweepInfo {
    SweepInfo {
        id: 1,
        name: "s".into(),
        owner: "alice".into(),
        state: "running".into(),
        optimise: "cost".into(),
        created: 1.0,
        finished: None,
        deadline: 100.0,
        budget: m.next(),
        spent: m.next(),
        held: m.next(),
        jobs: SweepCounts::default(),
        projected_finish: Some(50.0),
        resources: vec![SweepResource {
            name: "q".into(),
            kind: "testqueue".into(),
            slots: 2,
            price: 1.5,
            done: 1,
            failed: 0,
            running: 1,
            spent: m.next(),
            secs_per_job: Some(0.3),
            refused: None,
            refused_at: None,
        }],
        now: 2.0,
        engine: None,
    }
}

/// One value of every API type that holds money, by name.
fn samples(m: &mut Markers) -> Vec<(&'static str, Value)> {
    let spec = |m: &mut Markers| JobSpec::simple(10.0, 60.0, m.next()).with_procs(2);
    let v = |x: serde_json::Result<Value>| x.expect("serialises");
    vec![
        ("SubmitRequest", v(serde_json::to_value(SubmitRequest::new(spec(m), vec!["true".into()])))),
        ("QuoteRequest", v(serde_json::to_value(QuoteRequest::new(spec(m))))),
        (
            "QuoteResponse",
            v(serde_json::to_value(QuoteResponse {
                policy: "libra+$".into(),
                accepted: false,
                cost: Some(m.next()),
                nodes: vec![],
                share: None,
                reason: Some("deadline".into()),
                suggestion: Some(Suggestion { deadline: 90.0, budget: m.next() }),
                prices: vec![],
                dependency: None,
            })),
        ),
        ("JobInfo", v(serde_json::to_value(job_info(m)))),
        (
            "Balance",
            v(serde_json::to_value(Balance {
                user: "alice".into(),
                available: m.next(),
                held: m.next(),
                charged: m.next(),
                deposited: m.next(),
            })),
        ),
        (
            "LedgerEntry",
            v(serde_json::to_value(LedgerEntry {
                id: 1,
                user: "alice".into(),
                job: Some(3),
                kind: LedgerKind::Hold,
                amount: m.next(),
                time: 1.0,
            })),
        ),
        (
            "UsageRow",
            v(serde_json::to_value(UsageRow {
                period: "all".into(),
                user: "alice".into(),
                jobs: 1,
                completed: 1,
                cpu_hours: 0.5,
                revenue: m.next(),
                account: "physics".into(),
            })),
        ),
        (
            "UserInfo",
            v(serde_json::to_value(UserInfo {
                name: "alice".into(),
                admin: false,
                available: m.next(),
                held: m.next(),
                unix_user: "alice".into(),
                allow_root: false,
                state: "active".into(),
            })),
        ),
        ("CreditRequest", v(serde_json::to_value(CreditRequest { user: "alice".into(), amount: m.next() }))),
        (
            "SweepCreate",
            v(serde_json::to_value(SweepCreate {
                plan: String::new(),
                resources: String::new(),
                name: None,
                deadline: None,
                deadline_in: Some(60.0),
                budget: m.next(),
                optimise: None,
                max_retries: None,
                estimate: None,
                seed: 0,
            })),
        ),
        ("SweepInfo", v(serde_json::to_value(sweep_info(m)))),
        (
            "SweepJob",
            v(serde_json::to_value(SweepJob {
                job: 1,
                params: serde_json::json!({"x": 1}),
                state: "done".into(),
                resource: Some("q".into()),
                attempts: 1,
                exit_code: Some(0),
                wall: Some(0.3),
                cost: m.next(),
                output: None,
                files: vec![],
            })),
        ),
        ("SweepBudget", v(serde_json::to_value(SweepBudget { budget: m.next() }))),
        (
            "MyAccount",
            v(serde_json::to_value(MyAccount {
                account: AccountInfo {
                    name: "physics".into(),
                    personal: false,
                    available: m.next(),
                    held: m.next(),
                    charged: m.next(),
                    credited: m.next(),
                    period_start: Some(1.0),
                    allocations: vec![AllocationInfo {
                        id: 1,
                        amount: m.next(),
                        start: 1.0,
                        end: 2.0,
                        remaining: m.next(),
                        active: true,
                    }],
                    members: vec![AccountMember {
                        user: "alice".into(),
                        limit: Some(m.next()),
                        used: m.next(),
                        default: true,
                    }],
                },
                limit: Some(m.next()),
                used: m.next(),
                available_to_me: m.next(),
                default: true,
            })),
        ),
        (
            "AccountUserAdd",
            v(serde_json::to_value(AccountUserAdd {
                user: "alice".into(),
                limit: Some(m.next()),
                default: false,
            })),
        ),
        ("AccountDeposit", v(serde_json::to_value(AccountDeposit { amount: m.next() }))),
        (
            "AccountEntry",
            v(serde_json::to_value(AccountEntry {
                id: 1,
                time: 1.5,
                kind: "hold".into(),
                user: Some("alice".into()),
                job: Some(3),
                allocation: Some(2),
                amount: m.next(),
            })),
        ),
        (
            "AccountTransfer",
            v(serde_json::to_value(AccountTransfer { from: "a".into(), to: "b".into(), amount: m.next() })),
        ),
        (
            "AccountAllocate",
            v(serde_json::to_value(AccountAllocate { amount: m.next(), start: 1.5, end: 2.5 })),
        ),
    ]
}

/// Every (path, key, integer) in `v`.
fn integers(v: &Value, path: &str, out: &mut Vec<(String, String, i64)>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                if let Some(n) = x.as_i64() {
                    out.push((path.to_string(), k.clone(), n));
                }
                integers(x, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                integers(x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_amount_of_money_is_named_cents() {
    let mut m = Markers(Markers::FIRST);
    let samples = samples(&mut m);
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    for (name, json) in &samples {
        let mut ints = Vec::new();
        integers(json, name, &mut ints);
        for (path, key, n) in ints {
            if m.is_marker(n) {
                seen.push(n);
                if !key.ends_with("_cents") {
                    wrong.push(format!("{path}.{key}"));
                }
            } else if key.ends_with("_cents") {
                wrong.push(format!("{path}.{key} is named as money but holds {n}, not an amount"));
            }
        }
    }
    assert!(wrong.is_empty(), "money in JSON without the _cents suffix: {wrong:?}");
    // Each marker once: no amount was dropped from the JSON (and so went unchecked).
    seen.sort_unstable();
    let all: Vec<i64> = (Markers::FIRST..m.0).collect();
    assert_eq!(seen, all, "some amounts did not reach the JSON");
}

/// The names before `_cents` are still read (clients, and rows stored, before the rename), and
/// the new names read back to the same value.
#[test]
fn old_names_still_read_and_new_names_round_trip() {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.strip_suffix("_cents").unwrap_or(k).to_string(), strip(x)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            x => x.clone(),
        }
    }
    fn again<T: serde::de::DeserializeOwned + serde::Serialize>(v: Value) -> Value {
        serde_json::to_value(serde_json::from_value::<T>(v).expect("reads")).unwrap()
    }
    let mut m = Markers(Markers::FIRST);
    for (name, json) in samples(&mut m) {
        for input in [json.clone(), strip(&json)] {
            let back = match name {
                "SubmitRequest" => again::<SubmitRequest>(input),
                "QuoteRequest" => again::<QuoteRequest>(input),
                "QuoteResponse" => again::<QuoteResponse>(input),
                "JobInfo" => again::<JobInfo>(input),
                "Balance" => again::<Balance>(input),
                "LedgerEntry" => again::<LedgerEntry>(input),
                "UsageRow" => again::<UsageRow>(input),
                "UserInfo" => again::<UserInfo>(input),
                "CreditRequest" => again::<CreditRequest>(input),
                "SweepCreate" => again::<SweepCreate>(input),
                "SweepInfo" => again::<SweepInfo>(input),
                "SweepJob" => again::<SweepJob>(input),
                "SweepBudget" => again::<SweepBudget>(input),
                "MyAccount" => again::<MyAccount>(input),
                "AccountUserAdd" => again::<AccountUserAdd>(input),
                "AccountDeposit" => again::<AccountDeposit>(input),
                "AccountEntry" => again::<AccountEntry>(input),
                "AccountTransfer" => again::<AccountTransfer>(input),
                "AccountAllocate" => again::<AccountAllocate>(input),
                other => panic!("{other}: add it to this match"),
            };
            assert_eq!(back, json, "{name}");
        }
    }
}
