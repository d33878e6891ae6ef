//! Chaos: several projects with bare upstreams, two schedulers ticking every 3 s and 7 s at
//! once, random SIGKILLs of ticks and workers (found by their identity), agents that work,
//! fail, hang, hit a rate limit, commit themselves and leave children behind, somebody else
//! pushing to every upstream, and one upstream gone for a while. A sampler looks at every
//! process each second. Then the chaos stops, the agents behave, and the ticks finish the work.
//!
//! What must hold: never two live agents (processes carrying `BRAIDS_BEAD`, children included)
//! of two sessions on one bead; every bead closed, or blocked with a reason; every closed bead's
//! commit on its upstream exactly once (or, for a worker killed between its close and its
//! landing, its work kept on a branch for a person, 7.2), no merge commit, and every foreign
//! commit kept; no worktree and no
//! process left; every claim a tick released is an event; and never a stretch longer than
//! [`idle_limit`] in which a project with a free slot had a bead ready (or a claim whose worker
//! is surely gone) and nothing started.
//!
//! `BRAIDS_CHAOS_SECS` sets how long the chaos lasts (180 s here; `scripts/chaos` runs 1200),
//! `BRAIDS_CHAOS_SEED` its random choices. The figures are printed at the end.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::support::{Install, Sandbox};

const PROJECTS: usize = 4;
const MAX_WORKERS: usize = 2;
const CLAIM_GRACE_SECS: i64 = 30;
/// The slower scheduler's interval.
const SLOW_EVERY: Duration = Duration::from_secs(7);
/// A worker's start after the run that spawned it.
const WORKER_START: Duration = Duration::from_secs(6);

/// Below this, a stretch of due work with nothing started is never a violation: slow runs of a
/// loaded two-core machine stay under it.
const IDLE_FLOOR: Duration = Duration::from_secs(30);
/// Above this, a stretch always is one: a run stuck for minutes, as a lock deadlock would make
/// it, stops whole runs from coming at all.
const IDLE_CEILING: Duration = Duration::from_secs(120);

/// The longest a project may have due work and a free slot with nothing started: the longest
/// wait between the starts of two whole runs (at least the slower scheduler's interval; runs
/// the chaos killed in between, or a loaded machine's slow ones, make it longer), plus the
/// longest whole run, plus a worker's start; within [`IDLE_FLOOR`] and [`IDLE_CEILING`].
/// A claim whose worker the chaos killed is released at once only by a run that saw the
/// worker end; when the run that would have seen it was killed too, the claim's grace
/// ([`CLAIM_GRACE_SECS`], from the claim) is what frees it, so the grace counts as well.
fn idle_limit(whole_runs: &[(Instant, Instant)]) -> Duration {
    let longest = whole_runs
        .iter()
        .map(|(start, end)| *end - *start)
        .max()
        .unwrap_or_default();
    let mut starts: Vec<Instant> = whole_runs.iter().map(|(start, _)| *start).collect();
    starts.sort();
    let gap = starts
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
        .max(SLOW_EVERY);
    let grace = Duration::from_secs(CLAIM_GRACE_SECS as u64);
    (grace + gap + longest + WORKER_START).clamp(IDLE_FLOOR, IDLE_CEILING)
}

/// The agent. Calm (`$HOME/calm` exists) it always works; otherwise its fate is drawn.
const AGENT: &str = r#"roll=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
roll=$((roll % 100))
work() {
  mkdir -p work "$(dirname "$1")"
  echo "$BRAIDS_BEAD" > "work/$BRAIDS_BEAD.txt"
  printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
  printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
}
sleep 1
if [ -e "$HOME/calm" ]; then work "$1"; exit 0; fi
if [ $roll -lt 40 ]; then sleep $((2 + roll % 8)); work "$1"
elif [ $roll -lt 50 ]; then printf 'status: failing\nsummary: tests fail\n' > "$BRAIDS_RESULT_FILE"; exit 1
elif [ $roll -lt 58 ]; then exec sleep 600
elif [ $roll -lt 63 ]; then echo "Error: 429 Too Many Requests (rate limit exceeded)" >&2; exit 1
elif [ $roll -lt 75 ]; then
  work "$1"; git add -A work >/dev/null 2>&1; git commit -qm "agent's own commit" >/dev/null 2>&1 || true
elif [ $roll -lt 88 ]; then sleep 300 & work "$1"
else
  for i in 1 2 3 4 5 6; do echo "working $i"; sleep 1; done; work "$1"
