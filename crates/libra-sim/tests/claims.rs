//! The papers' qualitative claims, checked on the real SDSC SP2 trace with the Table I model.
//! Each test would fail if the policy, pricing or engine it rests on broke. Claims that do not
//! reproduce are recorded in REPRODUCING.md with the numbers, not asserted here.

use libra_core::PricingParams;
use libra_sim::engine::ClusterConfig;
use libra_sim::experiment::libraplus::{run_study, study};
use libra_sim::experiment::{table1, Point};
use libra_sim::swf::{read_swf, ReadMode, SwfRecord};
use libra_sim::workload::libra_batches::NODE_MIPS;
use libra_sim::workload::libraplus::LibraPlusModel;
use std::path::PathBuf;
use std::sync::OnceLock;

fn sdsc() -> &'static [SwfRecord] {
    static RECORDS: OnceLock<Vec<SwfRecord>> = OnceLock::new();
    RECORDS.get_or_init(|| {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/traces/SDSC-SP2-1998-4.2-cln.swf.gz");
        read_swf(&p, ReadMode::Strict)
            .unwrap_or_else(|e| {
                panic!("the SDSC SP2 trace must sit in ../shared/traces beside the checkout: {e}")
            })
            .records
    })
}

fn points(name: &str) -> Vec<Point> {
    let s = study(name).unwrap();
    run_study(
        &s,
        sdsc(),
        &LibraPlusModel::default(),
        PricingParams::default(),
        ClusterConfig { nodes: 128, price_base: 1.0 },
        &|| {},
    )
    .unwrap()
}

fn at<'a>(pts: &'a [Point], x: f64, series: &str) -> &'a Point {
    pts.iter()
        .find(|p| p.x == x && p.series() == series)
        .unwrap_or_else(|| panic!("no point {series} at {x}"))
}

#[test]
fn table1_libra_completes_more_jobs_in_time_than_fifo_in_every_cell() {
    let cells = table1::run(20, 1, NODE_MIPS, PricingParams::default(), &|| {}).unwrap();
    for c in &cells {
        assert!(c.libra_completed > c.fifo_completed, "{c:?}");
        assert!(c.libra_wins * 2 > c.seeds, "Libra should win most draws: {c:?}");
    }
}

/// The claim does not hang on our node speed (the paper leaves it open): it holds from half to
/// twice the 100 MIPS we chose, though the counts themselves move a lot (REPRODUCING.md).
#[test]
fn table1_claim_holds_at_half_and_twice_our_node_speed() {
    for mips in [NODE_MIPS / 2.0, NODE_MIPS * 2.0] {
        let cells = table1::run(20, 1, mips, PricingParams::default(), &|| {}).unwrap();
        for c in &cells {
            assert!(c.libra_completed > c.fifo_completed, "{mips} MIPS: {c:?}");
        }
    }
    let slow = table1::run(5, 1, NODE_MIPS / 2.0, PricingParams::default(), &|| {}).unwrap();
    let ours = table1::run(5, 1, NODE_MIPS, PricingParams::default(), &|| {}).unwrap();
    assert!(slow[0].fifo_completed < ours[0].fifo_completed, "slower nodes finish fewer jobs in time");
}

#[test]
fn fig2_workload_qos_and_profitability() {
    let pts = points("libraplus-fig2");
    // As the workload falls, Libra and Libra+$ satisfy more jobs than FCFS-BF and EDF-BF.
    for x in [0.75, 1.0] {
        for ours in ["libra", "libra+$ beta=0.1"] {
            for base in ["fcfs-bf", "edf-bf"] {
                assert!(
                    at(&pts, x, ours).qos_satisfaction > at(&pts, x, base).qos_satisfaction,
                    "{ours} vs {base} at {x}"
                );
            }
        }
    }
    // Libra+$ earns more than Libra at every workload, and more than the backfilling policies.
    for x in [0.1, 0.25, 0.5, 0.75, 1.0] {
        let plus = at(&pts, x, "libra+$ beta=0.1").profitability;
        for other in ["libra", "fcfs-bf", "sjf-bf", "edf-bf"] {
            assert!(plus > at(&pts, x, other).profitability, "libra+$ vs {other} at {x}");
        }
    }
    // Lighter load: more satisfied jobs for every policy.
    for s in ["libra", "libra+$ beta=0.1", "fcfs-bf", "edf-bf", "sjf-bf"] {
        assert!(at(&pts, 1.0, s).qos_satisfaction > at(&pts, 0.1, s).qos_satisfaction, "{s}");
    }
}

#[test]
fn fig3_beta_trades_satisfaction_for_profit_up_to_a_point() {
    let pts = points("libraplus-fig3");
    let plus: Vec<&Point> = pts.iter().filter(|p| p.policy == "libra+$").collect();
    assert!(plus.first().unwrap().qos_satisfaction > plus.last().unwrap().qos_satisfaction + 0.2);
    let best = plus.iter().max_by(|a, b| a.profitability.total_cmp(&b.profitability)).unwrap();
    assert!(best.x > 0.0 && best.x < 1.0, "profit should peak at an inner beta, peaked at {}", best.x);
    assert!(best.profitability > plus[0].profitability);
    assert!(best.profitability > plus.last().unwrap().profitability);
}

#[test]
fn fig4_higher_beta_gains_more_as_the_workload_falls() {
    let pts = points("libraplus-fig4");
    let gain = |s: &str| at(&pts, 1.0, s).profitability - at(&pts, 0.25, s).profitability;
    assert!(gain("libra+$ beta=0.5") > gain("libra+$ beta=0.1"));
    for x in [0.1, 0.25, 0.5, 0.75, 1.0] {
        assert!(at(&pts, x, "libra+$ beta=0.1").profitability > at(&pts, x, "libra").profitability);
    }
}

#[test]
fn fig6_higher_beta_tolerates_under_estimates_better() {
    let pts = points("libraplus-fig6");
    for x in [10.0, 20.0, 30.0, 40.0] {
        let low = at(&pts, x, "libra+$ beta=0.1");
        let high = at(&pts, x, "libra+$ beta=1");
        assert!(high.qos_satisfaction > low.qos_satisfaction, "QoS at {x}%");
        assert!(high.profitability > low.profitability, "profit at {x}%");
    }
    // Exact estimates are where a high beta costs the most satisfaction.
    assert!(
        at(&pts, 0.0, "libra+$ beta=0.1").qos_satisfaction > at(&pts, 0.0, "libra+$ beta=1").qos_satisfaction
    );
}
