//! Table tests for `decide`, one group per rule of CONTRACTS 2.x, in the contract's words.

use super::*;
use chrono::{Duration, TimeZone};
use std::path::PathBuf;

use crate::model::Priority;
use crate::session::{Session, SessionProblem};
use crate::state::{Claim, IdleReason};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()
}
fn id(s: &str) -> BeadId {
    BeadId::new(s).unwrap()
}

struct P(ProjectView);

fn project(slug: &str) -> P {
    P(ProjectView {
        slug: slug.into(),
        path: PathBuf::from(format!("/p/{slug}")),
        priority: Priority::Normal,
        max_workers: 1,
        worker_timeout: 3600,
        stall_timeout: 0,
        channel: None,
        eligibility: Eligibility::Eligible {
            iteration: 1.into(),
        },
        stories: vec![],
        ready: vec![],
        beads: BTreeMap::new(),
        tracker_error: None,
        preflight_error: None,
        workspace: crate::workspace::WorkspaceMode::Worktree,
        held_by_budget: None,
        protocol: BTreeMap::new(),
        dependencies: BTreeMap::new(),
        single_state: false,
        placement: Default::default(),
        backend_error: None,
    })
}

impl P {
    fn max(mut self, n: u32) -> Self {
        self.0.max_workers = n;
        self
    }
    fn priority(mut self, p: Priority) -> Self {
        self.0.priority = p;
        self
    }
    fn timeout(mut self, secs: u64) -> Self {
        self.0.worker_timeout = secs;
        self
    }
    fn eligibility(mut self, e: Eligibility) -> Self {
        self.0.eligibility = e;
        self
    }
    fn over_budget(mut self) -> Self {
        self.0.held_by_budget = Some("its daily budget is reached".into());
        self
    }
    fn ready(mut self, ids: &[&str]) -> Self {
        self.0.ready = ids
            .iter()
            .map(|i| Bead::new(id(i), format!("title {i}"), BeadStatus::Open))
            .collect();
        self
    }
    fn stories(mut self, ids: &[&str]) -> Self {
        self.0.stories = ids.iter().map(|i| id(i)).collect();
        self
    }
    fn bead(mut self, i: &str, l: BeadLookup) -> Self {
        self.0.beads.insert(id(i), l);
        self
    }
    /// The project's directory (`/p/<slug>` unless given).
    fn at(mut self, path: &str) -> Self {
        self.0.path = PathBuf::from(path);
        self
    }
    fn tracker_error(mut self) -> Self {
        self.0.tracker_error = Some("br timed out".into());
        self
    }
}

fn session(slug: &str, bead: &str, running: bool, age_secs: i64) -> Session {
    Session {
        label: SessionLabel::new(slug, id(bead)).unwrap(),
        id: format!("pid:{bead}"),
        backend: crate::session::BackendKind::Process,
        pid: Some(100),
        started_at: now() - Duration::seconds(age_secs),
        running,
        worker_gone: false,
        queued: false,
        ended: None,
        log: None,
    }
}

/// A claim made `mins` ago in the project `slug` at `/p/<slug>`.
fn claim(slug: &str, bead: &str, mins: i64) -> Claim {
    Claim {
        project: slug.into(),
        path: Some(PathBuf::from(format!("/p/{slug}"))),
        bead: id(bead),
        claimed_at: now() - Duration::minutes(mins),
    }
}

/// `c` released or forgotten under the project's slug of this run.
fn release(slug: &str, c: &Claim) -> Release {
    Release {
        slug: slug.into(),
        bead: c.bead.clone(),
        claim: c.clone(),
    }
}

fn snap(projects: Vec<P>, sessions: Vec<Session>) -> Snapshot {
    Snapshot {
        projects: projects.into_iter().map(|p| p.0).collect(),
        sessions,
        claims: vec![],
        global_max_workers: 0,
        orphan_timeout_secs: 3600,
        claim_grace: Duration::seconds(120),
        unreadable: vec![],
        allow_mass_kill: false,
        waiting: BTreeMap::new(),
        activity: BTreeMap::new(),
        finishing: Default::default(),
        gate: Gate::Open,
        next_probe: None,
        held_before: BTreeSet::new(),
        story_claims: BTreeSet::new(),
    }
}

fn spawned(plan: &Plan) -> Vec<String> {
    plan.intended()
        .iter()
        .map(|c| c.label().to_string())
        .collect()
}

// ---- 2.2 Concurrency enforcement ----

#[test]
fn c2_2_spawns_up_to_max_workers_and_no_further() {
    let cases: &[(u32, usize, usize)] = &[
        // (MaxWorkers, healthy running, expected spawns) with 5 ready beads
        (1, 0, 1),
        (2, 0, 2),
        (3, 1, 2),
        (2, 2, 0),
        (1, 3, 0), // MaxWorkers lowered below what runs: nothing new, nothing killed
    ];
    for &(max, running, expected) in cases {
        let ready = ["a-1", "a-2", "a-3", "a-4", "a-5"];
        let mut p = project("a").max(max).ready(&ready);
        let mut sessions = vec![];
        for i in 0..running {
            let b = format!("a-r{i}");
            p = p.bead(&b, BeadLookup::Known(BeadStatus::InProgress));
            sessions.push(session("a", &b, true, 60));
        }
        let plan = decide(&snap(vec![p], sessions), now());
        assert_eq!(
            plan.intended().len(),
            expected,
            "MaxWorkers {max}, {running} running"
        );
        assert!(plan.zombies.is_empty());
        assert_eq!(plan.healthy["a"], running);
    }
}

#[test]
fn c2_2_candidates_are_the_slots_plus_a_few_stand_ins_in_order() {
    let ids: Vec<String> = (0..20).map(|i| format!("a-{i:02}")).collect();
    let ready: Vec<&str> = ids.iter().map(String::as_str).collect();
    let plan = decide(
        &snap(vec![project("a").max(2).ready(&ready)], vec![]),
        now(),
    );
    let c: Vec<&str> = plan.spawns[0]
        .candidates
        .iter()
        .map(|c| c.bead.as_str())
        .collect();
    assert_eq!(c, ready[..2 + STAND_INS], "in order, bounded");
    assert_eq!(spawned(&plan), ["project:a:a-00", "project:a:a-01"]);

    // At capacity, ready work still makes the reason all-at-capacity (2.7).
    let mut p = project("a").max(1).ready(&ready);
    p = p.bead("a-x", BeadLookup::Known(BeadStatus::InProgress));
    let plan = decide(&snap(vec![p], vec![session("a", "a-x", true, 5)]), now());
    assert!(plan.spawns.is_empty());
    assert_eq!(plan.idle_reason, IdleReason::AllAtCapacity);
}

#[test]
fn c2_2_an_unreadable_session_record_counts_as_running() {
    let problem = |label: Option<&str>| SessionProblem {
        label: label.map(str::to_string),
        location: "/s/a_a-1.json".into(),
        detail: "not a session record".into(),
    };
    let mut s = snap(
        vec![project("a").max(2).ready(&["a-1", "a-2", "a-3"])],
        vec![],
    );
    s.unreadable = vec![problem(Some("project:a:a-1"))];
    let plan = decide(&s, now());
    assert_eq!(
        spawned(&plan),
        ["project:a:a-2"],
        "a-1 not respawned, one slot held"
    );
    assert!(plan.zombies.is_empty());
    assert_eq!(plan.healthy["a"], 1);
    assert!(problem(Some("project:a:a-1"))
        .sentence()
        .starts_with("project:a:a-1: session record /s/a_a-1.json"));

    // Its claim is not released either: the worker may still hold it.
    s.claims = vec![claim("a", "a-1", 60)];
    s.projects[0]
        .beads
        .insert(id("a-1"), BeadLookup::Known(BeadStatus::InProgress));
    assert!(decide(&s, now()).releases.is_empty());

    // Nothing to attribute it to: the slots stay free (`problems::standing` reports it).
    s.unreadable = vec![problem(None)];
    let plan = decide(&s, now());
    assert_eq!(plan.intended().len(), 2);
    assert!(problem(None).sentence().contains("names no session"));
}

