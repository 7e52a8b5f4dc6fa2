//! The scheduler at the heart of the task-farming engine: what each resource is doing, what it
//! has shown it can do (calibration), what has been spent and held, and, at each event, how
//! many jobs to start where. No clock and no I/O: the real engine and the virtual-time
//! experiments drive the same value.

use crate::resources::ResourceConfig;
use libra_core::dbc::{self, Algorithm, Plan, PlanInput, ResourceState};
use libra_core::Money;

/// One attempt running on a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    pub attempt: i64,
    pub job: i64,
    pub started: f64,
    /// What the budget holds for it until it ends.
    pub hold: Money,
    /// Price per CPU-second agreed when it started.
    pub price: f64,
}

#[derive(Debug, Clone)]
pub struct FarmResource {
    pub cfg: ResourceConfig,
    /// Expected wall seconds per job before calibration (Libra's planners only).
    pub prior_secs: Option<f64>,
    pub running: Vec<Running>,
    /// Successful jobs measured so far, and their total wall and CPU seconds.
    pub done: u64,
    pub wall_sum: f64,
    pub cpu_sum: f64,
    pub failed: u64,
    pub spent: Money,
    /// False while the resource does not answer: it gets nothing until it returns.
    pub available: bool,
}

impl FarmResource {
    pub fn new(cfg: ResourceConfig, prior_secs: Option<f64>) -> Self {
        FarmResource {
            cfg,
            prior_secs,
            running: Vec::new(),
            done: 0,
            wall_sum: 0.0,
            cpu_sum: 0.0,
            failed: 0,
            spent: Money::ZERO,
            available: true,
        }
    }

    /// Measured wall seconds per job, else the prior.
    pub fn secs_per_job(&self, use_prior: bool) -> Option<f64> {
        if self.done > 0 {
            Some((self.wall_sum / self.done as f64).max(1e-6))
        } else if use_prior {
            self.prior_secs
        } else {
            None
        }
    }

    /// Measured CPU seconds per job, else the prior wall time, else `fallback`.
    pub fn cpu_per_job(&self, fallback: f64) -> f64 {
        use crate::resources::{Kind, LIBRA_MIN_ESTIMATE_SECS};
        let libra = self.cfg.kind() == Kind::Libra;
        let secs = if self.done > 0 && libra {
            // A Libra cluster prices a job by its runtime estimate, not by the CPU it ends up
            // using: budget its jobs by their measured wall time.
            self.wall_sum / self.done as f64
        } else if self.done > 0 {
            self.cpu_sum / self.done as f64
        } else {
            self.prior_secs.unwrap_or(fallback)
        };
        // Nor for less than the shortest estimate it is offered: a job measured at 0.3 s held
        // price x 0.3 s and was offered as a 1 s job, at 0.3 of the price per CPU-second.
        if libra {
            secs.max(LIBRA_MIN_ESTIMATE_SECS)
        } else {
            secs
        }
    }

    pub fn free_slots(&self) -> usize {
        (self.cfg.slots as usize).saturating_sub(self.running.len())
    }
}

/// How Libra's planners treat a resource whose job length is neither measured nor declared.
/// (The seed's heuristics always probe every such resource, as published.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Calibration {
    /// Assume the longest job length with which the jobs left could still all be done by the
    /// deadline within the budget (`Farm::bound_secs`): the planner then starts what the
    /// sweep would need if the jobs were that long, and nothing more. If the jobs are as long
    /// as the user's deadline and budget allow, that is exactly enough; if shorter, it costs a
    /// few jobs on queues the optimum would not use. The measured length replaces the
    /// assumption on each resource as soon as one of its jobs ends, and once any resource is
    /// measured the others are assumed no slower than the slowest measured one.
    #[default]
    Bound,
    /// One probe job on each unmeasured resource (only when the measured ones cannot carry
    /// the jobs), like the seed's calibration: the rule before `Bound`, kept for comparison
    /// (experiments name it `<planner>+probe-all`).
    ProbeAll,
}

