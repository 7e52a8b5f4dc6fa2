//! Writing an experiment's results: a table or JSON on stdout, and CSV, JSON, Markdown and SVG
//! files in the output directory.

use super::experiment::{ensure_dir, points_json, study_grid, study_table};
use crate::output::{emit, filled_table, Said, Text};
use anyhow::Context;
use libra_core::policy::Placement;
use libra_sim::experiment::libraplus::Study;
use libra_sim::experiment::placement::{PlacementPoint, POLICIES};
use libra_sim::experiment::table1::Cell;
use libra_sim::experiment::Point;
use libra_sim::report;
use serde_json::json;
use std::path::Path;

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// One table model for every file an experiment writes: `libra_sim::report` (Markdown cells are
/// escaped there, numeric columns right-aligned).
fn report_table(headers: &[String], rows: &[Vec<String>]) -> report::Table {
    report::Table { headers: headers.to_vec(), rows: rows.to_vec() }
}

fn markdown(headers: &[String], rows: &[Vec<String>]) -> anyhow::Result<String> {
    Ok(report::to_markdown(&report_table(headers, rows))?)
}

fn csv_text(headers: &[String], rows: &[Vec<String>]) -> anyhow::Result<String> {
    let mut buf = Vec::new();
    report::write_csv_to(&mut buf, &report_table(headers, rows))?;
    Ok(String::from_utf8(buf)?)
}

pub fn table1(out: &Path, cells: &[Cell], as_json: bool) -> anyhow::Result<()> {
    let headers: Vec<String> =
        ["jobs", "nodes", "FIFO in time", "Libra in time", "paper FIFO", "paper Libra", "Libra wins (draws)"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|c| {
            vec![
                c.jobs.to_string(),
                c.nodes.to_string(),
                format!("{:.1}", c.fifo_completed),
                format!("{:.1}", c.libra_completed),
                c.paper_fifo_completed.to_string(),
                c.paper_libra_completed.to_string(),
                format!("{}/{}", c.libra_wins, c.seeds),
            ]
        })
        .collect();
    let value = json!({ "cells": cells });
    ensure_dir(out)?;
    write(&out.join("libra-table1.json"), &serde_json::to_string_pretty(&value)?)?;
    write(&out.join("libra-table1.csv"), &csv_text(&headers, &rows)?)?;
    write(&out.join("libra-table1.md"), &markdown(&headers, &rows)?)?;
    let series: Vec<(String, Vec<(f64, f64)>)> = vec![
        ("FIFO".into(), cells.iter().enumerate().map(|(i, c)| (i as f64 + 1.0, c.fifo_completed)).collect()),
        (
            "Libra".into(),
            cells.iter().enumerate().map(|(i, c)| (i as f64 + 1.0, c.libra_completed)).collect(),
        ),
        (
            "paper FIFO".into(),
            cells.iter().enumerate().map(|(i, c)| (i as f64 + 1.0, c.paper_fifo_completed as f64)).collect(),
        ),
        (
            "paper Libra".into(),
            cells.iter().enumerate().map(|(i, c)| (i as f64 + 1.0, c.paper_libra_completed as f64)).collect(),
        ),
    ];
    libra_sim::plot::line_chart(
        out.join("libra-table1.svg"),
        "Libra Table 1: jobs completed in time (cells 1-4: 100/10, 100/20, 200/10, 200/20)",
        "cell",
        "jobs completed in time",
        &series,
    )?;
    emit(&Said::new(&value, Text::new().line(filled_table(&headers, rows))), as_json)?;
    wrote(out, as_json);
    Ok(())
}

