//! The portal end to end in a real headless Chromium against a real `libra server` and a real
//! `libra node`: sign in, a live quote (refused, then the suggestion taken in one click), submit,
//! watch the job finish on the node agent, see the balance change; a double click on Submit makes
//! one job and one on the credit form credits once; another user's job shows the
//! API's 403; an administrator sees the nodes picture, cancels a job, changes the base price and
//! the next quote changes; credit through the form; a sweep hosted by the server shows its
//! progress and its chart of jobs in execution per resource, and its budget is set from the page.
//! Screenshots go to target/portal-screenshots/.
//!
//! A second test, on two nodes: "Sign out" only once signed in; a two-node job's progress
//! counts its work over both nodes; the administrator's table of many jobs with long names fits
//! a 1280 px window.

#[macro_use]
mod common;

use common::browser::{Browser, R};
use libra_api::{JobState, SetPricing, SubmitRequest, SweepCreate};
use libra_core::{JobSpec, Money};
use libra_testkit::{exe, wait_until, Cluster, ADMIN_PW};

const ALICE_PW: &str = "pw-alice";

/// Two test queues of 0.3 s jobs for the hosted sweep (`wall` seconds at `time_scale`).
const SWEEP_RES: &str = "[[resource]]\nname = \"q-cheap\"\nkind = \"testqueue\"\nslots = 2\nprice = 1\nwall = 1\ntime_scale = 0.3\n\n[[resource]]\nname = \"q-dear\"\nkind = \"testqueue\"\nslots = 2\nprice = 2\nwall = 1\ntime_scale = 0.3\n";