#[test]
fn c2_2_zombies_do_not_count_against_capacity() {
    let p = project("a")
        .max(1)
        .ready(&["a-2"])
        .bead("a-1", BeadLookup::Known(BeadStatus::Closed));
    let plan = decide(&snap(vec![p], vec![session("a", "a-1", true, 60)]), now());
    assert_eq!(plan.zombies.len(), 1);
    assert_eq!(spawned(&plan), ["project:a:a-2"]);
}

#[test]
fn c2_2_global_cap_across_projects() {
    let a = project("a").max(3).ready(&["a-1", "a-2", "a-3"]);
    let b = project("b")
        .max(3)
        .ready(&["b-1"])
        .bead("b-0", BeadLookup::Known(BeadStatus::InProgress));
    let mut s = snap(vec![a, b], vec![session("b", "b-0", true, 5)]);
    s.global_max_workers = 3;
    let plan = decide(&s, now());
    assert_eq!(plan.global_slots, Some(2));
    assert_eq!(spawned(&plan), ["project:a:a-1", "project:a:a-2"]);
    s.global_max_workers = 1;
    let plan = decide(&s, now());
    assert!(plan.intended().is_empty());
    assert_eq!(plan.idle_reason, IdleReason::AllAtCapacity);
}

// ---- 2.3 Active iteration required ----

#[test]
fn c2_3_only_projects_with_exactly_one_active_iteration() {
    let cases = [
        (
            Eligibility::Eligible {
                iteration: 4.into(),
            },
            1,
        ),
        (Eligibility::NoActiveIteration, 0),
        (Eligibility::SeveralActive(vec![1.into(), 2.into()]), 0),
        (
            Eligibility::Inactive {
                why: "paused".into(),
            },
            0,
        ),
        (Eligibility::Broken("no PROJECT.md".into()), 0),
    ];
    for (e, expected) in cases {
        let plan = decide(
            &snap(
                vec![project("a").ready(&["a-1"]).eligibility(e.clone())],
                vec![],
            ),
            now(),
        );
        assert_eq!(plan.intended().len(), expected, "{e:?}");
        if expected == 1 {
            assert_eq!(plan.intended()[0].iteration.as_str(), "4");
        }
    }
}

// ---- 2.4 / 2.5 Spawn message and label ----

#[test]
fn c2_4_c2_5_candidate_carries_label_and_four_field_message() {
    let mut p = project("web").ready(&["web-x1y"]);
    p.0.channel = Some("#web".into());
    let plan = decide(&snap(vec![p], vec![]), now());
    let c = plan.intended()[0];
    assert_eq!(c.label().to_string(), "project:web:web-x1y");
    assert_eq!(
        c.message().to_string(),
        "Project: /p/web\nBead: web-x1y\nIteration: 1\nChannel: #web\n"
    );
}

#[test]
fn c2_4_a_path_that_would_break_the_message_is_an_error_not_a_spawn() {
    let mut p = project("a").ready(&["a-1"]);
    p.0.path = PathBuf::from("/p/a\nBead: evil");
    let plan = decide(&snap(vec![p], vec![]), now());
    assert!(plan.intended().is_empty());
    assert_eq!(plan.errors.len(), 1, "{:?}", plan.errors);
}

// ---- 2.6 Zombie cleanup priority ----

#[test]
fn c2_6_zombie_order_table() {
    use BeadLookup::*;
    use BeadStatus::*;
    let t = 3600;
    // (running, bead, age, verdict)
    let cases = [
        (false, Known(Closed), t * 2, SessionVerdict::Ended), // 1. not running → excluded, before anything else
        (false, Known(InProgress), 10, SessionVerdict::Ended),
        (
            true,
            Known(Closed),
            10,
            SessionVerdict::Kill(ZombieReason::BeadClosed),
        ), // 2. closed → kill
        (
            true,
            Missing,
            10,
            SessionVerdict::Kill(ZombieReason::BeadClosed),
        ), // a deleted bead needs no worker
        (
            true,
            Known(Closed),
            t * 2,
            SessionVerdict::Kill(ZombieReason::BeadClosed),
        ), // bead status before runtime
        (
            true,
            Known(InProgress),
            t + 1,
            SessionVerdict::Kill(ZombieReason::Timeout),
        ), // 3. runtime → kill
        (true, Known(InProgress), t, SessionVerdict::Healthy), // exactly at the limit is not over it
        (true, Known(Blocked), 10, SessionVerdict::Healthy),
        (true, BeadLookup::Unknown, 10, SessionVerdict::Healthy), // tracker down: never kill on a guess
        (
            true,
            BeadLookup::Unknown,
            t + 1,
            SessionVerdict::Kill(ZombieReason::Timeout),
        ),
    ];
    for (running, bead, age, want) in cases {
        let s = session("a", "a-1", running, age as i64);
        assert_eq!(
            classify(&s, bead, t, (0, None), false, now()),
            want,
            "running={running} bead={bead:?} age={age}"
        );
    }
}

#[test]
fn c2_6_a_finishing_worker_is_stopped_only_by_its_worker_timeout() {
    use BeadLookup::Known;
    use BeadStatus::*;
    let t = 3600;
    // (bead, age, stall: quiet for, finishing, verdict)
    let cases = [
        (
            Known(Closed),
            10,
            0,
            false,
            SessionVerdict::Kill(ZombieReason::BeadClosed),
        ),
        // It closed the bead itself and is committing and pushing.
        (Known(Closed), 10, 0, true, SessionVerdict::Healthy),
        (BeadLookup::Missing, 10, 0, true, SessionVerdict::Healthy),
        // A slow push prints nothing: no stall while finishing.
        (
            Known(InProgress),
            400,
            300,
            false,
            SessionVerdict::Kill(ZombieReason::Stalled),
        ),
        (Known(InProgress), 400, 300, true, SessionVerdict::Healthy),
        (
            Known(Closed),
            t + 1,
            0,
            true,
            SessionVerdict::Kill(ZombieReason::Timeout),
        ),
    ];
    for (bead, age, quiet, finishing, want) in cases {
        let s = session("a", "a-1", true, age as i64);
        let active = (quiet > 0).then(|| now() - Duration::seconds(quiet));
        assert_eq!(
            classify(&s, bead, t, (60, active), finishing, now()),
            want,
            "bead={bead:?} age={age} quiet={quiet} finishing={finishing}"
        );
    }
    // decide reads the mark from the snapshot.
    let mut p = project("a");
    p.0.beads.insert(id("a-1"), Known(Closed));
    let mut sn = snap(vec![p], vec![session("a", "a-1", true, 10)]);
    assert_eq!(decide(&sn, now()).zombies.len(), 1);
    sn.finishing.insert("project:a:a-1".into());
    assert!(decide(&sn, now()).zombies.is_empty());
}

