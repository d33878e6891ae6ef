//! Randomness and text: the seeded PRNG, and generators of the files people write, each with
//! the value a correct reader must find (a differential oracle).

use braids::model::{BeadId, BeadStatus, Priority, ProjectStatus};

use crate::world::{id, BeadM, ProjM};

// ---------------------------------------------------------------------------------------------
// A small seeded PRNG (SplitMix64): deterministic on every platform and every crate version.

#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    pub fn pct(&mut self, p: usize) -> bool {
        self.below(100) < p
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// Text generators, each with the value a correct reader must find (a differential oracle).

/// What PROJECT.md text must read as.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectExpect {
    pub status: Option<ProjectStatus>,
    pub priority: Priority,
    pub max_workers: u32,
    pub timeout: u64,
    pub channel: Option<String>,
}

#[derive(Clone, Copy, Debug)]
pub enum Form {
    BoldBullet,
    Bold,
    BoldKeyOnly,
    Plain,
    Bullet,
    Table,
}

pub fn field_lines(form: Form, fields: &[(&str, String)], eol: &str) -> String {
    let mut o = String::new();
    match form {
        Form::Table => {
            o.push_str(&format!("| Field | Value |{eol}|---|---|{eol}"));
            for (k, v) in fields {
                o.push_str(&format!("| {k} | {} |{eol}", v.replace('|', "\\|")));
            }
        }
        _ => {
            for (k, v) in fields {
                let line = match form {
                    Form::BoldBullet => format!("- **{k}:** {v}"),
                    Form::Bold => format!("**{k}:** {v}  "),
                    Form::BoldKeyOnly => format!("**{k}**: {v}  "),
                    Form::Plain => format!("{k}: {v}  "),
                    Form::Bullet => format!("- {k}: {v}"),
                    Form::Table => unreachable!(),
                };
                o.push_str(&line);
                o.push_str(eol);
            }
        }
    }
    o
}

pub fn pick_form(rng: &mut Rng) -> Form {
    *rng.pick(&[
        Form::BoldBullet,
        Form::BoldBullet,
        Form::Bold,
        Form::BoldKeyOnly,
        Form::Plain,
        Form::Bullet,
        Form::Table,
    ])
}

/// Mangles text the way a bad edit, a bad merge or a binary paste does.
pub fn mangle(rng: &mut Rng, text: &str) -> String {
    let mut b = text.as_bytes().to_vec();
    for _ in 0..rng.range(1, 6) {
        match rng.below(6) {
            0 if !b.is_empty() => {
                let at = rng.below(b.len());
                let n = rng.below(40).min(b.len() - at);
                b.drain(at..at + n);
            }
            1 => {
                let at = rng.below(b.len() + 1);
                let junk: Vec<u8> = (0..rng.range(1, 24)).map(|_| rng.next() as u8).collect();
                b.splice(at..at, junk);
            }
            2 => {
                let at = rng.below(b.len() + 1);
                let s = rng.pick(&[
                    "\n```\n",
                    "\n<!--\n",
                    "| | |\n",
                    "\r",
                    "**",
                    "\n# \n",
                    "\u{feff}",
                    "Status: complete\n",
                    "MaxWorkers: 99\n",
                    "\n---\n",
                    "🚀",
                ]);
                b.splice(at..at, s.bytes());
            }
            3 if !b.is_empty() => {
                let n = rng.below(b.len());
                b.truncate(n);
            }
            4 => b.reverse(),
            _ => b.extend_from_slice(b"\n\n| Slug | Status |\n|---|\n"),
        }
    }
    braids::format::decode(&b).into_owned()
}