fi
"#;

/// A small deterministic generator: the seed is printed, so a run can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// What one process says of itself.
struct Proc {
    pid: u32,
    argv: Vec<String>,
    env: HashMap<String, String>,
}

fn processes() -> Vec<Proc> {
    crate::support::procs::pids()
        .filter(|&pid| crate::support::procs::alive(pid))
        .filter_map(|pid| {
            let split = |b: Vec<u8>| -> Vec<String> {
                b.split(|c| *c == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            };
            let env = split(std::fs::read(format!("/proc/{pid}/environ")).ok()?)
                .into_iter()
                .filter_map(|v| {
                    let (k, v) = v.split_once('=')?;
                    k.starts_with("BRAIDS_")
                        .then(|| (k.to_string(), v.to_string()))
                })
                .collect::<HashMap<_, _>>();
            let argv = split(std::fs::read(format!("/proc/{pid}/cmdline")).ok()?);
            Some(Proc { pid, argv, env })
        })
        .collect()
}

impl Proc {
    fn token(&self) -> Option<&str> {
        self.env.get("BRAIDS_SESSION").map(String::as_str)
    }

    fn is_worker(&self) -> bool {
        self.token().is_some()
            && self.argv.first().is_some_and(|a| a.ends_with("braids"))
            && self.argv.iter().any(|a| a == "worker")
    }

    /// `(project directory, bead)` of an agent or anything it started.
    fn agent_of(&self) -> Option<(String, String)> {
        Some((
            self.env.get("BRAIDS_PROJECT")?.clone(),
            self.env.get("BRAIDS_BEAD")?.clone(),
        ))
    }
}

/// What the sampler found over the run.
#[derive(Default, Debug)]
struct Seen {
    samples: u64,
    doubles: Vec<String>,
    most_live_agents: usize,
    longest_orphan: Duration,
    longest_idle: Duration,
    idle_detail: String,
}

struct Chaos {
    sb: Sandbox,
    slugs: Vec<String>,
    bares: BTreeMap<String, PathBuf>,
    stop: AtomicBool,
    calm: AtomicBool,
    released: Mutex<Vec<String>>,
    tick_runs: Mutex<(u64, u64)>,
    /// Tick runs that did a whole run (exit 0, not skipped for the lock): start, end.
    whole_runs: Mutex<Vec<(Instant, Instant)>>,
    kills: Mutex<(u64, u64)>,
    foreign: Mutex<Vec<String>>,
    gone_for_a_while: Mutex<Option<String>>,
}

impl Chaos {
    /// The processes of this installation's sessions (by their token): other tests run at the
    /// same time, and their workers are none of this test's business.
    fn processes(&self) -> Vec<Proc> {
        let ours = self.labels();
        processes()
            .into_iter()
            .filter(|p| p.token().is_some_and(|t| ours.contains_key(t)))
            .collect()
    }

    fn json(path: &Path) -> serde_json::Value {
        std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Session labels by token, from the session records.
    fn labels(&self) -> HashMap<String, String> {
        let mut out = HashMap::new();
        for e in std::fs::read_dir(self.sb.sessions_dir())
            .into_iter()
            .flatten()
            .flatten()
        {
            let r = Self::json(&e.path());
            if let (Some(t), Some(l)) = (r["token"].as_str(), r["label"].as_str()) {
                out.insert(t.to_string(), l.to_string());
            }
        }
        out
    }

    /// The projects where work is due and nothing runs for it: a free slot and a bead that is
    /// open past its retry wait, or in progress with no worker and no agent while braids can
    /// know the worker is gone (its session recorded, or the claim older than its grace).
    fn due(&self, procs: &[Proc], labels: &HashMap<String, String>) -> Vec<String> {
        let now: DateTime<Utc> = Utc::now();
        let dir = self.sb.braids_dir();
        let attempts = Self::json(&dir.join("attempts.json"));
        // Spawning paused by the provider breaker: until its next probe, or while a probe may
        // still be at work (braids lets a probe go again once no worker is left to answer).
        let breaker = &attempts["breaker"];
        let any_worker = procs.iter().any(Proc::is_worker);
        let paused = breaker["openSince"].is_string()
            && (breaker["nextProbe"]
                .as_str()
                .and_then(|t| t.parse::<DateTime<Utc>>().ok())
                .is_none_or(|t| t > now)
                || breaker["probingSince"].is_string() && any_worker);
        if paused {
            return vec![];
        }
        let state = Self::json(&dir.join(".orchestrator-state.json"));
        let recorded: BTreeSet<String> = labels.values().cloned().collect();
        let live_labels: BTreeSet<&String> = procs
            .iter()
            .filter(|p| p.is_worker())
            .filter_map(|p| labels.get(p.token()?))
            .collect();
        let agents: BTreeSet<String> = procs
            .iter()
            .filter_map(|p| p.agent_of().map(|(_, b)| b))
            .collect();
        let mut due = Vec::new();
        for slug in &self.slugs {
            let prefix = format!("project:{slug}:");
            let running = live_labels
                .iter()
                .filter(|l| l.starts_with(&prefix))
                .count();
            if running >= MAX_WORKERS {
                continue;
            }
            let waits = attempts["beads"]
                .as_object()
                .and_then(|m| m.iter().find(|(k, _)| k.ends_with(&format!("/{slug}"))))
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let Ok(text) =
                std::fs::read_to_string(self.sb.project(slug).join(".braids/WORKPLAN.md"))
            else {
                continue;
            };
            for (bead, status) in workplan_statuses(&text) {
                let label = format!("{prefix}{bead}");
                let ready = status == "open"
                    && waits[&bead]["notBefore"]
                        .as_str()
                        .and_then(|t| t.parse::<DateTime<Utc>>().ok())
                        .is_none_or(|t| t <= now);
                let claim_age = state["claims"].as_array().and_then(|cs| {
                    cs.iter()
                        .find(|c| c["bead"] == bead.as_str())
                        .and_then(|c| c["claimedAt"].as_str()?.parse::<DateTime<Utc>>().ok())
                });
                let stranded = status == "in_progress"
                    && !live_labels.contains(&label)
                    && !agents.contains(&bead)
                    && (recorded.contains(&label)
                        || claim_age.is_none_or(|t| (now - t).num_seconds() > CLAIM_GRACE_SECS));
                if ready || stranded {
                    due.push(format!("{slug}: {bead} {status}"));
                }
            }
        }
        due
    }

    fn sample(&self) -> Seen {
        let mut seen = Seen::default();
        let mut orphans: HashMap<String, Instant> = HashMap::new();
        let mut idle_since: Option<Instant> = None;
        while !self.stop.load(Ordering::SeqCst) {
            let at = Instant::now();
            let procs = self.processes();
            let labels = self.labels();
            let workers: BTreeSet<&str> = procs
                .iter()
                .filter(|p| p.is_worker())
                .filter_map(Proc::token)
                .collect();
            let mut by_bead: BTreeMap<(String, String), BTreeSet<&str>> = BTreeMap::new();
            for p in &procs {
                if let (Some(k), Some(t)) = (p.agent_of(), p.token()) {
                    by_bead.entry(k).or_default().insert(t);
                    if !workers.contains(t) {
                        let first = *orphans.entry(t.to_string()).or_insert(at);
                        seen.longest_orphan = seen.longest_orphan.max(at - first);
                    }
                }
            }
            orphans.retain(|t, _| procs.iter().any(|p| p.token() == Some(t)));
            for ((project, bead), tokens) in &by_bead {
                if tokens.len() > 1 {
                    seen.doubles
                        .push(format!("{project} {bead}: sessions {tokens:?}"));
                }
            }
            seen.most_live_agents = seen.most_live_agents.max(by_bead.len());
            let due = self.due(&procs, &labels);
            if due.is_empty() {
                idle_since = None;
            } else {
                let since = *idle_since.get_or_insert(at);
                if at - since > seen.longest_idle {
                    seen.longest_idle = at - since;
                    seen.idle_detail = due.join("; ");
                }
            }
            seen.samples += 1;
            std::thread::sleep(Duration::from_secs(1).saturating_sub(at.elapsed()));
        }
        seen
    }

    /// A scheduler: a plain (not forced) tick every `every`, whatever the others do. While
    /// there is chaos, one run in four is SIGKILLed a random moment into it.
    fn ticker(&self, every: Duration, rng: &mut Rng) {
        while !self.stop.load(Ordering::SeqCst) {
            let at = Instant::now();
            let mut cmd = self.sb.tick().command();
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null());
            let child = cmd.spawn().unwrap();
            let pid = child.id();
            if !self.calm.load(Ordering::SeqCst) && rng.below(4) == 0 {
                std::thread::sleep(Duration::from_millis(rng.below(150)));
                // Still ours: not waited for yet, so the pid cannot have been reused.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let out = child.wait_with_output().unwrap();
            {
                use std::os::unix::process::ExitStatusExt;
                if out.status.signal() == Some(9) {
                    self.kills.lock().unwrap().0 += 1;
                }
            }
            let mut runs = self.tick_runs.lock().unwrap();
            runs.0 += 1;
            if out.status.success() {
                if let Ok(r) = serde_json::from_slice::<braids::tick::TickReport>(&out.stdout) {
                    let mut released = self.released.lock().unwrap();
                    released.extend(r.released.iter().map(|x| x.bead.to_string()));
                    if r.run == braids::tick::RunType::Full {
                        self.whole_runs.lock().unwrap().push((at, Instant::now()));
                    }
                }
            } else {
                runs.1 += 1;
            }
            drop(runs);
            std::thread::sleep(every.saturating_sub(at.elapsed()));
        }
    }

    /// A SIGKILL to a random worker every few seconds, found by identity: a `braids worker`
    /// process carrying a session's token.
    fn killer(&self, rng: &mut Rng) {
        while !self.stop.load(Ordering::SeqCst) && !self.calm.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_secs(3 + rng.below(6)));
            let workers: Vec<u32> = self
                .processes()
                .into_iter()
                .filter(|p| p.is_worker())
                .map(|p| p.pid)
                .collect();
            if workers.is_empty() {
                continue;
            }
            let pid = workers[rng.below(workers.len() as u64) as usize];
            if nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
            {
                self.kills.lock().unwrap().1 += 1;
            }
        }
    }

    /// Somebody else pushing to each upstream by turns, and one upstream gone for a while.
    fn foreigner(&self, rng: &mut Rng, chaos: Duration) {
        let started = Instant::now();
        let mut n = 0;
        while !self.stop.load(Ordering::SeqCst) && !self.calm.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_secs(2 + rng.below(4)));
            let elapsed = started.elapsed();
            let gone_slug = &self.slugs[0];
            let mut gone = self.gone_for_a_while.lock().unwrap();
            let window = chaos / 3..chaos / 3 + chaos / 6;
            let bare = &self.bares[gone_slug];
            let away = bare.with_extension("away");
            if window.contains(&elapsed) && gone.is_none() {
                std::fs::rename(bare, &away).unwrap();
                *gone = Some(gone_slug.clone());
            } else if !window.contains(&elapsed) && gone.is_some() {
                std::fs::rename(&away, bare).unwrap();
                *gone = None;
            }
            let slug = &self.slugs[rng.below(self.slugs.len() as u64) as usize];
            if gone.as_deref() == Some(slug.as_str()) {
                continue;
            }
            drop(gone);
            n += 1;
            let clone = self.sb.home().join(format!("foreign-{slug}"));
            let subject = format!("foreign {slug} {n}");
            let file = clone.join(format!("foreign/{n}.txt"));
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, &subject).unwrap();
            git(&clone, &["add", "-A"]);
            git(&clone, &["commit", "-qm", &subject]);
            for _ in 0..5 {
                if git_status(&clone, &["push", "-q", "origin", "HEAD:main"]) {
                    self.foreign.lock().unwrap().push(subject.clone());
                    break;
                }
                git_status(&clone, &["pull", "-q", "--rebase", "origin", "main"]);
            }
        }
        let mut gone = self.gone_for_a_while.lock().unwrap();
        if let Some(slug) = gone.take() {
            let bare = &self.bares[&slug];
            std::fs::rename(bare.with_extension("away"), bare).unwrap();
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn git_status(dir: &Path, args: &[&str]) -> bool {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `(id, status)` of each item of a WORKPLAN.md, with its blocked reason when it has one.
fn workplan_statuses(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("- [")?;
            let meta = line
                .split("<!--")
                .nth(1)?
                .trim_end()
                .trim_end_matches("-->");
            let field = |name: &str| {
                meta.split(',').find_map(|p| {
                    let (k, v) = p.split_once(':')?;
                    (k.trim() == name).then(|| v.trim().to_string())
                })
            };
            let status = if rest.starts_with(['x', 'X']) {
                "closed".to_string()
            } else {
                field("status").unwrap_or_else(|| "open".into())
            };
            Some((field("id")?, status))
        })
        .collect()
}