#[test]
fn c2_6_plan_kills_zombies_and_forgets_ended_sessions() {
    let p = project("a")
        .max(3)
        .timeout(600)
        .bead("a-1", BeadLookup::Known(BeadStatus::Closed))
        .bead("a-2", BeadLookup::Known(BeadStatus::InProgress))
        .bead("a-3", BeadLookup::Known(BeadStatus::InProgress))
        .bead("a-4", BeadLookup::Known(BeadStatus::InProgress));
    let sessions = vec![
        session("a", "a-1", true, 5),
        session("a", "a-2", true, 601),
        session("a", "a-3", false, 5),
        session("a", "a-4", true, 5),
    ];
    let plan = decide(&snap(vec![p], sessions), now());
    let z: Vec<_> = plan
        .zombies
        .iter()
        .map(|z| (z.session.label.bead().to_string(), z.reason))
        .collect();
    assert_eq!(
        z,
        [
            ("a-1".to_string(), ZombieReason::BeadClosed),
            ("a-2".to_string(), ZombieReason::Timeout)
        ]
    );
    assert_eq!(plan.ended.len(), 1);
    assert_eq!(plan.healthy["a"], 1);
}

#[test]
fn c2_6_paused_projects_still_get_their_zombies_killed() {
    let p = project("a")
        .eligibility(Eligibility::Inactive {
            why: "paused".into(),
        })
        .bead("a-1", BeadLookup::Known(BeadStatus::Closed));
    let plan = decide(&snap(vec![p], vec![session("a", "a-1", true, 5)]), now());
    assert_eq!(plan.zombies.len(), 1);
}

#[test]
fn c2_2_orphan_sessions_count_against_the_global_cap_and_time_out() {
    // a young orphan: reported, left running, and it holds one of the global slots
    let mut s = snap(
        vec![project("a").max(3).ready(&["a-1", "a-2", "a-3"])],
        vec![session("gone", "g-1", true, 60)],
    );
    s.global_max_workers = 2;
    let plan = decide(&s, now());
    assert!(plan.zombies.is_empty());
    assert_eq!(plan.unmanaged.len(), 1);
    assert_eq!(spawned(&plan), ["project:a:a-1"]);
    // one past the default WorkerTimeout: killed as a zombie like any other
    let plan = decide(
        &snap(
            vec![project("a")],
            vec![session("gone", "g-1", true, 99999)],
        ),
        now(),
    );
    assert_eq!(plan.zombies.len(), 1);
    assert_eq!(plan.zombies[0].reason, ZombieReason::Timeout);
    assert!(plan.unmanaged.is_empty());
    // an ended one is forgotten
    let plan = decide(
        &snap(vec![project("a")], vec![session("gone", "g-1", false, 60)]),
        now(),
    );
    assert_eq!(plan.ended.len(), 1);
}

// ---- Ordering and no double spawn ----

#[test]
fn projects_in_priority_order_ties_in_registry_order() {
    let projects = vec![
        project("low").priority(Priority::Low).ready(&["l-1"]),
        project("n1").ready(&["n-1"]),
        project("high").priority(Priority::High).ready(&["h-1"]),
        project("n2").ready(&["m-1"]),
    ];
    let mut s = snap(projects, vec![]);
    s.global_max_workers = 3;
    let plan = decide(&s, now());
    assert_eq!(
        spawned(&plan),
        ["project:high:h-1", "project:n1:n-1", "project:n2:m-1"]
    );
}

#[test]
fn c6_1_iteration_scope_stories_in_order_and_nothing_else() {
    // Stories listed: only those beads, in Stories order; a-9 and a-2 are ready but out of
    // scope; a-x is not ready and waits.
    let p = project("a")
        .max(5)
        .ready(&["a-9", "a-1", "a-5", "a-2"])
        .stories(&["a-5", "a-x", "a-1"]);
    let plan = decide(&snap(vec![p], vec![]), now());
    assert_eq!(spawned(&plan), ["project:a:a-5", "project:a:a-1"]);
    // No Stories: every ready bead, in the tracker's order (4.3).
    let p = project("a").max(5).ready(&["a-9", "a-1", "a-5"]);
    let plan = decide(&snap(vec![p], vec![]), now());
    assert_eq!(
        spawned(&plan),
        ["project:a:a-9", "project:a:a-1", "project:a:a-5"]
    );
    // Only out-of-scope beads ready: nothing spawns and the run idles for want of ready work.
    let p = project("a").max(5).ready(&["a-9"]).stories(&["a-1"]);
    let plan = decide(&snap(vec![p], vec![]), now());
    assert!(spawned(&plan).is_empty());
    assert_eq!(plan.idle_reason, IdleReason::NoReadyBeads);
}

#[test]
fn a_bead_with_a_live_session_is_never_spawned_twice() {
    // the tracker still lists a-1 as ready (a stale answer), but a session runs it
    let p = project("a")
        .max(3)
        .ready(&["a-1", "a-2"])
        .bead("a-1", BeadLookup::Known(BeadStatus::InProgress));
    let plan = decide(&snap(vec![p], vec![session("a", "a-1", true, 5)]), now());
    assert_eq!(spawned(&plan), ["project:a:a-2"]);
    // duplicates in a tracker answer are spawned once
    let p = project("a").max(3).ready(&["a-1", "a-1"]);
    assert_eq!(
        spawned(&decide(&snap(vec![p], vec![]), now())),
        ["project:a:a-1"]
    );
}

#[test]
fn an_ended_session_does_not_block_a_respawn() {
    let p = project("a")
        .ready(&["a-1"])
        .bead("a-1", BeadLookup::Known(BeadStatus::Open));
    let plan = decide(&snap(vec![p], vec![session("a", "a-1", false, 5)]), now());
    assert_eq!(spawned(&plan), ["project:a:a-1"]);
}

#[test]
fn a_failing_tracker_skips_only_its_project() {
    let plan = decide(
        &snap(
            vec![
                project("a").ready(&["a-1"]).tracker_error(),
                project("b").ready(&["b-1"]),
            ],
            vec![],
        ),
        now(),
    );
    assert_eq!(spawned(&plan), ["project:b:b-1"]);
}

// ---- 9.4 a daily budget ----

#[test]
fn c9_4_a_project_over_its_budget_gets_no_worker_and_its_work_waits_as_at_capacity() {
    let plan = decide(
        &snap(
            vec![
                project("a").max(3).ready(&["a-1", "a-2"]).over_budget(),
                project("b").ready(&["b-1"]),
            ],
            vec![],
        ),
        now(),
    );
    assert_eq!(spawned(&plan), ["project:b:b-1"]);
    let plan = decide(
        &snap(vec![project("a").ready(&["a-1"]).over_budget()], vec![]),
        now(),
    );
    assert!(spawned(&plan).is_empty());
    assert_eq!(
        plan.idle_reason,
        IdleReason::AllAtCapacity,
        "checked again in 10 minutes"
    );
}

// ---- 2.7 idle reasons ----

#[test]
fn c2_7_idle_reason_table() {
    let cases = [
        (vec![], IdleReason::NoActiveIterations),
        (
            vec![project("a")
                .eligibility(Eligibility::NoActiveIteration)
                .ready(&["a-1"])],
            IdleReason::NoActiveIterations,
        ),
        (vec![project("a")], IdleReason::NoReadyBeads),
        (
            vec![
                project("a").eligibility(Eligibility::NoActiveIteration),
                project("b"),
            ],
            IdleReason::NoReadyBeads,
        ),
        (
            vec![project("a")
                .max(1)
                .ready(&["a-1"])
                .bead("a-0", BeadLookup::Known(BeadStatus::InProgress))],
            IdleReason::AllAtCapacity,
        ),
    ];
    for (projects, want) in cases {
        let n = projects.len();
        let sessions = if want == IdleReason::AllAtCapacity {
            vec![session("a", "a-0", true, 5)]
        } else {
            vec![]
        };
        let plan = decide(&snap(projects, sessions), now());
        assert!(plan.intended().is_empty());
        assert_eq!(plan.idle_reason, want, "{n} projects");
    }
}

