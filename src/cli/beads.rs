//! `braids beads`, `answer`, `retry`, `logs` and `history`: a person's day-two commands on
//! beads. Each parses, calls its use case in `app/`, and prints.

use anyhow::{bail, Result};
use chrono::Utc;
use serde::Serialize;

use crate::app::answer::Answered;
use crate::app::beads::ProjectBeads;
use crate::app::retry::Retried;
use crate::config::installation;
use crate::events::Event;
use crate::model::BeadStatus;
use crate::system::paths::Paths;
use crate::system::templates::{clip, elapsed};

use super::{
    AnswerArgs, ApproveArgs, BeadArgs, BeadsArgs, HistoryArgs, LogsArgs, Output, RejectArgs,
    EXIT_OK,
};

impl Output for ProjectBeads {
    fn text(&self) -> String {
        let mut o = format!(
            "{}{}: {} bead(s){}\n",
            self.project,
            if self.paused { " (paused)" } else { "" },
            self.beads.len(),
            self.iteration
                .as_ref()
                .map(|i| format!(", iteration {i}"))
                .unwrap_or_default()
        );
        let now = Utc::now();
        // Long ids widen the column rather than push the rest of their line out of it.
        let w = self
            .beads
            .iter()
            .map(|b| b.id.as_str().len())
            .max()
            .unwrap_or(0)
            .max(16);
        for b in &self.beads {
            let mut line = format!(
                "{:<w$} {:<11} P{} {}",
                b.id.as_str(),
                if b.not_pushed.is_some() {
                    "not pushed"
                } else if b.review.is_some() {
                    "in review"
                } else {
                    b.status.as_str()
                },
                b.priority,
                if b.in_scope { "in scope " } else { "         " }
            );
            line.push_str(&clip(&b.title, 70));
            if b.attempts > 0 {
                line.push_str(&format!("  ({} failed attempt(s))", b.attempts));
            }
            if b.outage_attempts > 0 {
                line.push_str(&format!(
                    "  ({} attempt(s) lost to a provider outage, not counted)",
                    b.outage_attempts
                ));
            }
            if let Some(t) = b.retry_at {
                let secs = u64::try_from((t - now).num_seconds()).unwrap_or(0);
                line.push_str(&format!("  retry in {}", elapsed(secs)));
            }
            o.push_str(&line);
            o.push('\n');
            if let (Some(n), Some(url)) = (b.issue, &b.url) {
                o.push_str(&format!("    #{n} {url}\n"));
            }
            if let Some(n) = &b.not_pushed {
                o.push_str(&format!("    {}\n", clip(n, 300)));
            }
            if let Some(r) = &b.review {
                o.push_str(&format!(
                    "    {} ({}{})\n",
                    crate::review::request_words(r.number, &r.url),
                    clip(&r.last, 200),
                    match r.attempts {
                        0 => String::new(),
                        n => format!("; {n} attempt(s) answered the forge"),
                    }
                ));
            }
            if let Some(w) = &b.waiting {
                o.push_str(&format!(
                    "    {}: {}\n",
                    w.kind.as_str(),
                    clip(&w.text, 300)
                ));
            } else if b.status == BeadStatus::Blocked {
                o.push_str("    blocked: no reason recorded by braids (blocked in the tracker)\n");
            }
            if let Some(w) = &b.worker {
                o.push_str(&format!(
                    "    worker {} for {}\n",
                    w.session,
                    elapsed(w.elapsed_seconds)
                ));
            }
        }
        o
    }
}

pub fn list(paths: &Paths, a: BeadsArgs) -> Result<i32> {
    let inst = super::open_to_read(paths);
    let mut only = Vec::new();
    for s in &a.status {
        match BeadStatus::parse(s) {
            BeadStatus::Unknown => bail!(
                "--status {s} is not a bead status; use open, in_progress, blocked, deferred or closed"
            ),
            st => only.push(st),
        }
    }
    crate::app::beads::list(&inst, &a.project, &only, Utc::now())?.print(a.json);
    Ok(EXIT_OK)
}

impl Output for Answered {
    fn text(&self) -> String {
        format!(
            "{}: answered {:?}; the bead is open again and its next prompt carries the answer\n",
            self.bead,
            clip(&self.answer, 200)
        )
    }
}

pub fn answer(paths: &Paths, a: AnswerArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    crate::app::answer::answer(&inst, &a.bead, &a.text, Utc::now())?.print(a.json);
    Ok(EXIT_OK)
}

pub fn approve(paths: &Paths, a: ApproveArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    crate::app::answer::approve(&inst, &a.bead, a.note.as_deref(), Utc::now())?.print(a.json);
    Ok(EXIT_OK)
}

pub fn reject(paths: &Paths, a: RejectArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    let why = crate::app::answer::reject(&inst, &a.bead, &a.reason)?;
    println!(
        "{}: stays blocked ({why}); `braids retry {}` lets an agent try again",
        a.bead, a.bead
    );
    Ok(EXIT_OK)
}

impl Output for Retried {
    fn text(&self) -> String {
        format!(
            "{}: was {}, now eligible ({} failed attempt(s) forgotten)\n",
            self.bead, self.from, self.forgotten_failures
        )
    }
}

pub fn retry(paths: &Paths, a: BeadArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    crate::app::retry::retry(&inst, &a.bead)?.print(a.json);
    Ok(EXIT_OK)
}

pub fn logs(paths: &Paths, a: LogsArgs) -> Result<i32> {
    let inst = super::open_to_read(paths);
    let log = crate::app::logs::locate(&inst, &a.bead)?;
    let stop = super::stop_flag::stop_on_signals();
    let out = std::io::stdout().lock();
    // The agent wrote the log: a terminal never gets its escapes, even with --raw.
    let terminal = std::io::IsTerminal::is_terminal(&out);
    if a.raw && !terminal {
        let mut out = out;
        crate::app::logs::copy(&inst, &log, &mut out, a.follow, stop)?;
    } else {
        let mut out = if a.raw {
            crate::app::logs::Readable::printable(out)
        } else {
            crate::app::logs::Readable::new(out)
        };
        crate::app::logs::copy(&inst, &log, &mut out, a.follow, stop)?;
        out.flush_line()?;
    }
    Ok(EXIT_OK)
}

#[derive(Serialize)]
#[serde(transparent)]
struct History(Vec<Event>);

impl Output for History {
    fn text(&self) -> String {
        if self.0.is_empty() {
            return "nothing happened in that time\n".into();
        }
        let project = |e: &Event| clip(&e.project, 40);
        let bead = |e: &Event| clip(e.bead.as_deref().unwrap_or("-"), 40);
        let wide = |f: &dyn Fn(&Event) -> String, min: usize| {
            self.0
                .iter()
                .map(|e| f(e).chars().count())
                .max()
                .unwrap_or(0)
                .max(min)
        };
        let (pw, bw) = (wide(&project, 12), wide(&bead, 16));
        self.0
            .iter()
            .map(|e| {
                format!(
                    "{}  {:<pw$} {:<bw$} {}\n",
                    e.timestamp.format("%Y-%m-%d %H:%M:%S"),
                    project(e),
                    bead(e),
                    crate::app::history::describe(e)
                )
            })
            .collect()
    }
}

pub fn history(paths: &Paths, a: HistoryArgs) -> Result<i32> {
    let _ = super::open_to_read(paths);
    let since = Utc::now() - chrono::Duration::from_std(a.since)?;
    let events = crate::app::history::history(paths, a.project.as_deref(), since, a.limit)?;
    History(events).print(a.json);
    Ok(EXIT_OK)
}