/// Writes one or more studies: `NAME.json` with every point (`{"points": [...]}`), and per study
/// a CSV, a Markdown table and two SVG plots (QoS satisfaction and profitability).
pub fn studies(
    out: &Path,
    name: &str,
    studies: &[(Study, Vec<Point>)],
    as_json: bool,
    trace: &Path,
) -> anyhow::Result<()> {
    ensure_dir(out)?;
    let all: Vec<Point> = studies.iter().flat_map(|(_, p)| p.iter().cloned()).collect();
    let value = points_json(&all);
    write(&out.join(format!("{name}.json")), &serde_json::to_string_pretty(&value)?)?;
    let trace_name = trace.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
    let mut md = format!(
        "# {name}\n\nTrace: `{trace_name}`. QoS = Job QoS Satisfaction (eq. 7), profit = Cluster Profitability (eq. 8).\n"
    );
    let mut tables = Vec::new();
    for (study, points) in studies {
        let base = study.name;
        write(&out.join(format!("{base}.csv")), &csv_text(&HEADERS.map(String::from), &rows(points))?)?;
        let table = study_table(study, points);
        let (h, r) = study_grid(study, points);
        md.push_str(&format!("\n## {}\n\n{}", study.x_label, markdown(&h, &r)?));
        plots(out, study, points)?;
        tables.push(table);
    }
    write(&out.join(format!("{name}.md")), &md)?;
    emit(&Said::new(&value, tables.into_iter().fold(Text::new(), Text::line)), as_json)?;
    wrote(out, as_json);
    Ok(())
}

const HEADERS: [&str; 11] = [
    "study",
    "x",
    "policy",
    "beta",
    "qos_satisfaction",
    "profitability",
    "accepted",
    "completed_in_time",
    "mean_wait",
    "mean_bounded_slowdown",
    "utilisation",
];

fn rows(points: &[Point]) -> Vec<Vec<String>> {
    points
        .iter()
        .map(|p| {
            vec![
                p.study.clone(),
                format!("{}", p.x),
                p.policy.clone(),
                format!("{}", p.beta),
                format!("{:.4}", p.qos_satisfaction),
                format!("{:.4}", p.profitability),
                p.accepted.to_string(),
                p.completed_in_time.to_string(),
                format!("{:.1}", p.mean_wait),
                format!("{:.3}", p.mean_bounded_slowdown),
                format!("{:.4}", p.utilisation),
            ]
        })
        .collect()
}

fn plots(out: &Path, study: &Study, points: &[Point]) -> anyhow::Result<()> {
    let base = study.name;
    let mut series_names: Vec<String> = Vec::new();
    for p in points {
        if !series_names.contains(&p.series()) {
            series_names.push(p.series());
        }
    }
    for (metric, label) in [("qos", "Job QoS Satisfaction (%)"), ("profit", "Cluster Profitability (%)")] {
        let series: Vec<(String, Vec<(f64, f64)>)> = series_names
            .iter()
            .map(|s| {
                let pts = points
                    .iter()
                    .filter(|p| &p.series() == s)
                    .map(|p| {
                        (p.x, 100.0 * if metric == "qos" { p.qos_satisfaction } else { p.profitability })
                    })
                    .collect();
                (s.clone(), pts)
            })
            .collect();
        libra_sim::plot::line_chart(
            out.join(format!("{base}-{metric}.svg")),
            &format!("{base}: {label}"),
            study.x_label,
            label,
            &series,
        )?;
    }
    Ok(())
}

const PLACEMENT_HEADERS: [&str; 11] = [
    "policy",
    "delay_factor",
    "placement",
    "qos_satisfaction",
    "profitability",
    "accepted",
    "completed_in_time",
    "revenue",
    "charged_cpu_seconds",
    "mean_price_per_cpu_second",
    "utilisation",
];