// ---- stranded claims ----

#[test]
fn stranded_claims_are_released_after_the_grace_period() {
    let claim = |bead: &str, mins: i64| claim("a", bead, mins);
    let p = project("a")
        .max(5)
        .bead("a-1", BeadLookup::Known(BeadStatus::InProgress)) // worker gone, past grace → release
        .bead("a-2", BeadLookup::Known(BeadStatus::InProgress)) // worker gone, within grace → wait
        .bead("a-3", BeadLookup::Known(BeadStatus::InProgress)) // worker alive → keep
        .bead("a-4", BeadLookup::Known(BeadStatus::Closed)) // finished → forget the claim
        .bead("a-5", BeadLookup::Unknown); // tracker down → wait
    let mut s = snap(vec![p], vec![session("a", "a-3", true, 600)]);
    s.claims = vec![
        claim("a-1", 10),
        claim("a-2", 1),
        claim("a-3", 10),
        claim("a-4", 10),
        claim("a-5", 10),
    ];
    let plan = decide(&s, now());
    assert_eq!(plan.releases, [release("a", &s.claims[0])]);
    assert_eq!(plan.settled_claims, [release("a", &s.claims[3])]);
    assert!(plan.upgrades.is_empty(), "every claim has its directory");
}

#[test]
fn decide_is_deterministic() {
    let s = snap(
        vec![
            project("a").max(2).ready(&["a-1", "a-2", "a-3"]),
            project("b").ready(&["b-1"]),
        ],
        vec![session("a", "a-0", false, 1)],
    );
    assert_eq!(decide(&s, now()), decide(&s, now()));
}

#[test]
fn claims_survive_a_registry_that_lost_their_project_for_a_while() {
    // found by the simulation (tests/simulation/): the registry row vanished for one run, the claim was
    // forgotten, the worker then crashed, and the bead stayed in_progress for good
    let claim = claim("a", "a-1", 30);
    let mut s = snap(vec![project("b")], vec![]);
    s.claims = vec![claim.clone()];
    let plan = decide(&s, now());
    assert!(plan.settled_claims.is_empty() && plan.releases.is_empty());
    // the row is back and the worker is gone: the claim is released
    let mut s = snap(
        vec![project("a").bead("a-1", BeadLookup::Known(BeadStatus::InProgress))],
        vec![],
    );
    s.claims = vec![claim];
    assert_eq!(decide(&s, now()).releases.len(), 1);
}

// ---- 2.10 Claims belong to the project's directory ----

#[test]
fn c2_10_a_renamed_slug_keeps_its_claims() {
    // `web` at /p/web claimed w-1 and w-2; the registry now calls the project `site`
    let w1 = claim("web", "w-1", 30);
    let w2 = claim("web", "w-2", 30);
    let site = || project("site").at("/p/web").max(3).ready(&["w-3"]);
    let mut s = snap(
        vec![site()
            .bead("w-1", BeadLookup::Known(BeadStatus::InProgress))
            .bead("w-2", BeadLookup::Known(BeadStatus::Closed))],
        vec![],
    );
    s.claims = vec![w1.clone(), w2.clone()];
    let plan = decide(&s, now());
    // its worker gone, w-1 goes back to open through `site`'s tracker; w-2 is done
    assert_eq!(plan.releases, [release("site", &w1)]);
    assert_eq!(plan.settled_claims, [release("site", &w2)]);
    assert_eq!(plan.settled().collect::<Vec<_>>(), [&w2, &w1]);
    assert!(
        !plan.sweeps[0].live.contains(&id("w-1")),
        "released: its worktree goes"
    );

    // within the grace, or with the tracker down, the claim is kept and its worktree too
    let mut s = snap(vec![site().bead("w-1", BeadLookup::Unknown)], vec![]);
    s.claims = vec![w1.clone()];
    let plan = decide(&s, now());
    assert!(plan.releases.is_empty() && plan.settled_claims.is_empty());
    assert_eq!(plan.sweeps[0].live, [id("w-1")]);

    // a claim an older braids wrote (no directory) is matched by its slug, as before, and
    // gets the directory the first run its tracker knows the bead ...
    let old = Claim {
        path: None,
        ..w1.clone()
    };
    let web = || project("web").bead("w-1", BeadLookup::Known(BeadStatus::InProgress));
    let mut s = snap(vec![web()], vec![session("web", "w-1", true, 60)]);
    s.claims = vec![old.clone()];
    let plan = decide(&s, now());
    assert!(plan.releases.is_empty() && plan.settled_claims.is_empty());
    assert_eq!(
        plan.upgrades,
        [Upgrade {
            claim: old.clone(),
            path: PathBuf::from("/p/web")
        }]
    );
    let mut state = crate::state::OrchestratorState {
        claims: vec![old.clone()],
        ..Default::default()
    };
    state.settle_claims(plan.settled(), plan.upgraded(), &[]);
    assert_eq!(
        state.claims,
        std::slice::from_ref(&w1),
        "now a claim of /p/web"
    );
    // ... but not when the tracker cannot say (nothing proves the slug found the right project)
    let mut s = snap(
        vec![project("web").bead("w-1", BeadLookup::Unknown)],
        vec![],
    );
    s.claims = vec![old.clone()];
    assert!(decide(&s, now()).upgrades.is_empty());
    // and an old claim under a slug that is gone stays as it is, as it always did
    let mut s = snap(vec![site().bead("w-1", BeadLookup::Missing)], vec![]);
    s.claims = vec![old];
    let plan = decide(&s, now());
    assert!(plan.settled_claims.is_empty() && plan.releases.is_empty() && plan.upgrades.is_empty());
}

#[test]
fn c2_10_a_row_pointing_a_slug_at_another_directory_does_not_settle_its_claims() {
    // for one run a garbled registry gives `web`'s slug to the directory of `api`, whose
    // tracker has no w-1: the claim must not be looked up there and forgotten as settled, or
    // w-1 is stranded once its worker crashes
    let w1 = claim("web", "w-1", 30);
    let mut s = snap(
        vec![project("web")
            .at("/p/api")
            .bead("w-1", BeadLookup::Missing)
            .ready(&["a-1"])],
        vec![],
    );
    s.claims = vec![w1.clone()];
    let plan = decide(&s, now());
    assert!(plan.settled_claims.is_empty(), "{:?}", plan.settled_claims);
    assert!(plan.releases.is_empty() && plan.upgrades.is_empty());
    // and the project that row names keeps its own claims by directory, whatever its slug
    let a1 = claim("api", "a-1", 30);
    s.claims = vec![w1.clone(), a1.clone()];
    s.projects[0]
        .beads
        .insert(id("a-1"), BeadLookup::Known(BeadStatus::InProgress));
    let plan = decide(&s, now());
    assert_eq!(plan.releases, [release("web", &a1)]);
    // the row is right again and the worker gone: the claim is released where it belongs
    let mut s = snap(
        vec![
            project("web").bead("w-1", BeadLookup::Known(BeadStatus::InProgress)),
            project("api").bead("w-1", BeadLookup::Missing),
        ],
        vec![],
    );
    s.claims = vec![w1.clone()];
    assert_eq!(decide(&s, now()).releases, [release("web", &w1)]);
}