#[test]
fn c2_5_c2_7_chaos_never_two_agents_on_a_bead_never_stuck_nothing_lost() {
    let chaos_for = Duration::from_secs(
        std::env::var("BRAIDS_CHAOS_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(180),
    );
    let seed = std::env::var("BRAIDS_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Utc::now().timestamp_micros() as u64 | 1);
    println!("chaos: seed {seed}, {} s", chaos_for.as_secs());

    // Enough work to last the chaos.
    let beads = (chaos_for.as_secs() as usize / 12).max(8);
    let sb = Install::new()
        .config(&format!(
            "[sessions]\nkill_grace_secs = 5\nclaim_grace_secs = {CLAIM_GRACE_SECS}\n\
             [worker]\nretries = 3\nretry_backoff = \"3s\"\nretry_backoff_max = \"15s\"\n\
             [breaker]\nprobe = \"10s\"\nprobe_max = \"20s\"\n"
        ))
        .build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n",
        agent.display().to_string()
    ));
    let mut slugs = Vec::new();
    let mut bares = BTreeMap::new();
    let mut all_beads = BTreeMap::new();
    for i in 0..PROJECTS {
        let slug = format!("p{i}");
        let p = sb
            .new_project(&slug)
            .beads(beads)
            .max_workers(MAX_WORKERS as u32)
            .field("StallTimeout", "10s")
            .field("WorkerTimeout", "120")
            .create();
        let root = sb.project(&slug);
        let bare = sb.home().join(format!("{slug}.git"));
        git(sb.home(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
        git(&root, &["remote", "add", "origin", bare.to_str().unwrap()]);
        git(&root, &["push", "-q", "-u", "origin", "HEAD:main"]);
        git(&root, &["branch", "-q", "-u", "origin/main"]);
        let clone = sb.home().join(format!("foreign-{slug}"));
        git(
            sb.home(),
            &[
                "clone",
                "-q",
                bare.to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        );
        for (k, v) in [
            ("user.name", "someone"),
            ("user.email", "someone@example.com"),
        ] {
            git(&clone, &["config", k, v]);
        }
        all_beads.insert(slug.clone(), p.beads.clone());
        slugs.push(slug.clone());
        bares.insert(slug, bare);
    }

    let c = Arc::new(Chaos {
        sb,
        slugs,
        bares,
        stop: AtomicBool::new(false),
        calm: AtomicBool::new(false),
        released: Mutex::new(vec![]),
        tick_runs: Mutex::new((0, 0)),
        whole_runs: Mutex::new(vec![]),
        kills: Mutex::new((0, 0)),
        foreign: Mutex::new(vec![]),
        gone_for_a_while: Mutex::new(None),
    });
    let started = Instant::now();
    let (seen, settled) = std::thread::scope(|s| {
        let sampler = s.spawn(|| c.sample());
        s.spawn(|| c.ticker(Duration::from_secs(3), &mut Rng(seed.rotate_left(7) | 1)));
        s.spawn(|| c.ticker(Duration::from_secs(7), &mut Rng(seed.rotate_left(29) | 1)));
        s.spawn(|| c.killer(&mut Rng(seed)));
        s.spawn(|| c.foreigner(&mut Rng(seed.rotate_left(17) | 1), chaos_for));
        std::thread::sleep(chaos_for);
        // The chaos ends: agents behave, nothing is killed, nobody else pushes.
        c.calm.store(true, Ordering::SeqCst);
        std::fs::write(c.sb.home().join("calm"), "").unwrap();
        let settle_by = Instant::now() + Duration::from_secs(420);
        let settled = loop {
            let open = c.slugs.iter().any(|slug| {
                let text = std::fs::read_to_string(c.sb.project(slug).join(".braids/WORKPLAN.md"))
                    .unwrap_or_default();
                workplan_statuses(&text)
                    .iter()
                    .any(|(_, st)| st != "closed" && st != "blocked")
            });
            if !open && c.processes().iter().all(|p| !p.is_worker()) {
                break true;
            }
            if Instant::now() > settle_by {
                break false;
            }
            std::thread::sleep(Duration::from_secs(2));
        };
        c.stop.store(true, Ordering::SeqCst);
        (sampler.join().unwrap(), settled)
    });
    // Two last runs sweep what the last workers left.
    for _ in 0..2 {
        c.sb.tick().force().run();
    }
    let sb = &c.sb;

    let mut closed = 0;
    let mut blocked = 0;
    let mut problems: Vec<String> = seen.doubles.clone();
    if !settled {
        problems.push("the work did not settle within 7 minutes of the chaos".into());
    }
    let mut pushed_once = 0;
    let mut kept_for_a_person = 0;
    for slug in &c.slugs {
        let text = std::fs::read_to_string(sb.project(slug).join(".braids/WORKPLAN.md")).unwrap();
        let upstream = git(&c.bares[slug], &["log", "--format=%s", "main"]);
        let merges = git(&c.bares[slug], &["rev-list", "--merges", "main"]);
        if !merges.trim().is_empty() {
            problems.push(format!("{slug}: merge commits on the upstream: {merges}"));
        }
        for (bead, status) in workplan_statuses(&text) {
            match status.as_str() {
                "closed" => {
                    closed += 1;
                    let n = upstream
                        .lines()
                        .filter(|l| l.ends_with(&format!("({bead})")))
                        .count();
                    // A worker killed between the close and the landing leaves its work on a
                    // branch for a person (7.2).
                    let kept = n == 0
                        && !git(
                            &sb.project(slug),
                            &["branch", "--list", &format!("braids/kept/{bead}-*")],
                        )
                        .trim()
                        .is_empty();
                    if n == 1 {
                        pushed_once += 1;
                    } else if kept {
                        kept_for_a_person += 1;
                    } else {
                        problems.push(format!("{slug}: {bead} closed with {n} commits upstream"));
                    }
                }
                "blocked" => {
                    blocked += 1;
                    let line = text
                        .lines()
                        .find(|l| l.contains(&format!("id:{bead}")))
                        .unwrap();
                    if !line.contains("reason:") {
                        problems.push(format!("{slug}: {bead} blocked without a reason: {line}"));
                    }
                }
                other => problems.push(format!("{slug}: {bead} left {other}")),
            }
        }
        let ws = sb.braids_dir().join("workspaces").join(slug);
        let left: Vec<_> = std::fs::read_dir(&ws)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        if !left.is_empty() {
            problems.push(format!("{slug}: worktrees left: {left:?}"));
        }
    }
    let foreign = c.foreign.lock().unwrap().clone();
    for subject in &foreign {
        let slug = subject.split(' ').nth(1).unwrap();
        if !git(&c.bares[slug], &["log", "--format=%s", "main"])
            .lines()
            .any(|l| l == subject)
        {
            problems.push(format!("foreign commit lost: {subject}"));
        }
    }
    let leftover: Vec<String> = c
        .processes()
        .iter()
        .filter(|p| p.agent_of().is_some() || p.is_worker())
        .map(|p| format!("{} {:?}", p.pid, p.argv))
        .collect();
    if !leftover.is_empty() {
        problems.push(format!("processes left: {leftover:?}"));
    }
    let events = sb.ok(&["events", "--json"]);
    let evented: BTreeSet<String> = events
        .lines()
        .filter(|l| l.contains("\"claim_released\""))
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some(v["bead"].as_str()?.to_string())
        })
        .collect();
    let released = c.released.lock().unwrap().clone();
    for bead in &released {
        if !evented.contains(bead) {
            problems.push(format!("release of {bead} is no event"));
        }
    }
    let limit = idle_limit(&c.whole_runs.lock().unwrap());
    if seen.longest_idle > limit {
        problems.push(format!(
            "idle for {:?} (limit {limit:?}) with work due: {}",
            seen.longest_idle, seen.idle_detail
        ));
    }
    let (runs, failed_runs) = *c.tick_runs.lock().unwrap();
    let (tick_kills, worker_kills) = *c.kills.lock().unwrap();
    let total: usize = all_beads.values().map(Vec::len).sum();
    println!(
        "chaos: seed {seed}; {} s of chaos, settled after {} s more; beads {total}: {closed} \
         closed ({pushed_once} pushed exactly once, {kept_for_a_person} kept on a branch for a \
         person), {blocked} blocked; ticks {runs} ({failed_runs} \
         killed or failed); kills: {tick_kills} ticks, {worker_kills} workers; foreign pushes {}; \
         releases {} (evented beads {}); samples {}; most live agents {}; longest orphaned agent \
         {:?}; longest idle with work due {:?} (limit {limit:?}); violations {}",
        chaos_for.as_secs(),
        (started.elapsed().saturating_sub(chaos_for)).as_secs(),
        foreign.len(),
        released.len(),
        evented.len(),
        seen.samples,
        seen.most_live_agents,
        seen.longest_orphan,
        seen.longest_idle,
        problems.len()
    );
    assert!(problems.is_empty(), "seed {seed}: {problems:#?}");
    assert!(
        tick_kills + worker_kills > 0,
        "nothing was killed: no chaos"
    );
}