fn credits(text: &str) -> R<Money> {
    let n = text.split_whitespace().next().unwrap_or("");
    n.parse::<Money>().map_err(|e| format!("'{text}' is not an amount: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portal_end_to_end() {
    // Before anything starts, so a machine without the browser hears at once what to install.
    Browser::require();
    let cluster = Cluster::start(1, 0.5, 15.0);
    let browser = Browser::start(&cluster.url).await;
    let result = run(&cluster, &browser).await;
    if result.is_err() {
        let _ = browser.shot("failure").await;
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
    let alice = cl.user("alice", 100);
    let bob = cl.user("bob", 100);
    let bobs = bob
        .submit(&SubmitRequest {
            name: Some("bob's".into()),
            ..SubmitRequest::new(JobSpec::simple(1.0, 60.0, Money::from_credits(10)), vec!["true".into()])
        })
        .map_err(|e| format!("bob's job: {e}"))?;

    // Sign in.
    b.open("").await?;
    b.wait_text("#h-login", "the sign-in page", |t| t == "Sign in").await?;
    b.shot("login").await?;
    // A wrong password is refused on the page, with the server's reason.
    b.fill("login-user", "alice").await?;
    b.fill("login-password", "not-her-password").await?;
    b.click("#login-submit").await?;
    b.wait_text("#login-error", "the refusal", |t| t.contains("401")).await?;
    b.login("alice", ALICE_PW).await?;

    // A live quote: a budget too small is refused with a suggestion; one click takes it.
    b.open("#submit").await?;
    b.wait_present("#job-command").await?;
    let burn = format!("{} burn --cpu-seconds 1", exe().display());
    b.fill("job-command", &burn).await?;
    b.fill("job-estimate", "2s").await?;
    b.fill("job-deadline", "60s").await?;
    b.fill("job-budget", "0.01").await?;
    b.wait_text("#quote-answer", "a refusal", |t| t.contains("rejected")).await?;
    let s = b.wait_text("#quote-answer .suggestion", "a suggestion", |t| t.contains("budget")).await?;
    b.shot("submit-rejected").await?;
    b.click("#take-suggestion").await?;
    b.wait_text("#quote-cost", "an accepted quote", |t| !t.is_empty()).await?;
    let budget = b.client.find(fantoccini::Locator::Id("job-budget")).await.map_err(|e| e.to_string())?;
    let taken = budget.prop("value").await.map_err(|e| e.to_string())?.unwrap_or_default();
    check!(
        s.contains(&format!("{taken} credits")),
        "the suggestion '{s}' was not put in the budget field ('{taken}')"
    );
    check!(
        credits(&taken)? > Money::from_cents(1),
        "the suggested budget {taken} is not above the refused one"
    );
    b.fill("job-budget", "50").await?;
    let cost = credits(&b.wait_text("#quote-cost", "a quote at budget 50", |t| !t.is_empty()).await?)?;
    b.shot("submit-quote").await?;

    // Submit; the job runs on the node agent and completes.
    b.click("#submit-job").await?;
    let link = b.wait_text("#submitted-link", "the accepted job", |t| t.starts_with("job ")).await?;
    let id: u64 = link.trim_start_matches("job ").parse().map_err(|e| format!("job id in '{link}': {e}"))?;
    b.click("#submitted-link").await?;
    b.wait_text("#job-detail .state", "the job to complete", |t| t == "COMPLETED").await?;
    b.wait_text("#job-stdout", "the job's output", |t| t.contains("burned")).await?;
    b.shot("job").await?;
    let job = alice.job(id).map_err(|e| e.to_string())?;
    // It pays for the CPU it used at the quoted rate (it may end before its estimate).
    let pro_rata =
        Money((cost.0 as f64 * job.cpu_seconds / job.estimate).floor() as i64).min(cost.max(job.budget));
    check!(
        job.state == JobState::Completed && job.cost == cost && job.charged == pro_rata,
        "job {id} settled as {job:?}, quoted {cost}, pro rata {pro_rata}"
    );
    let cost = job.charged;

    // A double click on Submit (the second before the first is answered) makes one job, not two.
    let jobs_before = alice.jobs(false).map_err(|e| e.to_string())?.len();
    b.open("#submit").await?;
    b.wait_present("#job-command").await?;
    b.fill("job-command", "true").await?;
    b.fill("job-estimate", "2s").await?;
    b.fill("job-deadline", "60s").await?;
    b.fill("job-budget", "50").await?;
    b.wait_text("#quote-cost", "a quote", |t| !t.is_empty()).await?;
    b.submit_twice("submit-form", "/api/jobs").await?;
    let said = b.wait_text("#submit-result", "the answer", |t| !t.is_empty()).await?;
    check!(said.starts_with("Accepted: job "), "the double-clicked job: {said}");
    let jobs = alice.jobs(false).map_err(|e| e.to_string())?;
    check!(
        jobs.len() == jobs_before + 1,
        "a double click on Submit made {} jobs ({said})",
        jobs.len() - jobs_before
    );
    let double = jobs.iter().max_by_key(|j| j.id).map(|j| j.id).unwrap_or_default();
    wait_until("the double-clicked job to end", || alice.job(double).ok().filter(|j| !j.state.is_active()));
    let cost = cost + alice.job(double).map_err(|e| e.to_string())?.charged;

    // The balance changed by the charge, and the page says so.
    b.open("#account").await?;
    let charged = b.wait_text("#balance-charged", "the charge", |t| !t.starts_with("0.00")).await?;
    let available = b.wait_text("#balance-available", "the balance", |t| !t.is_empty()).await?;
    check!(credits(&charged)? == cost, "the page says charged {charged}, the job was charged {cost}");
    check!(
        credits(&available)? == Money::from_credits(100) - cost,
        "available {available} after paying {cost}"
    );
    b.wait_present("#spending-svg circle").await?;
    b.shot("account").await?;

    // Another user's job: the page shows the API's refusal.
    b.open(&format!("#job/{}", bobs.id)).await?;
    let err = b.wait_text("#job-error", "the refusal", |t| t.contains("403")).await?;
    check!(err.contains("another user"), "the 403 message does not say why: {err}");
    check!(b.text("#job-detail").await.unwrap_or_default().is_empty(), "bob's job is shown to alice");
    b.shot("forbidden").await?;

    // Sweeps: one hosted by the server, watched and steered from the page.
    let sweep = alice
        .sweep_create(&SweepCreate {
            plan: "parameter x integer range from 1 to 30 step 1\ntask main\n    exec true\nendtask\n".into(),
            resources: SWEEP_RES.into(),
            name: Some("portal-sweep".into()),
            deadline: None,
            deadline_in: Some(600.0),
            budget: Money::from_credits(50),
            optimise: None,
            max_retries: None,
            estimate: None,
            seed: 0,
        })
        .map_err(|e| format!("the sweep: {e}"))?;
    b.open("#sweeps").await?;
    b.wait_text("#sweeps", "the sweep in the list", |t| t.contains("portal-sweep")).await?;
    b.wait_present("#sweeps progress").await?;
    b.shot("sweeps").await?;
    b.click("a.sweep-link").await?;
    b.wait_text("#sweep-progress", "the sweep to finish", |t| t.contains("30 of 30 jobs")).await?;
    b.wait_present("#sweep-usage-svg path.series-0").await?;
    b.wait_present("#sweep-usage-svg path.series-1").await?;
    b.fill("sweep-budget", "75").await?;
    b.click("#sweep-budget-save").await?;
    b.wait_text("#status", "the new budget", |t| t.contains("budget 75.00")).await?;
    b.wait_text("#sweep-money", "the new budget on the page", |t| t.contains("of 75.00 credits")).await?;
    let now = alice.sweep(sweep.id).map_err(|e| e.to_string())?;
    check!(now.budget == Money::from_credits(75), "the page set budget 75, the sweep has {}", now.budget);
    b.shot("sweep").await?;
    // Bob may not see it.
    check!(bob.sweep(sweep.id).map_err(|e| e.status()).err() == Some(Some(403)), "bob can see alice's sweep");
    // A sweep offering this cluster far less per CPU-second than it asks: its jobs are refused
    // (on the cluster's quote), and the sweep's page says so and why beside its progress.
    let cheap = format!(
        "[[resource]]\nname = \"own-cluster\"\nkind = \"libra\"\nslots = 1\nprice = 0.0001\nurl = \"{}\"\n",
        cl.url
    );
    let refused = alice
        .sweep_create(&SweepCreate {
            plan: "parameter x integer range from 1 to 2 step 1\ntask main\n    exec true\nendtask\n".into(),
            resources: cheap,
            name: Some("underpaid".into()),
            deadline: None,
            deadline_in: Some(600.0),
            budget: Money::from_credits(1),
            optimise: None,
            max_retries: None,
            estimate: Some(5.0),
            seed: 0,
        })
        .map_err(|e| format!("the underpaid sweep: {e}"))?;
    b.open(&format!("#sweep/{}", refused.id)).await?;
    let why = b
        .wait_text("#sweep-refused", "the refusal on the sweep's page", |t| {
            t.contains("own-cluster: its last job was refused")
        })
        .await?;
    let api = alice.sweep(refused.id).map_err(|e| e.to_string())?;
    let said = api.resources[0].refused.clone().unwrap_or_default();
    // The same refusal (its reason; the figures in it may move between the two readings).
    let reason = said.split(':').next().unwrap_or_default();
    check!(
        !reason.is_empty() && why.contains(&format!("s ago: {reason}")),
        "the page says '{why}', the API '{said}'"
    );
    // Offered for the job's own length (the sweep's estimate), not for what its hold, rounded
    // up to a cent, would pay for at that price (100 s).
    check!(said.contains("of its 5 s estimate"), "the job was offered for another length: {said}");
    b.shot("sweep-refused").await?;
    // The list of sweeps says which resource refused, so a sweep that stands still is seen there.
    b.open("#sweeps").await?;
    b.wait_text("#sweeps", "the refusal in the list", |t| t.contains("refused on own-cluster")).await?;
    alice.sweep_action(refused.id, "cancel").map_err(|e| format!("cancelling the underpaid sweep: {e}"))?;

    // The administrator: a long job shows as a segment on its node, and is cancelled from the page.
    let long = alice
        .submit(&SubmitRequest {
            name: Some("long".into()),
            ..SubmitRequest::new(
                JobSpec::simple(30.0, 600.0, Money::from_credits(50)),
                vec!["sleep".into(), "30".into()],
            )
        })
        .map_err(|e| format!("long job: {e}"))?;
    b.sign_out().await?;
    b.login("admin", ADMIN_PW).await?;
    b.open("#admin-nodes").await?;
    b.wait_present(&format!("#nodes-svg rect[data-job='{}']", long.id)).await?;
    b.shot("admin-nodes").await?;
    b.open("#admin-jobs").await?;
    b.click(&format!("button[aria-label='Cancel job {}']", long.id)).await?;
    wait_until("the cancel", || alice.job(long.id).ok().filter(|j| j.state == JobState::Cancelled));
    b.wait_text("#alljobs-table", "the cancelled job", |t| t.contains("CANCELLED")).await?;
    b.shot("admin-jobs").await?;

    // The price changes, and the next quote with the same fields changes with it.
    let fields = [
        ("job-command", burn.as_str()),
        ("job-estimate", "2s"),
        ("job-deadline", "60s"),
        ("job-budget", "90"),
    ];
    b.open("#submit").await?;
    for (id, v) in fields {
        b.fill(id, v).await?;
    }
    let before = credits(&b.wait_text("#quote-cost", "a quote", |t| !t.is_empty()).await?)?;
    let pbase = cl.admin().pricing().map_err(|e| e.to_string())?.nodes[0].price_base;
    b.open("#admin-pricing").await?;
    b.wait_text("#prices-table", "the prices", |t| t.contains("n0")).await?;
    b.fill("pbase-value", &(pbase * 3.0).to_string()).await?;
    b.click("#pbase-save").await?;
    b.wait_text("#status", "the saved price", |t| t.starts_with("Base price")).await?;
    b.shot("admin-pricing").await?;
    let now = cl.admin().pricing().map_err(|e| e.to_string())?.nodes[0].price_base;
    check!((now - pbase * 3.0).abs() <= 1e-9, "PBase is {now}, the form set {}", pbase * 3.0);
    b.open("#submit").await?;
    for (id, v) in fields {
        b.fill(id, v).await?;
    }
    let after = b.wait_text("#quote-cost", "a new quote", |t| credits(t).is_ok_and(|c| c != before)).await?;
    check!(credits(&after)? > before, "the quote went from {before} to {after} when PBase tripled");
    // Put the price back for the rest.
    cl.admin()
        .set_pricing(&SetPricing { price_base: Some(pbase), ..Default::default() })
        .map_err(|e| e.to_string())?;

    // Usage and users; credit through the form.
    b.open("#admin-usage").await?;
    b.wait_text("#usage-table", "usage", |t| t.contains("alice")).await?;
    b.shot("admin-usage").await?;
    b.open("#admin-users").await?;
    b.wait_text("#users-table", "users", |t| t.contains("bob")).await?;
    let before = bob.balance().map_err(|e| e.to_string())?.available;
    b.client
        .find(fantoccini::Locator::Css("#credit-user option[value='bob']"))
        .await
        .map_err(|e| e.to_string())?
        .click()
        .await
        .map_err(|e| e.to_string())?;
    b.fill("credit-amount", "12.50").await?;
    // Added with a double click: credited once.
    b.submit_twice("credit-form", "/api/admin/credit").await?;
    b.wait_text("#status", "the credit", |t| t.starts_with("bob now has")).await?;
    let after = bob.balance().map_err(|e| e.to_string())?.available;
    check!(after == before + Money::from_cents(1250), "bob had {before}, has {after} after 12.50 credit");
    // Another click after the answer is a credit of its own.
    b.fill("credit-amount", "1").await?;
    b.click("#credit-add").await?;
    b.wait_text("#status", "the second credit", |t| {
        t.contains(&(after + Money::from_credits(1)).to_string())
    })
    .await?;
    b.shot("admin-users").await?;

    // A phone's width: the submission page still fits.
    b.client.set_window_size(390, 844).await.map_err(|e| e.to_string())?;
    b.open("#submit").await?;
    b.wait_present("#job-command").await?;
    let overflow = b
        .client
        .execute("return document.documentElement.scrollWidth > window.innerWidth + 1;", vec![])
        .await
        .map_err(|e| e.to_string())?;
    check!(overflow == serde_json::Value::Bool(false), "the submission page is wider than a phone");
    b.shot("phone-submit").await?;
    b.sign_out().await?;
    b.login("alice", ALICE_PW).await?;
    b.open(&format!("#sweep/{}", sweep.id)).await?;
    b.wait_present("#sweep-usage-svg").await?;
    let overflow = b
        .client
        .execute("return document.documentElement.scrollWidth > window.innerWidth + 1;", vec![])
        .await
        .map_err(|e| e.to_string())?;
    check!(overflow == serde_json::Value::Bool(false), "the sweep page is wider than a phone");
    b.shot("phone-sweep").await?;
    Ok(())
}

/// Longer than any column should be: one word, so only breaking it keeps the table narrow.
const LONG: &str = "parameter-sweep-of-the-ocean-model-with-a-very-long-name";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portal_layout_on_two_nodes() {
    Browser::require();
    let cluster = Cluster::start(2, 0.5, 15.0);
    let browser = Browser::start(&cluster.url).await;
    let mut sleepers = Vec::new();
    let result = layout(&cluster, &browser, &mut sleepers).await;
    if result.is_err() {
        let _ = browser.shot("layout-failure").await;
    }
    browser.close().await;
    // The sleeping jobs would outlive their node agents (each runs under its own keeper).
    let admin = cluster.admin();
    for id in sleepers {
        let _ = admin.admin_job(id, "cancel");
    }
    if let Err(e) = result {
        panic!(
            "{e}\n(server log: {})",
            std::fs::read_to_string(cluster.dir.join("server.log")).unwrap_or_default()
        );
    }
}

async fn displayed(b: &Browser, css: &str) -> R<bool> {
    let e = b.client.find(fantoccini::Locator::Css(css)).await.map_err(|e| format!("{css}: {e}"))?;
    e.is_displayed().await.map_err(|e| format!("{css} displayed: {e}"))
}

async fn layout(cl: &Cluster, b: &Browser, sleepers: &mut Vec<u64>) -> R<()> {
    let user = "carol-from-the-department-of-oceanography";
    let carol = cl.user(user, 1000);

    // Nobody is signed in: the page offers no "Sign out" (nor any other navigation).
    b.client.set_window_size(1280, 900).await.map_err(|e| e.to_string())?;
    b.open("").await?;
    b.wait_text("#h-login", "the sign-in page", |t| t == "Sign in").await?;
    check!(!displayed(b, "#signout").await?, "'Sign out' is shown on the sign-in page");
    check!(!displayed(b, "#nav").await?, "the navigation is shown on the sign-in page");
    b.login(user, &format!("pw-{user}")).await?;
    check!(displayed(b, "#signout").await?, "no 'Sign out' once signed in");

    // A job on both nodes: its CPU is counted over both, so its work is twice its estimate.
    let two = carol
        .submit(&SubmitRequest {
            name: Some("on-two-nodes".into()),
            ..SubmitRequest::new(
                JobSpec::simple(1.0, 120.0, Money::from_credits(100)).with_procs(2),
                vec![exe().display().to_string(), "burn".into(), "--cpu-seconds".into(), "1".into()],
            )
        })
        .map_err(|e| format!("the two-node job: {e}"))?;
    check!(two.nodes.len() == 2, "the two-node job was not put on two nodes: {two:?}");
    let done = wait_until("the two-node job", || carol.job(two.id).ok().filter(|j| !j.state.is_active()));
    check!(done.state == JobState::Completed, "the two-node job ended {:?}", done.state);
    b.open(&format!("#job/{}", two.id)).await?;
    let text = b.wait_text("#job-detail .progress", "the job's progress", |t| t.contains("CPU-s")).await?;
    // Rendered text: the bar and its label may sit on two lines.
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (used, rest) = text.split_once(" of ").ok_or(format!("progress '{text}'"))?;
    check!(rest == "2.0 CPU-s on 2 nodes", "progress '{text}': the work is 2 x 1.0 CPU-s on 2 nodes");
    let used: f64 = used.trim().parse().map_err(|e| format!("progress '{text}': {e}"))?;
    check!(
        (used - done.cpu_seconds).abs() <= 0.051,
        "progress '{text}' but the job used {} CPU-s",
        done.cpu_seconds
    );
    b.shot("two-node-job").await?;

    // Many jobs with long names and commands, all active (so with Suspend and Cancel, the widest
    // actions), for the administrator's table.
    for i in 0..24 {
        let (command, name) = if i % 3 == 0 {
            (vec!["sh".into(), "-c".into(), format!("sleep 120 # {LONG}-{i}")], None)
        } else {
            (vec!["sleep".into(), "120".into()], Some(format!("{LONG}-{i}")))
        };
        let j = carol
            .submit(&SubmitRequest {
                name,
                ..SubmitRequest::new(JobSpec::simple(1.0, 3600.0, Money::from_credits(10)), command)
            })
            .map_err(|e| format!("job {i}: {e}"))?;
        check!(j.state.is_active(), "job {i} was not accepted: {j:?}");
        sleepers.push(j.id);
    }
    let last = *sleepers.last().unwrap_or(&0);
    b.sign_out().await?;
    check!(!displayed(b, "#signout").await?, "'Sign out' is still shown after signing out");
    b.login("admin", ADMIN_PW).await?;
    b.open("#admin-jobs").await?;
    b.wait_present(&format!("button[aria-label='Cancel job {last}']")).await?;
    b.wait_text("#alljobs-table", "the two-node job", |t| t.contains("on 2 nodes")).await?;
    let m = b
        .client
        .execute(
            "var w = document.getElementById('alljobs-table'); var t = w.querySelector('table'); \
             return [window.innerWidth, w.scrollWidth, w.clientWidth, t.getBoundingClientRect().right, \
                     document.documentElement.scrollWidth];",
            vec![],
        )
        .await
        .map_err(|e| e.to_string())?;
    let m: Vec<f64> = m.as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).collect()).unwrap_or_default();
    b.shot("admin-jobs-1280").await?;
    check!(m.len() == 5, "measurements {m:?}");
    let (inner, scroll, client, right, page) = (m[0], m[1], m[2], m[3], m[4]);
    check!(inner == 1280.0, "the window is {inner} px wide, not 1280");
    check!(
        scroll <= client && right <= inner && page <= inner,
        "the jobs table does not fit {inner} px: it needs {scroll} px in a box of {client} px, \
         ends at {right} px, the page is {page} px wide"
    );
    Ok(())
}

/// The daily tools in the portal, on a node that takes jobs and never starts them (a stand-in
/// agent that registers and syncs, reporting nothing): the queue view hides another user's job,
/// the jobs page holds and releases a job, and the job page changes its deadline and budget
/// (refused with what would do, then accepted at a new price).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portal_queue_hold_release_and_update() {
    Browser::require();
    let cluster = Cluster::start(0, 1.0, 15.0);
    // The users first: a user is mapped to a Unix account against the agents registered.
    let dave = cluster.user("dave", 100);
    let erin = cluster.user("erin", 100);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ghost = {
        let node = libra_api::Client::new(&cluster.url, Some(libra_testkit::JOIN.into()));
        let reg = libra_api::RegisterRequest {
            name: "idle-node".into(),
            cpus: 1.0,
            mem_mb: 0,
            mechanism: "none".into(),
            account: String::new(),
            switches_users: false,
        };
        node.register(&reg).expect("register the stand-in node");
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = node.sync(&libra_api::SyncRequest {
                    name: "idle-node".into(),
                    mechanism: "none".into(),
                    running: Vec::new(),
                    exited: Vec::new(),
                    wait_ms: 0,
                });
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        })
    };
    let browser = Browser::start(&cluster.url).await;
    let result = daily(&browser, &dave, &erin).await;
    if result.is_err() {
        let _ = browser.shot("daily-failure").await;
    }
    browser.close().await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = ghost.join();
    if let Err(e) = result {
        panic!(
            "{e}\n(server log: {})",
            std::fs::read_to_string(cluster.dir.join("server.log")).unwrap_or_default()
        );
    }
}

