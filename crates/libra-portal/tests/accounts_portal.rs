//! Accounts (projects) in the portal, in a real headless Chromium against a real `libra server`
//! and node: a member sees the accounts they may charge with their limit and use, charges a job
//! to a shared account from the submission form, and an administrator sees usage per account and
//! per user and every account's credit and members.

#[macro_use]
mod common;

use common::browser::{Browser, R};
use libra_api::{AccountUserAdd, JobState, SubmitRequest};
use libra_core::{JobSpec, Money};
use libra_testkit::{exe, wait_until, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_in_the_portal() {
    Browser::require();
    let cluster = Cluster::start(1, 1.0, 15.0);
    let browser = Browser::start(&cluster.url).await;
    let result = run(&cluster, &browser).await;
    if result.is_err() {
        let _ = browser.shot("accounts-failure").await;
    }
    browser.close().await;
    if let Err(e) = result {
        panic!(
            "{e}\n(server log: {})",
            std::fs::read_to_string(cluster.dir.join("server.log")).unwrap_or_default()
        );
    }
}

async fn run(cl: &Cluster, b: &Browser) -> R<()> {
    let e = |e: libra_api::ClientError| e.to_string();
    let alice = cl.user("alice", 10);
    let admin = cl.admin();
    admin.account_create("physics").map_err(e)?;
    admin
        .account_add_user(
            "physics",
            &AccountUserAdd { user: "alice".into(), limit: Some(Money::from_credits(40)), default: false },
        )
        .map_err(e)?;
    admin.account_deposit("physics", Money::from_credits(300)).map_err(e)?;
    let first = alice
        .submit(&SubmitRequest {
            account: Some("physics".into()),
            ..SubmitRequest::new(JobSpec::simple(1.0, 60.0, Money::from_credits(10)), vec!["true".into()])
        })
        .map_err(e)?;
    check!(first.account.as_deref() == Some("physics"), "the job went to {:?}", first.account);

    // The member's view: her personal account and physics, with her limit.
    b.login("alice", "pw-alice").await?;
    b.open("#account").await?;
    let t = b.wait_text("#accounts", "alice's accounts", |t| t.contains("physics")).await?;
    check!(t.contains("alice (personal)") && t.contains("40.00"), "accounts table: {t}");
    b.shot("accounts-member").await?;

    // The submission form charges the account chosen.
    b.open("#submit").await?;
    b.wait_text("#job-account", "the accounts to charge", |t| t.contains("physics")).await?;
    b.click("#job-account option[value='physics']").await?;
    let burn = format!("{} burn --cpu-seconds 0.2", exe().display());
    b.fill("job-command", &burn).await?;
    b.fill("job-estimate", "1s").await?;
    b.fill("job-deadline", "60s").await?;
    b.fill("job-budget", "10").await?;
    b.wait_text("#quote-cost", "a quote", |t| !t.is_empty()).await?;
    b.click("#submit-job").await?;
    let said = b.wait_text("#submitted", "the accepted job", |t| t.starts_with("Accepted")).await?;
    check!(said.contains("against account physics"), "the form said: {said}");
    let id: u64 = said
        .split("job ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("no job id in '{said}'"))?;
    let job = wait_until("the form's job to end", || alice.job(id).ok().filter(|j| !j.state.is_active()));
    check!(job.state == JobState::Completed && job.account.as_deref() == Some("physics"), "{job:?}");
    wait_until("the first job to end", || alice.job(first.id).ok().filter(|j| !j.state.is_active()));

    // The administrator's usage, per account and per user, and the accounts' credit.
    b.sign_out().await?;
    b.login("admin", libra_testkit::ADMIN_PW).await?;
    b.open("#admin-usage").await?;
    b.wait_text("#usage-table", "usage", |t| t.contains("alice")).await?;
    b.click("#usage-group option[value='account-user']").await?;
    let t =
        b.wait_text("#usage-table", "usage per account and user", |t| t.contains("physics / alice")).await?;
    check!(t.contains("Account / user"), "usage table: {t}");
    let t = b.wait_text("#usage-accounts", "the accounts", |t| t.contains("physics")).await?;
    check!(t.contains("alice (limit 40.00"), "accounts table: {t}");
    b.shot("accounts-admin-usage").await?;
    Ok(())
}
