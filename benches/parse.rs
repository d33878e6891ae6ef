//! Parsing speed of the format readers: 1,000 varied PROJECT.md texts, a 1,000-row registry and
//! 1,000 ITERATION.md texts, each timed as the best of several runs.
//!
//! Run with `cargo bench --bench parse`. The target is well under 50 ms for 1,000 PROJECT.md.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use braids::format::{iteration, project, registry};
use braids::system::paths::Paths;

const RUNS: usize = 15;

/// A small deterministic generator, so every run parses the same texts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn project_text(i: usize, rng: &mut Rng) -> String {
    let status = rng.pick(&[
        "active",
        "paused",
        "blocked",
        "**Active**",
        "active (since Monday)",
    ]);
    let priority = rng.pick(&["high", "normal", "low", "Medium"]);
    let autonomy = rng.pick(&["full", "ask-first", "research-only", "ask first"]);
    let fields = [
        ("Status", status.to_string()),
        ("Priority", priority.to_string()),
        ("Autonomy", autonomy.to_string()),
        ("MaxWorkers", (1 + rng.below(4)).to_string()),
        (
            "WorkerTimeout",
            rng.pick(&["3600", "1800s", "2h", "5400"]).to_string(),
        ),
        (
            "Checkin",
            rng.pick(&["daily", "weekly", "on-demand"]).to_string(),
        ),
        (
            "Channel",
            rng.pick(&[
                "`#dev`",
                "none",
                "discord:#proj (mention <@123>)",
                "slack:#team",
            ])
            .to_string(),
        ),
        ("Owner", format!("@person{}", rng.below(50))),
    ];
    let mut s = format!(
        "# 🚀 Project {i} — a service that does thing {}\n\n",
        rng.below(1000)
    );
    if rng.below(4) == 0 {
        s.push_str(
            "<!-- Agents: keep these fields current. Status: paused was the old value. -->\n\n",
        );
    }
    match rng.below(4) {
        0 => {
            for (k, v) in &fields {
                s.push_str(&format!("- **{k}:** {v}\n"));
            }
        }
        1 => {
            for (k, v) in &fields {
                s.push_str(&format!("{k}: {v}\n"));
            }
        }
        2 => {
            s.push_str("| Field | Value |\n|-------|-------|\n");
            for (k, v) in &fields {
                s.push_str(&format!("| {k} | {v} |\n"));
            }
        }
        _ => {
            for (k, v) in &fields {
                s.push_str(&format!("**{k}**: {v}\n"));
            }
        }
    }
    s.push_str("\n## Goal\n\nShip the next milestone with good tests and no regressions.\n");
    s.push_str("It should be fast, correct, and boring to operate.\n\n## Guardrails\n\n");
    for g in 0..1 + rng.below(5) {
        s.push_str(&format!(
            "- Guardrail number {g}: never do the dangerous thing {g}.\n"
        ));
    }
    s.push_str("\n## Notifications\n\n| Event | Enabled | Notes |\n|---|---|---|\n");
    for e in [
        "iteration-start",
        "bead-start",
        "bead-complete",
        "iteration-complete",
        "no-ready-beads",
        "question",
        "blocker",
    ] {
        if rng.below(3) > 0 {
            let v = rng.pick(&["on", "off", "✅", "❌", "yes", "on (mention <@123>)"]);
            s.push_str(&format!("| {e} | {v} | |\n"));
        }
    }
    if rng.below(3) == 0 {
        s.push_str(
            "\n## Example\n\n```markdown\n- **Status:** complete\n- **Priority:** low\n```\n",
        );
    }
    if rng.below(3) == 0 {
        s.push_str("\n## History\n\n- 2025-01-01: paused\n  - Status: paused\n- 2025-02-01: resumed\n\n> Status: blocked (old)\n");
    }
    if rng.below(5) == 0 {
        s = s.replace('\n', "\r\n");
    }
    s
}

fn registry_text(rows: usize, rng: &mut Rng) -> String {
    let mut s = String::from("# Registry\n\nHand-maintained.\n\n| Slug | Status | Priority | Path | Notes |\n|------|--------|----------|------|-------|\n");
    for i in 0..rows {
        let status = rng.pick(&["active", "paused", "blocked", "**active**"]);
        let priority = rng.pick(&["high", "normal", "low"]);
        let path = rng.pick(&["~/Projects", "$BRAIDS_HOME", "/srv/work"]);
        s.push_str(&format!(
            "| `project-{i}` | {status} | {priority} | {path}/project-{i} | note {i} |\n"
        ));
    }
    s
}

fn iteration_text(i: usize, rng: &mut Rng) -> String {
    let mut s = format!(
        "# Iteration {i}\n\n- **Status:** {}\n\n## Stories\n\n",
        rng.pick(&["planning", "active", "complete"])
    );
    for k in 0..3 + rng.below(12) {
        let form = rng.pick(&[
            "- proj-{k}x: Story {k}",
            "- [ ] **proj-{k}x**: Story {k}",
            "- `proj-{k}x` — Story {k}",
        ]);
        s.push_str(&form.replace("{k}", &k.to_string()));
        s.push('\n');
    }
    s.push_str("\n## Notes\n\nNothing special.\n");
    s
}

/// Best (minimum) wall time of `RUNS` runs of `f`.
fn best(mut f: impl FnMut()) -> Duration {
    f(); // warm up
    (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let file = Path::new("/home/u/Projects/p/.braids/PROJECT.md");

    let projects: Vec<String> = (0..1000).map(|i| project_text(i, &mut rng)).collect();
    let bytes: usize = projects.iter().map(String::len).sum();
    // sanity: every generated project parses to a status
    for (i, t) in projects.iter().enumerate() {
        let p = project::parse_project(t, file);
        assert!(
            p.value.status.is_some(),
            "project {i} lost its status: {:?}\n{t}",
            p.diagnostics
        );
    }
    let d = best(|| {
        for t in &projects {
            black_box(project::parse_project(black_box(t), file));
        }
    });
    println!(
        "PROJECT.md: 1,000 varied texts ({} KiB) parsed in {:.2} ms (best of {RUNS}; {:.1} µs each)",
        bytes / 1024,
        ms(d),
        d.as_secs_f64() * 1e6 / 1000.0
    );

    let paths = Paths::new("/home/u".into(), None);
    let reg = registry_text(1000, &mut rng);
    let rfile = paths.registry();
    let parsed = registry::parse_registry(&reg, &rfile, &paths);
    assert_eq!(parsed.value.entries.len(), 1000);
    let d = best(|| {
        black_box(registry::parse_registry(black_box(&reg), &rfile, &paths));
    });
    println!(
        "registry.md: 1,000 rows ({} KiB) parsed in {:.2} ms (best of {RUNS})",
        reg.len() / 1024,
        ms(d)
    );

    let its: Vec<String> = (0..1000).map(|i| iteration_text(i, &mut rng)).collect();
    let ifile = Path::new("/p/.braids/iterations/1/ITERATION.md");
    let d = best(|| {
        for (i, t) in its.iter().enumerate() {
            black_box(iteration::parse_iteration(
                black_box(t),
                ifile,
                i as u32,
                PathBuf::from("/p"),
            ));
        }
    });
    println!(
        "ITERATION.md: 1,000 texts parsed in {:.2} ms (best of {RUNS})",
        ms(d)
    );
}