/// The placement comparison: `placement.json` (every point), `placement.csv`, `placement.md`
/// (per policy, the runs at `headline`, the Table I delay factor, then every delay factor) and
/// two SVG plots (QoS satisfaction and the price paid, over the delay factor).
pub fn placement(
    out: &Path,
    points: &[PlacementPoint],
    headline: f64,
    as_json: bool,
    trace: &Path,
) -> anyhow::Result<()> {
    ensure_dir(out)?;
    let value = json!({ "points": points });
    write(&out.join("placement.json"), &serde_json::to_string_pretty(&value)?)?;
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.policy.clone(),
                format!("{}", p.delay_factor),
                p.placement.to_string(),
                format!("{:.4}", p.qos_satisfaction),
                format!("{:.4}", p.profitability),
                p.accepted.to_string(),
                p.completed_in_time.to_string(),
                p.revenue.to_string(),
                format!("{:.0}", p.charged_cpu_seconds),
                format!("{:.4}", p.mean_price),
                format!("{:.4}", p.utilisation),
            ]
        })
        .collect();
    write(&out.join("placement.csv"), &csv_text(&PLACEMENT_HEADERS.map(String::from), &rows)?)?;
    let headers: Vec<String> = [
        "placement",
        "Job QoS Satisfaction",
        "Cluster Profitability",
        "mean price paid (credits/CPU-s)",
        "accepted",
        "revenue",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let names: Vec<String> = Placement::ALL.iter().map(|p| p.to_string()).collect();
    let mut grid_headers = vec!["arrival delay factor".to_string()];
    for n in &names {
        grid_headers.extend([format!("{n} QoS"), format!("{n} profit"), format!("{n} price")]);
    }
    let mut xs: Vec<f64> = Vec::new();
    for p in points {
        if !xs.contains(&p.delay_factor) {
            xs.push(p.delay_factor);
        }
    }
    let trace_name = trace.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
    let mut md = format!(
        "# placement\n\nTrace: `{trace_name}`, Table I model. QoS = Job QoS Satisfaction (eq. 7), profit = \
         Cluster Profitability (eq. 8), price = what users were charged over the CPU-seconds (estimates) \
         they were charged for, in credits per CPU-second.\n"
    );
    let mut tables = Vec::new();
    for policy in POLICIES {
        let mine: Vec<&PlacementPoint> = points.iter().filter(|p| p.policy == policy).collect();
        let at_headline: Vec<Vec<String>> = mine
            .iter()
            .filter(|p| p.delay_factor == headline)
            .map(|p| {
                vec![
                    p.placement.to_string(),
                    format!("{:.1}%", 100.0 * p.qos_satisfaction),
                    format!("{:.1}%", 100.0 * p.profitability),
                    format!("{:.4}", p.mean_price),
                    p.accepted.to_string(),
                    p.revenue.to_string(),
                ]
            })
            .collect();
        let grid: Vec<Vec<String>> = xs
            .iter()
            .map(|&x| {
                let mut row = vec![format!("{x}")];
                for n in &names {
                    match mine.iter().find(|p| p.delay_factor == x && &p.placement.to_string() == n) {
                        Some(p) => row.extend([
                            format!("{:.1}%", 100.0 * p.qos_satisfaction),
                            format!("{:.1}%", 100.0 * p.profitability),
                            format!("{:.4}", p.mean_price),
                        ]),
                        None => row.extend(["-".to_string(), "-".to_string(), "-".to_string()]),
                    }
                }
                row
            })
            .collect();
        md.push_str(&format!(
            "\n## {policy}, arrival delay factor {headline}\n\n{}\n## {policy}, every arrival delay factor\n\n{}",
            markdown(&headers, &at_headline)?,
            markdown(&grid_headers, &grid)?
        ));
        tables.push((policy, filled_table(&headers, at_headline), filled_table(&grid_headers, grid)));
    }
    write(&out.join("placement.md"), &md)?;
    for (metric, label) in
        [("qos", "Job QoS Satisfaction (%)"), ("price", "mean price paid (credits per CPU-second)")]
    {
        let series: Vec<(String, Vec<(f64, f64)>)> = POLICIES
            .iter()
            .flat_map(|policy| Placement::ALL.iter().map(move |pl| (*policy, *pl)))
            .map(|(policy, pl)| {
                let pts = points
                    .iter()
                    .filter(|p| p.policy == policy && p.placement == pl)
                    .map(|p| {
                        (
                            p.delay_factor,
                            if metric == "qos" { 100.0 * p.qos_satisfaction } else { p.mean_price },
                        )
                    })
                    .collect();
                (format!("{policy} {pl}"), pts)
            })
            .collect();
        libra_sim::plot::line_chart(
            out.join(format!("placement-{metric}.svg")),
            &format!("node choice: {label}"),
            "arrival delay factor",
            label,
            &series,
        )?;
    }
    let text = tables.into_iter().fold(Text::new(), |text, (policy, t, g)| {
        text.line(format!("{policy}, arrival delay factor {headline}:\n{t}\n{g}"))
    });
    emit(&Said::new(&value, text), as_json)?;
    wrote(out, as_json);
    Ok(())
}

/// Where the files went, for people (on standard error: standard output is the table).
fn wrote(out: &Path, as_json: bool) {
    if !as_json {
        eprintln!("wrote {}", out.display());
    }
}