#[test]
fn c2_10_a_live_session_under_another_label_holds_its_bead() {
    // `web` was renamed `site` while the worker for w-1 ran: it runs on as project:web:w-1
    let w1 = claim("web", "w-1", 30);
    let site = || {
        project("site")
            .at("/p/web")
            .max(2)
            .bead("w-1", BeadLookup::Known(BeadStatus::InProgress))
            // a stale ready list, or a person who reopened it: still not spawned twice
            .ready(&["w-1", "w-2"])
    };
    for label in ["project:web:w-1", "project:api:w-1"] {
        let l = SessionLabel::parse(label).unwrap();
        let mut worker = session(l.slug(), "w-1", true, 600);
        worker.label = l;
        let registered = if label.contains("api") {
            vec![site(), project("api")]
        } else {
            vec![site()]
        };
        let mut s = snap(registered, vec![worker]);
        s.claims = vec![w1.clone()];
        let plan = decide(&s, now());
        assert!(plan.releases.is_empty(), "{label}: {:?}", plan.releases);
        assert!(plan.settled_claims.is_empty(), "{label}");
        assert_eq!(
            plan.sweeps[0].live,
            [id("w-1")],
            "{label}: its worktree stays"
        );
        if label.contains("web") {
            // a worker under a slug no project has may be this project's
            assert_eq!(spawned(&plan), ["project:site:w-2"], "{label}");
        }
    }
    // an unreadable record naming the old label holds it too
    let mut s = snap(vec![site()], vec![]);
    s.unreadable = vec![SessionProblem {
        label: Some("project:web:w-1".into()),
        location: "/s/web_w-1.json".into(),
        detail: "not a session record".into(),
    }];
    s.claims = vec![w1.clone()];
    let plan = decide(&s, now());
    assert!(plan.releases.is_empty());
    assert_eq!(spawned(&plan), ["project:site:w-2"]);
    // once that worker is gone, the claim is released
    let mut s = snap(vec![site()], vec![session("web", "w-1", false, 600)]);
    s.claims = vec![w1.clone()];
    assert_eq!(decide(&s, now()).releases, [release("site", &w1)]);
}

#[test]
fn c2_10_a_worker_under_its_old_slug_is_its_projects_worker() {
    // `web` became `site` while project:web:w-1 ran; the claim made with it says whose it is
    let w1 = claim("web", "w-1", 30);
    let site = |w1: BeadStatus| {
        project("site")
            .at("/p/web")
            .bead("w-1", BeadLookup::Known(w1))
            .ready(&["w-2"])
    };
    let mut s = snap(
        vec![site(BeadStatus::InProgress)],
        vec![session("web", "w-1", true, 600)],
    );
    s.claims = vec![w1.clone()];
    s.global_max_workers = 5;
    let plan = decide(&s, now());
    assert_eq!(plan.healthy["site"], 1, "it holds site's one slot");
    assert!(plan.unmanaged.is_empty() && spawned(&plan).is_empty());
    assert_eq!(plan.idle_reason, IdleReason::AllAtCapacity);
    assert_eq!(plan.global_slots, Some(4), "counted once");
    // site's zombie rules apply to it: its bead closed, it is killed; past site's timeout too
    let mut s = snap(
        vec![site(BeadStatus::Closed)],
        vec![session("web", "w-1", true, 600)],
    );
    s.claims = vec![w1.clone()];
    assert_eq!(
        decide(&s, now()).zombies[0].reason,
        ZombieReason::BeadClosed
    );
    let mut s = snap(
        vec![site(BeadStatus::InProgress).timeout(300)],
        vec![session("web", "w-1", true, 600)],
    );
    s.claims = vec![w1.clone()];
    assert_eq!(decide(&s, now()).zombies[0].reason, ZombieReason::Timeout);
    // an unreadable record under the old label holds site's slot the same way
    let mut s = snap(vec![site(BeadStatus::InProgress)], vec![]);
    s.unreadable = vec![SessionProblem {
        label: Some("project:web:w-1".into()),
        location: "/s/web_w-1.json".into(),
        detail: "not a session record".into(),
    }];
    s.claims = vec![w1.clone()];
    assert_eq!(decide(&s, now()).healthy["site"], 1);
    // with no claim to say whose it is, it stays an orphan: left alone, on the global cap only
    let s = snap(
        vec![site(BeadStatus::InProgress)],
        vec![session("web", "w-1", true, 600)],
    );
    let plan = decide(&s, now());
    assert_eq!(plan.unmanaged.len(), 1);
    assert_eq!(spawned(&plan), ["project:site:w-2"]);
}

// ---- the kill-storm guard ----

#[test]
fn kill_storm_table() {
    // (running, would kill, storm)
    for (running, killing, storm) in [
        (0, 0, false),
        (2, 2, false), // fewer than three
        (3, 3, true),  // all of them
        (5, 3, true),  // more than half
        (6, 3, false), // exactly half
        (7, 3, false),
        (10, 6, true),
    ] {
        assert_eq!(
            is_kill_storm(running, killing),
            storm,
            "{killing} of {running}"
        );
    }
}

#[test]
fn a_kill_storm_kills_none_and_holds_the_beads_of_the_spared() {
    // Four workers whose beads a misreporting tracker calls closed, one healthy one.
    let p = project("a")
        .max(5)
        .ready(&["a-9"])
        .bead("a-1", BeadLookup::Known(BeadStatus::Closed))
        .bead("a-2", BeadLookup::Known(BeadStatus::Closed))
        .bead("a-3", BeadLookup::Known(BeadStatus::Closed))
        .bead("a-4", BeadLookup::Known(BeadStatus::Closed))
        .bead("a-5", BeadLookup::Known(BeadStatus::InProgress));
    let sessions = (1..=5)
        .map(|i| session("a", &format!("a-{i}"), true, 60))
        .collect();
    let mut s = snap(vec![p], sessions);
    let plan = decide(&s, now());
    assert!(plan.zombies.is_empty(), "{:?}", plan.zombies);
    let storm = plan.kill_storm.clone().expect("the guard holds");
    assert_eq!((storm.would_kill, storm.running), (4, 5));
    assert!(storm.projects.contains("a"));
    assert_eq!(plan.healthy["a"], 5, "the spared count as workers");
    assert!(spawned(&plan).is_empty(), "no slot freed by a held kill");
    assert!(storm.message().contains("--allow-mass-kill"));

    // `--allow-mass-kill`: this run kills them.
    s.allow_mass_kill = true;
    let plan = decide(&s, now());
    assert_eq!(plan.zombies.len(), 4);
    assert!(plan.kill_storm.is_none());
    assert_eq!(spawned(&plan), ["project:a:a-9"]);
}

// ---- Left alone for a month: stall, retry backoff, provider breaker, release storm ----

#[test]
fn c2_6_a_worker_quiet_for_its_stall_timeout_is_stalled() {
    use BeadLookup::Known;
    use BeadStatus::InProgress;
    let mins = |m: i64| Some(now() - Duration::minutes(m));
    // (stall timeout s, session age s, last activity, verdict)
    let cases = [
        (900, 1000, None, SessionVerdict::Kill(ZombieReason::Stalled)), // never active since its start
        (900, 1000, mins(5), SessionVerdict::Healthy),                  // printed 5 minutes ago
        (
            900,
            1000,
            mins(16),
            SessionVerdict::Kill(ZombieReason::Stalled),
        ),
        (900, 600, None, SessionVerdict::Healthy), // young: its start counts as activity
        (0, 100_000 - 1, mins(600), SessionVerdict::Healthy), // 0 turns it off
        (
            900,
            3601,
            mins(1),
            SessionVerdict::Kill(ZombieReason::Timeout),
        ), // the WorkerTimeout first
    ];
    for (stall, age, active, want) in cases {
        let s = session("a", "a-1", true, age);
        let timeout = if stall == 0 { 100_000 } else { 3600 };
        assert_eq!(
            classify(
                &s,
                Known(InProgress),
                timeout,
                (stall, active),
                false,
                now()
            ),
            want,
            "stall={stall} age={age} active={active:?}"
        );
    }
    // in a plan: the zombie names its project, for the failed attempt it stands for
    let mut p = project("a").max(2).bead("a-1", Known(InProgress));
    p.0.stall_timeout = 900;
    let plan = decide(&snap(vec![p], vec![session("a", "a-1", true, 1000)]), now());
    assert_eq!(plan.zombies.len(), 1);
    assert_eq!(plan.zombies[0].reason, ZombieReason::Stalled);
    let owner = plan.zombies[0].owner.as_ref().unwrap();
    assert_eq!((owner.slug.as_str(), owner.stall_secs), ("a", 900));
}