async fn daily(b: &Browser, dave: &libra_api::Client, erin: &libra_api::Client) -> R<()> {
    let job = |name: &str, budget: i64| SubmitRequest {
        name: Some(name.into()),
        ..SubmitRequest::new(JobSpec::simple(10.0, 600.0, Money::from_credits(budget)), vec!["true".into()])
    };
    let theirs = erin.submit(&job("erins-private-job", 20)).map_err(|e| format!("erin's job: {e}"))?;
    let mine = dave.submit(&job("daves-job", 20)).map_err(|e| format!("dave's job: {e}"))?;
    check!(mine.state == JobState::Pending && theirs.state == JobState::Pending, "{mine:?} {theirs:?}");
    b.login("dave", "pw-dave").await?;

    // The queue: both jobs, erin's as "other" without its name.
    b.open("#queue").await?;
    let q = b
        .wait_text("#queue-table", "both jobs in the queue", |t| {
            t.contains("daves-job") && t.contains("other")
        })
        .await?;
    check!(!q.contains("erin"), "the queue shows erin's job to dave: {q}");
    b.shot("queue").await?;

    // Hold from the jobs page: the promise and the hold are given up.
    b.open("#jobs").await?;
    b.click(&format!("button[aria-label='Hold job {}']", mine.id)).await?;
    b.wait_text("#status", "the hold", |t| t.contains("HELD")).await?;
    let held = dave.job(mine.id).map_err(|e| e.to_string())?;
    let balance = dave.balance().map_err(|e| e.to_string())?;
    check!(held.state == JobState::Held && balance.held == Money::ZERO, "{held:?} {balance:?}");
    // Release: admitted again, held again.
    b.click(&format!("button[aria-label='Release job {}']", mine.id)).await?;
    b.wait_text("#status", "the release", |t| t.contains("released")).await?;
    let back = dave.job(mine.id).map_err(|e| e.to_string())?;
    let balance = dave.balance().map_err(|e| e.to_string())?;
    check!(back.state == JobState::Pending && balance.held == back.cost, "{back:?} {balance:?}");

    // Change from the job page: a budget too small is refused with what would do; a later
    // deadline is accepted and re-priced.
    b.open(&format!("#job/{}", mine.id)).await?;
    b.wait_text("#job-detail .state", "the job", |t| t == "PENDING").await?;
    b.fill("update-budget", "0.01").await?;
    b.click("#update-submit").await?;
    let no = b.wait_text("#update-answer", "the refusal", |t| t.contains("refused")).await?;
    check!(no.contains("budget") && no.contains("would be accepted"), "{no}");
    check!(
        dave.job(mine.id).map_err(|e| e.to_string())?.budget == Money::from_credits(20),
        "the refusal changed the budget"
    );
    b.fill("update-budget", "").await?;
    b.fill("update-deadline", "2h").await?;
    b.click("#update-submit").await?;
    let yes = b.wait_text("#update-answer", "the change", |t| t.contains("updated")).await?;
    let changed = dave.job(mine.id).map_err(|e| e.to_string())?;
    check!(
        changed.deadline_at > back.deadline_at + 3000.0 && yes.contains(&held_text(changed.cost)),
        "{yes} / {changed:?}"
    );
    b.shot("job-updated").await?;

    // A job waiting on another shows what it waits on, each dependency a link to its page.
    let first = dave.submit(&job("daves-first", 20)).map_err(|e| format!("dave's first job: {e}"))?;
    check!(first.state == JobState::Pending, "{first:?}");
    let waiter = dave
        .submit(&SubmitRequest {
            dependencies: vec![libra_core::dependency::Dependency {
                kind: libra_core::dependency::DepKind::AfterOk,
                job: first.id,
                task: None,
            }],
            ..SubmitRequest::new(JobSpec::simple(10.0, 1200.0, Money::from_credits(20)), vec!["true".into()])
        })
        .map_err(|e| format!("dave's waiting job: {e}"))?;
    check!(waiter.waiting, "{waiter:?}");
    b.open(&format!("#job/{}", waiter.id)).await?;
    let detail = b
        .wait_text("#job-detail", "the dependencies", |t| t.contains(&format!("afterok:{}", first.id)))
        .await?;
    check!(detail.contains("waiting") && detail.contains("waiting on dependencies"), "{detail}");
    check!(
        b.text(&format!("#job-detail .deps a[href='#job/{}']", first.id)).await.unwrap_or_default()
            == first.id.to_string(),
        "the dependency links to its job"
    );
    check!(
        b.text(&format!("button[aria-label='Hold job {}']", waiter.id)).await.is_none()
            && !displayed(b, "#update-form").await?,
        "a waiting job offers a hold or a change the server refuses"
    );
    b.shot("job-dependencies").await?;
    dave.cancel(waiter.id).map_err(|e| e.to_string())?;
    dave.cancel(first.id).map_err(|e| e.to_string())?;
    dave.cancel(mine.id).map_err(|e| e.to_string())?;
    erin.cancel(theirs.id).map_err(|e| e.to_string())?;
    Ok(())
}

/// What the portal says is held, as it shows credits.
fn held_text(m: Money) -> String {
    format!("{} credits on hold", m)
}
