//! `libra quote`: prices now, and what a job would cost, without submitting.

use super::common::{money, now, Conn};
use super::submit::JobOpts;
use crate::output::{emit, table, Said, Text};
use anyhow::Result;
use clap::Args;
use libra_api::QuoteRequest;

#[derive(Debug, Args)]
pub struct QuoteArgs {
    #[command(flatten)]
    pub opts: JobOpts,
    #[command(flatten)]
    pub conn: Conn,
}

pub fn run(a: QuoteArgs) -> Result<()> {
    let mut opts = a.opts;
    // Prices alone need no job: quote a one-CPU-second job due in a minute.
    let bare = opts.estimate.is_none() && opts.deadline.is_none();
    if bare {
        opts.estimate = Some("1s".into());
        opts.deadline = Some("60s".into());
    }
    if opts.budget.is_none() {
        opts.budget = Some("1000000000".into());
    }
    let mut req = QuoteRequest::new(opts.spec(now())?);
    // Quoted as it would be submitted: a job that waits is decided for the window after what it
    // waits for.
    req.dependencies = opts.dependencies()?;
    let client = a.conn.client()?;
    let q = client.quote(&req)?;
    // Against an account: what the caller may hold there (refused, naming the caller's
    // accounts, when they are not a member).
    let account = opts.account.as_deref().map(|n| client.account(n)).transpose()?;
    let text = quote_text(&q, bare, account.as_ref());
    match account {
        None => emit(&Said::new(&q, text), a.conn.json)?,
        Some(acc) => {
            let mut v = serde_json::to_value(&q)?;
            v["account"] = serde_json::to_value(&acc)?;
            emit(&Said::new(&v, text), a.conn.json)?
        }
    }
    // As `libra submit` would exit: a job that would be rejected is a failure to a script.
    if !bare && !q.accepted {
        anyhow::bail!("the job would be rejected now: {}", q.reason.as_deref().unwrap_or("no reason given"));
    }
    Ok(())
}

/// A quote for people: every node's price, then what would become of the job (unless only the
/// prices were asked for) and what the account has for it.
fn quote_text(q: &libra_api::QuoteResponse, bare: bool, account: Option<&libra_api::MyAccount>) -> Text {
    let mut t = table(&["NODE", "STATE", "CPUS", "LOAD", "PBASE/CPU-S", "PRICE NOW/CPU-S"]);
    for p in &q.prices {
        t.add_row(vec![
            p.node.clone(),
            if p.up { "up" } else { "down" }.into(),
            format!("{:.2}", p.cpus),
            format!("{:.3}", p.load),
            format!("{:.4}", p.price_base),
            p.price_now.map_or("-".into(), |v| format!("{v:.4}")),
        ]);
    }
    let text = Text::new().line(format!("policy {}\n{t}", q.policy));
    if bare {
        return text;
    }
    let text = match (q.accepted, q.cost) {
        (true, Some(c)) => text.line(format!(
            "the job would be accepted now on {} at share {:.3} for {}",
            q.nodes.join(","),
            q.share.unwrap_or(0.0),
            money(c)
        )),
        _ => text
            .line(format!("the job would be rejected now: {}", q.reason.as_deref().unwrap_or("-")))
            .line_if(
                q.suggestion
                    .as_ref()
                    .map(|s| format!("suggestion: deadline {:.0}s, budget {}", s.deadline.ceil(), s.budget)),
            ),
    };
    let text = text.line_if(q.dependency.clone());
    text.line_if(account.map(|acc| {
        let short = q.accepted && q.cost.is_some_and(|c| acc.available_to_me < c);
        format!(
            "account {}: {} available to you{}",
            acc.account.name,
            money(acc.available_to_me),
            if short { " (less than the cost: the job would be refused)" } else { "" }
        )
    }))
}