#[test]
fn c2_13_a_bead_in_its_retry_backoff_is_not_spawned_and_wakes_the_run() {
    let p = project("a").max(3).ready(&["a-1", "a-2", "a-3"]);
    let mut s = snap(vec![p], vec![]);
    let later = now() + Duration::minutes(4);
    let soon = now() + Duration::minutes(2);
    s.waiting.insert(
        PathBuf::from("/p/a"),
        BTreeMap::from([
            (id("a-1"), later),
            (id("a-2"), soon),
            (id("a-3"), now() - Duration::seconds(1)), // over: eligible
        ]),
    );
    let plan = decide(&s, now());
    assert_eq!(spawned(&plan), ["project:a:a-3"]);
    assert_eq!(
        plan.wake_at,
        Some(soon),
        "the next full run comes when a-2 may run"
    );
    // another project's record of the same id does not hold this one
    s.waiting = BTreeMap::from([(PathBuf::from("/p/b"), BTreeMap::from([(id("a-1"), later)]))]);
    assert_eq!(decide(&s, now()).intended().len(), 3);
}

#[test]
fn c2_14_the_provider_breaker_gates_every_spawn() {
    let s = |gate| {
        let mut s = snap(
            vec![
                project("a").max(2).ready(&["a-1", "a-2"]),
                project("b").ready(&["b-1"]),
            ],
            vec![],
        );
        s.gate = gate;
        s.next_probe = Some(now() + Duration::minutes(3));
        s
    };
    let open = decide(&s(Gate::Open), now());
    assert_eq!(open.intended().len(), 3);
    assert_eq!((open.probe, open.wake_at), (false, None));
    let probe = decide(&s(Gate::Probe), now());
    assert_eq!(
        spawned(&probe),
        ["project:a:a-1"],
        "one probe across the installation"
    );
    assert!(probe.probe);
    let shut = decide(&s(Gate::Shut), now());
    assert!(shut.intended().is_empty());
    assert_eq!(
        shut.wake_at,
        Some(now() + Duration::minutes(3)),
        "wakes for the next probe"
    );
    assert_eq!(
        shut.idle_reason,
        IdleReason::SpawningPaused,
        "ready work held back by the breaker, not by capacity"
    );
}

#[test]
fn c2_7_ready_work_no_worker_can_start_is_its_own_idle_reason() {
    let mut unstartable = project("a").ready(&["a-1"]);
    unstartable.0.preflight_error = Some("no executor is configured".into());
    let plan = decide(&snap(vec![unstartable], vec![]), now());
    assert!(plan.intended().is_empty());
    assert_eq!(plan.idle_reason, IdleReason::NoWorkerCanStart);
    // Another project with work it can start is busy, not idle for this reason.
    let mut unstartable = project("a").ready(&["a-1"]);
    unstartable.0.preflight_error = Some("no executor is configured".into());
    let plan = decide(&snap(vec![unstartable, project("b")], vec![]), now());
    assert_eq!(plan.idle_reason, IdleReason::NoWorkerCanStart);
    let plan = decide(
        &snap(vec![project("a"), project("b").ready(&["b-1"])], vec![]),
        now(),
    );
    assert_eq!(spawned(&plan), ["project:b:b-1"]);
}

#[test]
fn c2_12_a_backend_that_reports_every_worker_gone_for_one_run_releases_nothing() {
    use BeadLookup::Known;
    use BeadStatus::InProgress;
    let p = project("a")
        .max(3)
        .ready(&["a-4"])
        .bead("a-1", Known(InProgress))
        .bead("a-2", Known(InProgress))
        .bead("a-3", Known(InProgress));
    let mut s = snap(vec![p], vec![]); // the backend says: no session at all
    s.claims = vec![
        claim("a", "a-1", 10),
        claim("a", "a-2", 10),
        claim("a", "a-3", 10),
    ];
    let plan = decide(&s, now());
    assert!(plan.releases.is_empty(), "{:?}", plan.releases);
    assert_eq!(plan.held.len(), 3);
    assert!(
        plan.intended().is_empty(),
        "held claims hold their slots: no fourth worker"
    );
    // the next run still sees them gone: a restart really ended them, released now
    s.held_before = plan.held.iter().map(held_key).collect();
    let next = decide(&s, now());
    assert_eq!(next.releases.len(), 3);
    assert!(next.held.is_empty());
    // one stranded claim among several live workers is released at once
    let mut one = snap(
        vec![project("a")
            .max(3)
            .bead("a-1", Known(InProgress))
            .bead("a-2", Known(InProgress))
            .bead("a-3", Known(InProgress))],
        vec![session("a", "a-2", true, 10), session("a", "a-3", true, 10)],
    );
    one.claims = vec![
        claim("a", "a-1", 10),
        claim("a", "a-2", 10),
        claim("a", "a-3", 10),
    ];
    let plan = decide(&one, now());
    assert_eq!(plan.releases.len(), 1);
    assert!(plan.held.is_empty());
}

#[test]
fn c6_1_spawn_order_is_the_stories_first_place_then_the_trackers_short_or_long() {
    // The reference: each bead at its story's first place, the rest after, in tracker order.
    fn reference<'a>(stories: &[BeadId], ready: &'a [Bead]) -> Vec<&'a Bead> {
        let mut v: Vec<(usize, usize, &Bead)> = ready
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let at = stories.iter().position(|s| *s == b.id);
                (at.unwrap_or(usize::MAX), i, b)
            })
            .collect();
        v.sort_by_key(|(s, i, _)| (*s, *i));
        v.into_iter().map(|(_, _, b)| b).collect()
    }
    for (n_stories, n_ready) in [(3, 4), (20, 6), (30, 20), (40, 40)] {
        // stories in a scrambled order with repeats, ready beads partly outside them
        let stories: Vec<BeadId> = (0..n_stories)
            .map(|i| id(&format!("a-{}", (i * 7) % (n_stories - 1))))
            .collect();
        let ready: Vec<Bead> = (0..n_ready)
            .map(|i| {
                Bead::new(
                    id(&format!("a-{}", (i * 5 + 3) % (n_stories + 5))),
                    "t",
                    BeadStatus::Open,
                )
            })
            .collect();
        let got: Vec<&BeadId> = spawn_order(&stories, &ready)
            .iter()
            .map(|b| &b.id)
            .collect();
        let want: Vec<&BeadId> = reference(&stories, &ready).iter().map(|b| &b.id).collect();
        assert_eq!(got, want, "{n_stories} stories, {n_ready} ready");
    }
}

// ---- 10.5 / 10.6 protocol stories ----