pub fn gen_project_md(rng: &mut Rng, name: &str) -> (String, Option<ProjectExpect>) {
    let status: (&str, Option<ProjectStatus>) = *rng.pick(&[
        ("active", Some(ProjectStatus::Active)),
        ("active", Some(ProjectStatus::Active)),
        ("active", Some(ProjectStatus::Active)),
        ("Active", Some(ProjectStatus::Active)),
        ("**active**", Some(ProjectStatus::Active)),
        ("active (since Monday)", Some(ProjectStatus::Active)),
        ("ACTIVE", Some(ProjectStatus::Active)),
        ("paused", Some(ProjectStatus::Paused)),
        ("blocked", Some(ProjectStatus::Blocked)),
        ("complete", None),
        ("on hold", None),
        ("", None),
    ]);
    let priority: (&str, Priority) = *rng.pick(&[
        ("high", Priority::High),
        ("High", Priority::High),
        ("normal", Priority::Normal),
        ("medium", Priority::Normal),
        ("low", Priority::Low),
        ("urgent", Priority::Normal),
    ]);
    let max: (&str, u32) = *rng.pick(&[
        ("1", 1),
        ("2", 2),
        ("2", 2),
        ("3", 3),
        ("4", 4),
        ("2 (keep it low)", 2),
        ("3 workers", 3),
        ("0", 1),
        ("-1", 1),
        ("two", 1),
    ]);
    let timeout: (&str, u64) = *rng.pick(&[
        ("600", 600),
        ("1800", 1800),
        ("3600", 3600),
        ("900s", 900),
        ("30m", 1800),
        ("30 min", 1800),
        ("45 minutes", 2700),
        ("1h", 3600),
        ("3,600", 3600),
        ("0", 3600),
        ("soon", 3600),
    ]);
    let channel: (&str, Option<&str>) = *rng.pick(&[
        ("#dev", Some("#dev")),
        ("<#1234567890>", Some("<#1234567890>")),
        ("`#ops`", Some("#ops")),
        ("none", None),
        ("-", None),
        (
            "$(touch /tmp/braids-sim-pwned)",
            Some("$(touch /tmp/braids-sim-pwned)"),
        ),
    ]);
    let mut fields: Vec<(&str, String)> = Vec::new();
    let omit = |rng: &mut Rng| rng.pct(12);
    if (!omit(rng) || status.1.is_none()) && (!status.0.is_empty() || rng.pct(50)) {
        fields.push(("Status", status.0.to_string()));
    }
    let status_written = fields.iter().any(|f| f.0 == "Status" && !f.1.is_empty());
    let expect_status = if status_written { status.1 } else { None };
    let priority_written = !omit(rng);
    if priority_written {
        fields.push(("Priority", priority.0.to_string()));
    }
    fields.push((
        "Autonomy",
        rng.pick(&["full", "ask-first", "research-only"])
            .to_string(),
    ));
    let max_written = !omit(rng);
    if max_written {
        fields.push(("MaxWorkers", max.0.to_string()));
    }
    let timeout_written = !omit(rng);
    if timeout_written {
        fields.push(("WorkerTimeout", timeout.0.to_string()));
    }
    let channel_written = !omit(rng);
    if channel_written {
        fields.push(("Channel", channel.0.to_string()));
    }
    if rng.pct(30) {
        fields.push(("Owner", "@sam".into()));
    }
    if rng.pct(20) {
        fields.push(("Checkin", "weekly".into()));
    }
    // shuffle
    for i in (1..fields.len()).rev() {
        let j = rng.below(i + 1);
        fields.swap(i, j);
    }
    let eol = if rng.pct(20) { "\r\n" } else { "\n" };
    let mut t = String::new();
    if rng.pct(10) {
        t.push('\u{feff}');
    }
    t.push_str(&format!("# {name}{eol}{eol}"));
    // decoys before the real fields: never read as fields
    if rng.pct(30) {
        t.push_str(&format!(
            "```markdown{eol}Status: paused{eol}MaxWorkers: 9{eol}```{eol}{eol}"
        ));
    }
    if rng.pct(30) {
        t.push_str(&format!(
            "<!-- Status: paused -->{eol}<!--{eol}MaxWorkers: 9{eol}-->{eol}{eol}"
        ));
    }
    t.push_str(&field_lines(pick_form(rng), &fields, eol));
    t.push_str(eol);
    if rng.pct(50) {
        t.push_str(&format!(
            "## Goal{eol}{eol}Status: paused is what we had last year.{eol}{eol}"
        ));
    }
    if rng.pct(40) {
        t.push_str(&format!(
            "## Notifications{eol}{eol}| Event | Setting |{eol}|---|---|{eol}| bead-start | off |{eol}| blocker | on (mention <@42>) |{eol}{eol}"
        ));
    }
    if rng.pct(30) {
        t.push_str(&format!(
            "## Guardrails{eol}{eol}- MaxWorkers: 12 is forbidden{eol}{eol}"
        ));
    }
    let expect = ProjectExpect {
        status: expect_status,
        priority: if priority_written {
            priority.1
        } else {
            Priority::Normal
        },
        max_workers: if max_written { max.1 } else { 1 },
        timeout: if timeout_written { timeout.1 } else { 3600 },
        channel: if channel_written {
            channel.1.map(String::from)
        } else {
            None
        },
    };
    (t, Some(expect))
}

pub fn gen_iteration_md(
    rng: &mut Rng,
    n: u32,
    status: &str,
    stories: &[(BeadId, String)],
) -> String {
    let eol = if rng.pct(15) { "\r\n" } else { "\n" };
    let mut t = format!("# Iteration {n}{eol}{eol}");
    if rng.pct(25) {
        t.push_str(&format!("```{eol}Status: complete{eol}```{eol}{eol}"));
    }
    let line = match rng.below(5) {
        0 => format!("- **Status:** {status}"),
        1 => format!("**Status**: {status}"),
        2 => format!("Status: {status}"),
        3 => format!("| Field | Value |{eol}|---|---|{eol}| Status | {status} |"),
        _ => format!("- Status: {status}"),
    };
    t.push_str(&line);
    t.push_str(eol);
    t.push_str(eol);
    t.push_str(&format!("## Stories{eol}{eol}"));
    for (bid, title) in stories {
        let l = match rng.below(4) {
            0 => format!("- {bid}: {title}"),
            1 => format!("- [ ] {bid}: {title}"),
            2 => format!("- **{bid}**: {title}"),
            _ => format!("* `{bid}`: {title}"),
        };
        t.push_str(&l);
        t.push_str(eol);
    }
    if rng.pct(30) {
        t.push_str(&format!(
            "{eol}## Notes{eol}{eol}Status: complete once the parser lands.{eol}"
        ));
    }
    t
}

pub fn new_bead(rng: &mut Rng, p: &mut ProjM) -> BeadM {
    let n = p.next_bead;
    p.next_bead += 1;
    let prefix = &p.slug[..p.slug.len().min(3)];
    let raw = match rng.below(6) {
        0 => format!("{prefix}-{n}x.{n}"),
        1 => format!("{prefix}_{n}-a"),
        _ => format!("{prefix}-{n}"),
    };
    BeadM {
        id: id(&raw),
        status: BeadStatus::Open,
        assignee: None,
        deps: Vec::new(),
        deleted: false,
        priority: rng.below(4) as u8,
    }
}