impl Calibration {
    /// The suffix experiments give a planner run with this rule.
    pub fn suffix(self) -> &'static str {
        match self {
            Calibration::Bound => "",
            Calibration::ProbeAll => "+probe-all",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Farm {
    pub resources: Vec<FarmResource>,
    pub algorithm: Algorithm,
    /// Absolute time of the deadline on the driver's clock.
    pub deadline: f64,
    pub budget: Money,
    pub spent: Money,
    /// CPU seconds per job assumed for costing a resource nothing is known about.
    pub fallback_secs: f64,
    pub calibration: Calibration,
    /// The job length `Calibration::Bound` assumed at the last `decide` for resources not yet
    /// measured, so that the jobs it starts are held at what the plan priced them.
    pub assumed_secs: Option<f64>,
}

/// What to do now: jobs to start per resource, and the plan they came from.
#[derive(Debug, Clone)]
pub struct Decision {
    pub start: Vec<usize>,
    pub plan: Plan,
}

fn money_for(price: f64, cpu: f64) -> Money {
    Money::from_credits_f64_ceil(price * cpu.max(0.0)).unwrap_or(Money::from_cents(i64::MAX / 4))
}

impl Farm {
    pub fn held(&self) -> Money {
        self.resources.iter().flat_map(|r| &r.running).map(|x| x.hold).sum()
    }

    pub fn running(&self) -> usize {
        self.resources.iter().map(|r| r.running.len()).sum()
    }

    /// Budget not spent and not held for running jobs.
    pub fn budget_left(&self) -> Money {
        Money::from_cents((self.budget.cents() - self.spent.cents() - self.held().cents()).max(0))
    }

    /// The planning problem at `now` for `pending` jobs not yet started.
    pub fn input(&self, now: f64, pending: u64) -> PlanInput {
        self.input_assuming(now, pending, self.assumption(now, pending))
    }

    /// The job length to assume for unmeasured resources at `now`: `None` for the seed's
    /// heuristics, for `ProbeAll`, when every available resource has a length, or when no
    /// length makes the jobs feasible (then the planners probe, as before).
    fn assumption(&self, now: f64, pending: u64) -> Option<f64> {
        let use_prior = !self.algorithm.is_nimrod();
        if !use_prior || self.calibration != Calibration::Bound {
            return None;
        }
        if !self.resources.iter().any(|r| r.available && r.secs_per_job(true).is_none()) {
            return None;
        }
        let bound = self.bound_secs(now, pending)?;
        // Once some resources are measured, the bound alone would make the others look as
        // slow as the whole time left (the measured ones suffice), and a time-optimising
        // planner would never try them: assume them no slower than the slowest measured one.
        let slowest = self
            .resources
            .iter()
            .filter(|r| r.done > 0)
            .filter_map(|r| r.secs_per_job(true))
            .reduce(f64::max);
        Some(slowest.map_or(bound, |s| s.min(bound)))
    }

    /// The longest job length `L` such that, if every unmeasured resource took `L` seconds a
    /// job, the cheapest schedule of the `pending` jobs would still meet the deadline within
    /// the budget left (`dbc::optimal_cost`, the same capacity and cost model the planners
    /// use). Feasibility only gets harder as `L` grows (fewer jobs fit, each costs more), so
    /// this is a bisection. It is the user's own deadline and budget read as a bound on the
    /// job length, not a guess of it: whenever the jobs are no longer than this, a plan made
    /// with it carries every job in time and within the budget. `time_left` if even jobs that
    /// long fit (the measured resources suffice); `None` if no length fits.
    pub fn bound_secs(&self, now: f64, pending: u64) -> Option<f64> {
        let time_left = self.deadline - now;
        if pending == 0 || time_left <= 0.0 {
            return None;
        }
        let fits = |l: f64| {
            let input = self.input_assuming(now, pending, Some(l));
            dbc::optimal_cost(&input).is_some_and(|c| c <= input.budget_left)
        };
        if fits(time_left) {
            return Some(time_left);
        }
        // A millisecond job is the shortest the engine measures (see the bench's local queue).
        let (mut lo, mut hi) = (1e-3f64, time_left);
        if !fits(lo) {
            return None;
        }
        while hi - lo > 1e-6 * hi.max(1.0) {
            let mid = 0.5 * (lo + hi);
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    fn input_assuming(&self, now: f64, pending: u64, assumed: Option<f64>) -> PlanInput {
        let use_prior = !self.algorithm.is_nimrod();
        let time_left = self.deadline - now;
        let fallback = assumed.unwrap_or(self.fallback_secs);
        let resources = self
            .resources
            .iter()
            .map(|r| {
                let spj = r.secs_per_job(use_prior).or(assumed);
                let mut slots: Vec<f64> = r
                    .running
                    .iter()
                    .map(|x| match spj {
                        // A job running past its expected end is expected to end any moment.
                        Some(s) => (x.started + s - now).max(0.0),
                        None => time_left.max(0.0),
                    })
                    .collect();
                slots.resize(r.cfg.slots.max(r.running.len() as u32) as usize, 0.0);
                // Only free slots may be idle: a slot whose job overran is busy a moment more.
                for (k, s) in slots.iter_mut().enumerate() {
                    if k < r.running.len() && *s <= 0.0 {
                        *s = 1e-3;
                    }
                }
                ResourceState {
                    slot_free_in: slots,
                    secs_per_job: spj,
                    cost_per_job: money_for(r.cfg.price_at(now), r.cpu_per_job(fallback)),
                    available: r.available,
                }
            })
            .collect();
        PlanInput { resources, jobs_left: pending, time_left, budget_left: self.budget_left() }
    }

    /// Re-plans at `now` and says how many jobs to start on each resource now. Never starts a
    /// job whose hold would take spending plus holds above the budget.
    pub fn decide(&mut self, now: f64, pending: u64) -> Decision {
        self.assumed_secs = self.assumption(now, pending);
        let input = self.input_assuming(now, pending, self.assumed_secs);
        let plan = dbc::plan(self.algorithm, &input);
        let mut room = input.budget_left.cents();
        let mut start = vec![0usize; self.resources.len()];
        for (i, r) in self.resources.iter().enumerate() {
            let want = (plan.jobs[i] as usize).min(r.free_slots());
            let c = input.resources[i].cost_per_job.cents();
            for _ in 0..want {
                if c > room {
                    break;
                }
                room -= c;
                start[i] += 1;
            }
        }
        Decision { start, plan }
    }

    /// What one more job on resource `r` is expected to cost at `now`.
    pub fn job_cost(&self, r: usize, now: f64) -> Money {
        let res = &self.resources[r];
        money_for(res.cfg.price_at(now), res.cpu_per_job(self.cost_secs()))
    }

    /// Seconds a job on an unmeasured resource is costed at: the last assumption, else the
    /// fallback.
    fn cost_secs(&self) -> f64 {
        self.assumed_secs.unwrap_or(self.fallback_secs)
    }

    /// The CPU seconds a job started now on resource `r` is held (and, on a Libra cluster,
    /// offered) for: measured once the resource is calibrated, else the planner's assumption.
    pub fn job_secs(&self, r: usize) -> f64 {
        self.resources[r].cpu_per_job(self.cost_secs())
    }

    /// Records a start on resource `r`; returns the hold placed on the budget.
    pub fn start(&mut self, r: usize, attempt: i64, job: i64, now: f64) -> Money {
        let price = self.resources[r].cfg.price_at(now);
        let hold = money_for(price, self.job_secs(r));
        self.resources[r].running.push(Running { attempt, job, started: now, hold, price });
        hold
    }

    /// Records the end of an attempt and returns what is paid for it: price times CPU used,
    /// rounded up, but never more than the budget has left once the other holds are kept.
    pub fn finish(
        &mut self,
        r: usize,
        attempt: i64,
        wall: f64,
        cpu: f64,
        ok: bool,
    ) -> Option<(Running, Money)> {
        self.finish_billed(r, attempt, wall, cpu, ok, None)
    }

    /// As `finish`, for a resource that bills its own amount (a Libra cluster): that amount
    /// replaces price times CPU, under the same cap.
    pub fn finish_billed(
        &mut self,
        r: usize,
        attempt: i64,
        wall: f64,
        cpu: f64,
        ok: bool,
        billed: Option<Money>,
    ) -> Option<(Running, Money)> {
        let pos = self.resources[r].running.iter().position(|x| x.attempt == attempt)?;
        let run = self.resources[r].running.remove(pos);
        let charge = self.pay(r, billed.unwrap_or_else(|| money_for(run.price, cpu)));
        let res = &mut self.resources[r];
        if ok {
            res.done += 1;
            res.wall_sum += wall.max(0.0);
            res.cpu_sum += cpu.max(0.0);
        } else {
            res.failed += 1;
        }
        Some((run, charge))
    }

    /// Records an attempt a cancel stopped: it pays for the CPU it used (what its resource
    /// billed, else price times CPU, under the same cap as `finish`), and counts neither as done
    /// nor as failed.
    pub fn stop(
        &mut self,
        r: usize,
        attempt: i64,
        cpu: f64,
        billed: Option<Money>,
    ) -> Option<(Running, Money)> {
        let pos = self.resources[r].running.iter().position(|x| x.attempt == attempt)?;
        let run = self.resources[r].running.remove(pos);
        let charge = self.pay(r, billed.unwrap_or_else(|| money_for(run.price, cpu)));
        Some((run, charge))
    }

    /// Pays `asked` for an attempt on resource `r` (already taken off its running list): never
    /// more than the budget has left once the other holds are kept.
    fn pay(&mut self, r: usize, asked: Money) -> Money {
        let others = self.held();
        let room = Money::from_cents((self.budget.cents() - self.spent.cents() - others.cents()).max(0));
        let charge = asked.min(room);
        if charge < asked {
            tracing::warn!(resource = %self.resources[r].cfg.name, "job cost more than the budget had left; paid only what was left");
        }
        self.spent = self.spent + charge;
        let res = &mut self.resources[r];
        res.spent = res.spent + charge;
        charge
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{KindSpec, TestqueueSpec};

    fn res(name: &str, price: f64, slots: u32) -> FarmResource {
        let q = TestqueueSpec { cpu: Some(10.0), ..TestqueueSpec::new(10.0) };
        let cfg = ResourceConfig { slots, price, ..ResourceConfig::new(name, KindSpec::Testqueue(q)) };
        FarmResource::new(cfg, Some(10.0))
    }

    fn farm(deadline: f64, budget: i64) -> Farm {
        Farm {
            resources: vec![res("cheap", 1.0, 2), res("dear", 5.0, 2)],
            algorithm: Algorithm::Cost,
            deadline,
            budget: Money::from_credits(budget),
            spent: Money::ZERO,
            fallback_secs: 10.0,
            calibration: Calibration::Bound,
            assumed_secs: None,
        }
    }

    /// A Libra cluster's job measured shorter than the shortest estimate it is offered is held
    /// for that estimate: the sweep offers the resource's price per CPU-second of it, never less.
    #[test]
    fn a_libra_clusters_short_job_is_held_for_the_shortest_estimate_it_is_offered() {
        use crate::resources::{LibraSpec, LIBRA_MIN_ESTIMATE_SECS};
        let spec =
            LibraSpec { url: "http://127.0.0.1:1".into(), token: None, ca: None, insecure_http: false };
        let cfg = ResourceConfig { slots: 2, price: 5.0, ..ResourceConfig::new("c", KindSpec::Libra(spec)) };
        let mut f = Farm { resources: vec![FarmResource::new(cfg, Some(0.2))], ..farm(100.0, 1_000) };
        assert_eq!(f.job_secs(0), LIBRA_MIN_ESTIMATE_SECS, "from a prior of 0.2 s");
        f.resources[0].done = 2;
        f.resources[0].wall_sum = 0.6;
        assert_eq!(f.job_secs(0), LIBRA_MIN_ESTIMATE_SECS, "measured at 0.3 s");
        assert_eq!(f.start(0, 1, 1, 0.0), Money::from_credits(5));
        f.resources[0].wall_sum = 5.0;
        assert_eq!(f.job_secs(0), 2.5, "measured longer: as measured");
    }

    #[test]
    fn steering_the_deadline_and_budget_changes_the_plan() {
        // 8 jobs of 10 s: the cheap pair carries them all in 40 s.
        let mut f = farm(100.0, 1_000);
        assert_eq!(f.decide(0.0, 8).start, vec![2, 0]);
        // Deadline moved to 20 s: the cheap pair holds 4, the dear pair is needed now.
        f.deadline = 20.0;
        assert_eq!(f.decide(0.0, 8).start, vec![2, 2]);
        // Budget cut to what 4 cheap jobs cost (4 * 10 credits): no dear job starts.
        f.budget = Money::from_credits(40);
        assert_eq!(f.decide(0.0, 8).start, vec![2, 0]);
    }

    /// Three single-slot queues priced 1, 2, 3 with nothing known about the job length, six
    /// jobs, deadline 100 s; fallback costing at 1000 s, far from any bound.
    fn unmeasured(budget: i64, calibration: Calibration) -> Farm {
        let q = |name: &str, price: f64| {
            let cfg = ResourceConfig {
                slots: 1,
                price,
                ..ResourceConfig::new(name, KindSpec::Testqueue(TestqueueSpec::new(10.0)))
            };
            FarmResource::new(cfg, None)
        };
        Farm {
            resources: vec![q("a", 1.0), q("b", 2.0), q("c", 3.0)],
            algorithm: Algorithm::Cost,
            deadline: 100.0,
            budget: Money::from_credits(budget),
            spent: Money::ZERO,
            fallback_secs: 1000.0,
            calibration,
            assumed_secs: None,
        }
    }

    #[test]
    fn without_a_length_the_deadline_and_budget_bound_it_and_decide_what_starts() {
        // Budget 600: jobs up to 50 s fit (two a queue on all three, 2*50*(1+2+3) = 600), and
        // 50 s jobs need all three queues.
        let mut f = unmeasured(600, Calibration::Bound);
        let l = f.bound_secs(0.0, 6).unwrap();
        assert!((l - 50.0).abs() < 1e-3, "{l}");
        assert_eq!(f.decide(0.0, 6).start, vec![1, 1, 1]);
        // Budget 300: three a queue on the two cheap ones costs 9 L, so L <= 33.33; two a queue
        // on all three (12 L, L > 33.33) would cost over 400. The dear queue is not needed.
        let mut f = unmeasured(300, Calibration::Bound);
        let l = f.bound_secs(0.0, 6).unwrap();
        assert!((l - 100.0 / 3.0).abs() < 1e-2, "{l}");
        assert_eq!(f.decide(0.0, 6).start, vec![1, 1, 0]);
        // The jobs started are held at the assumed length (33.33 s: each job's cost is rounded
        // up to the cent, so 33.334 s would cost 300.03), not at the fallback's 1000 s.
        assert_eq!(f.start(0, 1, 1, 0.0), Money::from_cents(3333));
        // The rule it replaced probes every queue whatever the deadline and budget (costing a
        // probe at the fallback, here 10 s, so that the budget allows all three).
        let mut old = unmeasured(300, Calibration::ProbeAll);
        old.fallback_secs = 10.0;
        assert_eq!(old.decide(0.0, 6).start, vec![1, 1, 1]);
    }

    #[test]
    fn once_measured_the_others_are_assumed_no_slower_than_the_slowest_measured() {
        let mut f = unmeasured(600, Calibration::Bound);
        assert_eq!(f.decide(0.0, 6).start, vec![1, 1, 1]);
        for (r, a) in [(0, 1), (1, 2)] {
            f.start(r, a, a, 0.0);
        }
        f.start(2, 3, 3, 0.0);
        // The cheap queues' jobs took 10 s; the dear one's is still running.
        f.finish(0, 1, 10.0, 10.0, true);
        f.finish(1, 2, 10.0, 10.0, true);
        let d = f.decide(10.0, 3);
        assert_eq!(f.assumed_secs, Some(10.0));
        // Three more 10 s jobs fit on the cheapest queue by the deadline: only it gets one.
        assert_eq!(d.start, vec![1, 0, 0]);
    }

    #[test]
    fn charges_never_exceed_the_budget_even_when_jobs_overrun() {
        let mut f = farm(1_000.0, 25);
        let d = f.decide(0.0, 4);
        assert_eq!(d.start, vec![2, 0]);
        f.start(0, 1, 1, 0.0);
        f.start(0, 2, 2, 0.0);
        // Each was held at 10 credits; the first uses 20 CPU-seconds (20 credits).
        let (_, c1) = f.finish(0, 1, 20.0, 20.0, true).unwrap();
        assert_eq!(c1, Money::from_credits(15)); // 25 - the other job's hold of 10
        let (_, c2) = f.finish(0, 2, 10.0, 10.0, true).unwrap();
        assert_eq!(c2, Money::from_credits(10));
        assert_eq!(f.spent, Money::from_credits(25));
        assert_eq!(f.decide(30.0, 2).start, vec![0, 0]);
    }
}