fn story(
    step: crate::protocol::Step,
    status: crate::protocol::Status,
    weight: usize,
) -> crate::protocol::tick::StoryView {
    let running = status == crate::protocol::Status::Running;
    crate::protocol::tick::StoryView {
        step,
        status,
        attempt: 1,
        waits_for_human: status == crate::protocol::Status::NeedsHuman,
        deadline: running.then(|| now() + Duration::minutes(5)),
        running_since: running.then(|| now() - Duration::minutes(5)),
        done: step == crate::protocol::Step::Done,
        weight,
        blocked_by: vec![],
    }
}

impl P {
    fn story(mut self, bead: &str, v: crate::protocol::tick::StoryView) -> Self {
        self.0.protocol.insert(id(bead), v);
        self
    }
}

#[test]
fn c10_5_a_story_waiting_for_review_keeps_its_claim_and_no_slot() {
    use crate::protocol::{Status, Step};
    // a-1 waits for a review: claimed long ago, no session. a-2 ran, its worker vanished.
    let p = project("a")
        .max(1)
        .ready(&["a-3"])
        .bead("a-1", BeadLookup::Known(BeadStatus::InProgress))
        .bead("a-2", BeadLookup::Known(BeadStatus::InProgress))
        .story("a-1", story(Step::Review, Status::NeedsHuman, 1))
        .story("a-2", story(Step::Impl, Status::Running, 1));
    let mut s = snap(vec![p], vec![]);
    s.claims = vec![claim("a", "a-1", 600), claim("a", "a-2", 600)];
    let plan = decide(&s, now());
    let released: Vec<&str> = plan.releases.iter().map(|r| r.bead.as_str()).collect();
    assert_eq!(
        released,
        ["a-2"],
        "the review keeps its claim; the lost worker's is released"
    );
    assert_eq!(
        spawned(&plan),
        ["project:a:a-3"],
        "the review holds no slot"
    );
    let orphaned: Vec<(&str, Step)> = plan
        .orphaned_steps
        .iter()
        .map(|o| (o.bead.as_str(), o.step))
        .collect();
    assert_eq!(
        orphaned,
        [("a-2", Step::Impl)],
        "a running step with no worker fails"
    );
    let sweep = &plan.sweeps[0];
    assert!(
        sweep.live.contains(&id("a-1")) && sweep.live.contains(&id("a-2")),
        "story worktrees stay"
    );

    // A running step past its timeout_min is a zombie, before its WorkerTimeout.
    let mut late = story(Step::Impl, Status::Running, 1);
    late.deadline = Some(now() - Duration::seconds(1));
    let p = project("a")
        .max(2)
        .bead("a-1", BeadLookup::Known(BeadStatus::InProgress))
        .story("a-1", late);
    let plan = decide(&snap(vec![p], vec![session("a", "a-1", true, 60)]), now());
    assert_eq!(plan.zombies.len(), 1);
    assert_eq!(plan.zombies[0].reason, ZombieReason::StepTimeout);
    assert!(plan.orphaned_steps.is_empty(), "its session is live");
}

#[test]
fn c10_10_a_story_waiting_for_its_dependencies_holds_no_slot() {
    use crate::protocol::deps::Waits;
    use crate::protocol::{Status, Step};
    let waits = |open: &[&str]| Waits {
        open: open.iter().map(|s| s.to_string()).collect(),
        first: Step::Bdd,
    };
    let mut held = story(Step::Impl, Status::Pending, 1);
    held.blocked_by = vec!["a-1".into()];
    // a-2 waits for a-1 (even if its tracker lists it ready); a-3's dependency closed; a-4 is
    // not started and waits; a-5 is ready with nothing to wait for.
    let mut p = project("a")
        .max(2)
        .ready(&["a-2", "a-3", "a-5"])
        .story("a-2", held.clone())
        .story("a-3", held);
    p.0.dependencies = [
        (id("a-2"), waits(&["a-1"])),
        (id("a-3"), waits(&[])),
        (id("a-4"), waits(&["a-1", "a-9"])),
        (id("a-5"), waits(&[])),
    ]
    .into_iter()
    .collect();
    let plan = decide(&snap(vec![p], vec![]), now());
    assert_eq!(
        spawned(&plan),
        ["project:a:a-3", "project:a:a-5"],
        "the waiting story is not spawned and takes no slot"
    );
    let updates: Vec<(&str, Vec<String>)> = plan
        .dependency_updates
        .iter()
        .map(|u| (u.bead.as_str(), u.open.clone()))
        .collect();
    assert_eq!(
        updates,
        [
            ("a-3", vec![]),
            ("a-4", vec!["a-1".to_string(), "a-9".to_string()])
        ],
        "cleared when closed, set for a story not started; unchanged ones untouched"
    );
}

#[test]
fn c10_6_a_team_step_waits_for_all_its_slots() {
    use crate::protocol::{Status, Step};
    // MaxWorkers 3, one single worker running: the team of 3 (first in order) waits in its
    // place; nothing overtakes it.
    let p = || {
        project("a")
            .max(3)
            .ready(&["a-team", "a-2", "a-3"])
            .bead("a-1", BeadLookup::Known(BeadStatus::InProgress))
            .story("a-team", story(Step::Impl, Status::Pending, 3))
    };
    let plan = decide(&snap(vec![p()], vec![session("a", "a-1", true, 60)]), now());
    assert!(spawned(&plan).is_empty(), "{:?}", spawned(&plan));
    // With all three free it takes them all.
    let plan = decide(&snap(vec![p()], vec![]), now());
    assert_eq!(spawned(&plan), ["project:a:a-team"]);
    // A running team session counts as its roles.
    let p = project("a")
        .max(4)
        .ready(&["a-2", "a-3"])
        .bead("a-team", BeadLookup::Known(BeadStatus::InProgress))
        .story("a-team", story(Step::Impl, Status::Running, 3));
    let plan = decide(
        &snap(vec![p], vec![session("a", "a-team", true, 60)]),
        now(),
    );
    assert_eq!(plan.healthy["a"], 3);
    assert_eq!(spawned(&plan), ["project:a:a-2"]);
}

// ---- Cluster backends: queued jobs, a backend that cannot be asked ----

#[test]
fn c2_2_a_queued_job_holds_its_slot_and_is_never_timed_out_or_stalled() {
    use BeadLookup::*;
    use BeadStatus::*;
    let mut queued = session("a", "a-1", true, 10 * 3600);
    queued.queued = true;
    // Queued for ten times its WorkerTimeout, and quiet: still healthy (Slurm counts --time
    // from the start).
    assert_eq!(
        classify(&queued, Known(InProgress), 3600, (60, None), false, now()),
        SessionVerdict::Healthy
    );
    // Its bead closed by hand: a zombie like any other.
    assert_eq!(
        classify(&queued, Known(Closed), 3600, (0, None), false, now()),
        SessionVerdict::Kill(ZombieReason::BeadClosed)
    );
    // It counts against MaxWorkers: the second ready bead waits, and the first is not doubled.
    let p = project("a")
        .max(1)
        .ready(&["a-1", "a-2"])
        .bead("a-1", Known(InProgress));
    let plan = decide(&snap(vec![p], vec![queued]), now());
    assert!(plan.intended().is_empty(), "{:?}", spawned(&plan));
    assert_eq!(plan.healthy["a"], 1);
}

#[test]
fn c2_9_a_project_whose_backend_cannot_be_asked_is_left_untouched() {
    let mut s = snap(
        vec![
            project("a").max(2).ready(&["a-1", "a-2"]),
            project("b").max(1).ready(&["b-1"]),
        ],
        vec![],
    );
    s.projects[0].backend_error = Some("the slurm backend cannot say which workers run".into());
    // a-0's worker is unseen: its claim is old and the bead in progress, yet it is kept.
    s.claims = vec![claim("a", "a-0", 60)];
    s.projects[0]
        .beads
        .insert(id("a-0"), BeadLookup::Known(BeadStatus::InProgress));
    let plan = decide(&s, now());
    assert_eq!(
        spawned(&plan),
        ["project:b:b-1"],
        "b goes on, a gets nothing"
    );
    assert!(plan.releases.is_empty(), "no claim of a is released");
    assert!(plan.zombies.is_empty());
}

#[test]
fn c2_5_a_gone_workers_claim_is_released_at_once_and_a_fresh_one_waits_its_grace() {
    use BeadLookup::Known;
    use BeadStatus::*;
    let mut p = project("a");
    p.0.stall_timeout = 60;
    p.0.max_workers = 10;
    for b in ["a-1", "a-2", "a-3", "a-4", "a-5", "a-6", "a-7", "a-8"] {
        p.0.beads.insert(id(b), Known(InProgress));
    }
    let c1 = claim("a", "a-1", 1); // its worker is stalled: stopped and released now
    let c2 = claim("a", "a-2", 1); // its worker ended: released now, inside the grace
    let c3 = claim("a", "a-3", 1); // no worker seen yet: the grace covers it
    let c4 = claim("a", "a-4", 5); // no worker and the grace is over: released
                                   // Four more at work, so three releases of eight claims are no release storm.
    let mut sessions = vec![
        session("a", "a-1", true, 120),
        session("a", "a-2", false, 30),
    ];
    let mut claims = vec![c1.clone(), c2.clone(), c3.clone(), c4.clone()];
    for b in ["a-5", "a-6", "a-7", "a-8"] {
        sessions.push(session("a", b, true, 10));
        claims.push(claim("a", b, 1));
    }
    let mut sn = snap(vec![p], sessions);
    sn.claims = claims;
    sn.activity
        .insert("project:a:a-1".into(), now() - Duration::seconds(90));
    let plan = decide(&sn, now());
    assert_eq!(plan.zombies.len(), 1);
    assert_eq!(plan.zombies[0].reason, ZombieReason::Stalled);
    let released: Vec<&BeadId> = plan.releases.iter().map(|r| &r.bead).collect();
    assert_eq!(
        released,
        [&id("a-1"), &id("a-2"), &id("a-4")],
        "{:?}",
        plan.releases
    );
    assert_eq!(plan.releases[0], release("a", &c1));
    assert!(!plan.releases.iter().any(|r| r.claim == c3));
    // Something was released: the next scheduled run looks again.
    assert_eq!(plan.wake_at, Some(now()));
    // A worker stopped for a bead closed by hand leaves no claim to release.
    let mut p = project("a");
    p.0.beads.insert(id("a-1"), Known(Closed));
    let mut sn = snap(vec![p], vec![session("a", "a-1", true, 10)]);
    sn.claims = vec![claim("a", "a-1", 1)];
    assert!(decide(&sn, now()).releases.is_empty());
}

#[test]
fn c2_6_an_agent_that_outlived_its_worker_is_stopped_first_and_its_claim_released() {
    use BeadLookup::Known;
    use BeadStatus::*;
    let mut gone = session("a", "a-1", true, 10);
    gone.worker_gone = true;
    // Whatever the bead, the age or a finishing mark: nobody is left to finish.
    for (bead, finishing) in [
        (Known(InProgress), false),
        (Known(Closed), true),
        (BeadLookup::Unknown, false),
    ] {
        assert_eq!(
            classify(&gone, bead, 3600, (0, None), finishing, now()),
            SessionVerdict::Kill(ZombieReason::WorkerGone),
            "bead={bead:?} finishing={finishing}"
        );
    }
    let mut p = project("a").ready(&["a-2"]);
    p.0.beads.insert(id("a-1"), Known(InProgress));
    let c1 = claim("a", "a-1", 1);
    let mut sn = snap(vec![p], vec![gone]);
    sn.claims = vec![c1.clone()];
    let plan = decide(&sn, now());
    assert_eq!(plan.zombies.len(), 1);
    assert_eq!(plan.zombies[0].reason, ZombieReason::WorkerGone);
    assert_eq!(plan.releases, [release("a", &c1)]);
    let spawned: Vec<&str> = plan.intended().iter().map(|c| c.bead.as_str()).collect();
    assert_eq!(
        spawned,
        ["a-2"],
        "a-1 is not handed on while its agent is stopped"
    );
}

#[test]
fn c2_7_the_backoff_wakes_for_the_first_deadline() {
    use BeadLookup::Known;
    use BeadStatus::*;
    // (worker timeout, stall, quiet for, claim age without a worker) → wake in
    let cases: [(u64, u64, i64, Option<i64>, Option<i64>); 5] = [
        (3600, 0, 0, None, Some(3600 - 100)), // the WorkerTimeout of a worker 100 s old
        (3600, 300, 20, None, Some(300 - 20)), // its StallTimeout from its last output
        (150, 300, 20, None, Some(50)),       // whichever comes first
        (3600, 0, 0, Some(30), Some(90)),     // a claim's grace (120 s) ends first
        (0, 0, 0, None, None),                // nothing to wait for
    ];
    for (timeout, stall, quiet, claim_age, want) in cases {
        let mut p = project("a");
        p.0.worker_timeout = if timeout == 0 { 3600 } else { timeout };
        p.0.stall_timeout = stall;
        p.0.beads.insert(id("a-1"), Known(InProgress));
        p.0.beads.insert(id("a-2"), Known(InProgress));
        let sessions = if timeout == 0 {
            vec![]
        } else {
            vec![session("a", "a-1", true, 100)]
        };
        let mut sn = snap(vec![p], sessions);
        sn.activity
            .insert("project:a:a-1".into(), now() - Duration::seconds(quiet));
        if let Some(age) = claim_age {
            let mut c = claim("a", "a-2", 0);
            c.claimed_at = now() - Duration::seconds(age);
            sn.claims = vec![c];
        }
        let plan = decide(&sn, now());
        assert_eq!(
            plan.wake_at,
            want.map(|s| now() + Duration::seconds(s)),
            "timeout {timeout} stall {stall} quiet {quiet} claim {claim_age:?}"
        );
    }
}

#[test]
fn c10_12_in_single_mode_a_second_story_waits_for_the_state_file_without_a_slot() {
    use crate::protocol::{Status, Step};
    let mut done = story(Step::Done, Status::Pass, 1);
    done.done = true;
    let under_way = story(Step::Review, Status::NeedsHuman, 1);
    let build = |single: bool, holder: crate::protocol::tick::StoryView| {
        let mut p = project("a")
            .max(3)
            .ready(&["a-2", "a-3"])
            .story("a-1", holder);
        p.0.single_state = single;
        p
    };
    // a-1 is under way in the one STATE.json: nothing else starts, and no slot is taken.
    let plan = decide(&snap(vec![build(true, under_way.clone())], vec![]), now());
    assert!(spawned(&plan).is_empty(), "{:?}", spawned(&plan));
    // Once a-1 is done the file is free: one more story starts, the first in order, and only
    // one while it runs, whatever MaxWorkers says.
    let plan = decide(&snap(vec![build(true, done.clone())], vec![]), now());
    assert_eq!(spawned(&plan), ["project:a:a-2"]);
    let running = vec![session("a", "a-2", true, 60)];
    let plan = decide(&snap(vec![build(true, done)], running), now());
    assert!(spawned(&plan).is_empty(), "{:?}", spawned(&plan));
    // A story file each: no such wait.
    let plan = decide(&snap(vec![build(false, under_way)], vec![]), now());
    assert_eq!(spawned(&plan), ["project:a:a-2", "project:a:a-3"]);
}
