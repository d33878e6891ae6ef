//! The dashboard's HTML, rendered on the server from the picture ([`crate::app::dashboard`]):
//! it works without JavaScript (forms post and come back), and `app.js` swaps in the fresh
//! `#main` as events arrive. Every piece of text goes through maud, which escapes it; markdown
//! goes through comrak with raw HTML escaped.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::app::beads::BeadRow;
use crate::app::dashboard::{Picture, ProjectDetail};
use crate::events::waiting::WaitKind;
use crate::system::templates::{clip, elapsed};
use crate::tick::observe::ProjectReport;

/// What a page may carry: the CSRF value of the browser's session for its forms. Never the
/// server's token.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub csrf: Option<&'a str>,
}

pub(super) fn layout(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                link rel="stylesheet" href="/static/app.css";
                link rel="icon" href="/favicon.ico";
                script src="/static/app.js" defer {}
            }
            body { (body) }
        }
    }
}

/// The whole dashboard page.
pub fn dashboard(p: &Picture, ctx: Ctx<'_>) -> Markup {
    layout(
        "braids",
        html! {
            header {
                h1 { "braids" }
                nav { a href="/status" { "STATUS.md" } " · " a href="/api/v1/state" { "JSON" } }
            }
            main id="main" { (main(p, ctx)) }
        },
    )
}

/// The part the live update replaces.
pub fn main(p: &Picture, ctx: Ctx<'_>) -> Markup {
    let live = p
        .status
        .sessions
        .iter()
        .filter(|s| s.session.running)
        .count();
    html! {
        p class="summary" {
            "Updated " time datetime=(p.generated_at.to_rfc3339()) { (p.generated_at.format("%H:%M:%S UTC")) }
            " · " span id="workers-count" { (live) " worker(s) running" }
            " · Cost today: " strong id="cost-today" { (format!("{:.2} USD", p.cost_today.cost_usd)) }
            " in " (p.cost_today.attempts) " attempt(s)"
        }
        @if ctx.csrf.is_none() {
            p class="note" { "Actions from a browser need a login: run braids serve --login and open the link it prints. Scripts send the server's token in the Authorization header." }
        }
        @if !p.status.problems.is_empty() {
            section class="problems" id="problems" {
                h2 { "Problems" }
                @for prob in &p.status.problems { p class="error" { (prob) } }
            }
        }
        @if p.status.projects.is_empty() {
            p { "No projects are registered. Add one with " code { "braids new <slug>" } "." }
        }
        @for r in &p.status.projects {
            @let d = p.details.get(&r.slug);
            (project(p, r, d, ctx))
        }
    }
}

fn project(p: &Picture, r: &ProjectReport, d: Option<&ProjectDetail>, ctx: Ctx<'_>) -> Markup {
    let paused =
        [r.registry_status, r.project_status].contains(&Some(crate::model::ProjectStatus::Paused));
    let workers: Vec<_> = p
        .status
        .sessions
        .iter()
        .filter(|l| l.session.running && l.session.label.slug() == r.slug)
        .collect();
    let budget = p.cost_today.budgets.iter().find(|b| b.project == r.slug);
    html! {
        section class="project" id=(format!("project-{}", r.slug)) data-slug=(r.slug) {
            h2 { (r.slug) @if r.name != r.slug { " — " (r.name) } }
            p class="meta" {
                "Status: " strong class="status" { (crate::tick::status_md::status_of(r)) }
                " · Iteration: " (crate::tick::status_md::iteration_of(r))
                " · Workers: " (workers.len()) "/" (r.max_workers)
                @if let Some(b) = budget {
                    " · Budget: " (format!("{:.2} of {:.2} USD today", b.spent_today_usd, b.daily_budget_usd))
                }
            }
            @if let Some(d) = d {
                @if d.stories_total > 0 {
                    p { progress value=(d.stories_closed) max=(d.stories_total) {}
                        " " (d.stories_closed) " of " (d.stories_total) " stories done" }
                }
            }
            (action(ctx, &format!("/api/v1/projects/{}/{}", r.slug, if paused { "resume" } else { "pause" }),
                if paused { "Resume" } else { "Pause" }, html! {}))
            @if let Some(n) = &r.note { p class="note" { (n) } }
            @if let Some(e) = &r.error { p class="error" { "Error: " (e) } }
            @if let Some(n) = &r.not_pushed { p class="error" { (n.line()) } }
            @if let Some(pool) = &r.pool { p class="meta" { "Workspaces: " (pool.line(p.generated_at)) } }
            @for u in r.unknown_stories.as_deref().unwrap_or_default() { p class="error" { (u.problem.to_string()) } }
            @if !workers.is_empty() {
                h3 { "Workers" }
                table class="workers" {
                    thead { tr { th { "Bead" } th { "Title" } th { "Running" } th { "Step" } th { "Last output" } } }
                    tbody {
                        @for l in &workers {
                            @let bead = l.session.label.bead().to_string();
                            tr class="worker" data-bead=(bead) {
                                td { a href=(format!("/beads/{}:{bead}", r.slug)) { (bead) } }
                                td { (l.title.as_deref().map(|t| clip(t, 80)).unwrap_or_default()) }
                                td { (elapsed(l.elapsed_seconds)) }
                                td { (l.step.as_deref().unwrap_or("-").to_lowercase()) }
                                td class="output" {
                                    (p.last_output.get(&l.session.label.to_string()).map(String::as_str).unwrap_or(""))
                                    @if let Some(s) = l.last_output_seconds { " " small { "(" (elapsed(s)) " ago)" } }
                                }
                            }
                        }
                    }
                }
            }
            @if !r.reviews.is_empty() {
                h3 { "In review" }
                table class="reviews" {
                    thead { tr { th { "Bead" } th { "Pull request" } th { "Where it stands" } } }
                    tbody {
                        @for v in &r.reviews {
                            tr class="review" data-bead=(v.bead) {
                                td { a href=(format!("/beads/{}:{}", r.slug, v.bead)) { (v.bead) } }
                                td { @if v.number == 0 { "not opened yet" } @else { a href=(web_link(&v.url)) { "#" (v.number) } } }
                                td { (clip(&v.state, 200)) }
                            }
                        }
                    }
                }
            }
            @if let Some(d) = d {
                (waiting(r, d, ctx))
                h3 { "Last 7 days" }
                (super::chart::week(&d.week))
            }
        }
    }
}

fn waiting(r: &ProjectReport, d: &ProjectDetail, ctx: Ctx<'_>) -> Markup {
    let of = |k: WaitKind| -> Vec<&BeadRow> {
        d.waiting
            .iter()
            .filter(|b| b.waiting.as_ref().is_some_and(|w| w.kind == k))
            .collect()
    };
    let unexplained: Vec<&BeadRow> = d.waiting.iter().filter(|b| b.waiting.is_none()).collect();
    let url = |b: &BeadRow, what: &str| format!("/api/v1/beads/{}:{}/{what}", r.slug, b.id);
    html! {
        @let questions = of(WaitKind::Question);
        @if !questions.is_empty() {
            h3 { "Questions" }
            @for b in questions {
                div class="question" data-bead=(b.id) {
                    p { (bead_link(r, b)) ": " q { (b.waiting.as_ref().map(|w| w.text.as_str()).unwrap_or("")) } }
                    (action(ctx, &url(b, "answer"), "Answer", html! {
                        label { "Answer " textarea name="text" required rows="2" cols="60" {} }
                    }))
                }
            }
        }
        @let reviews = of(WaitKind::Approval);
        @if !reviews.is_empty() {
            h3 { "Waiting for review" }
            @for b in reviews {
                div class="review" data-bead=(b.id) {
                    p { (bead_link(r, b)) ": " (b.waiting.as_ref().map(|w| w.text.as_str()).unwrap_or("")) }
                    (action(ctx, &url(b, "approve"), "Approve", html! { label { "Note " input type="text" name="note"; } }))
                    (action(ctx, &url(b, "reject"), "Reject", html! { label { "Reason " input type="text" name="reason" required; } }))
                }
            }
        }
        @let held = of(WaitKind::Held);
        @if !held.is_empty() {
            h3 { "Work held for you" }
            @for b in held {
                div class="held" data-bead=(b.id) {
                    p { (bead_link(r, b)) ": " (b.waiting.as_ref().map(|w| w.text.as_str()).unwrap_or("")) }
                    p { a href=(format!("/beads/{}:{}", r.slug, b.id)) { "See the change" } }
                    (action(ctx, &url(b, "approve"), "Approve and land", html! {}))
                    (action(ctx, &url(b, "reject"), "Reject", html! { label { "Reason " input type="text" name="reason" required; } }))
                }
            }
        }
        @let blocked: Vec<&BeadRow> = of(WaitKind::Blocked).into_iter().chain(unexplained).collect();
        @if !blocked.is_empty() {
            h3 { "Blocked" }
            @for b in blocked {
                div class="blocked" data-bead=(b.id) {
                    p { (bead_link(r, b)) ": "
                        (b.waiting.as_ref().map_or("blocked in the tracker (no reason recorded by braids)", |w| w.text.as_str())) }
                    (action(ctx, &url(b, "retry"), "Retry", html! {}))
                }
            }
        }
    }
}

/// A forge's link, followed only when it is one (`http(s)://`): never a `javascript:` one.
fn web_link(url: &str) -> &str {
    match url.starts_with("https://") || url.starts_with("http://") {
        true => url,
        false => "#",
    }
}

fn bead_link(r: &ProjectReport, b: &BeadRow) -> Markup {
    html! { a href=(format!("/beads/{}:{}", r.slug, b.id)) { (b.id) } " " span class="title" { (clip(&b.title, 100)) } }
}

/// A form that posts one action; without a session it shows nothing to press.
fn action(ctx: Ctx<'_>, url: &str, label: &str, fields: Markup) -> Markup {
    html! {
        @if let Some(c) = ctx.csrf {
            form method="post" action=(url) class="action" {
                input type="hidden" name="csrf" value=(c);
                (fields)
                button type="submit" { (label) }
            }
        }
    }
}

/// Markdown (STATUS.md, a deliverable) as HTML, raw HTML in it shown as text; a line that is
/// only an HTML comment (STATUS.md's "generated" note) is a note for editors, not shown.
pub fn markdown(text: &str) -> Markup {
    let text: String = text
        .lines()
        .filter(|l| {
            let t = l.trim();
            !(t.starts_with("<!--") && t.ends_with("-->"))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let mut opts = comrak::Options::default();
    opts.extension.table = true;
    opts.extension.tasklist = true;
    opts.extension.strikethrough = true;
    opts.render.escape = true;
    PreEscaped(comrak::markdown_to_html(&text, &opts))
}

/// A page of rendered markdown.
pub fn document(title: &str, text: &str) -> Markup {
    layout(
        title,
        html! {
            header { h1 { a href="/" { "braids" } } }
            article class="markdown" { (markdown(text)) }
        },
    )
}

/// One bead: its row and its deliverable.
pub fn bead(
    slug: &str,
    row: &BeadRow,
    deliverable: Option<(String, String)>,
    held: Option<&crate::workspace::HeldDiff>,
    ctx: Ctx<'_>,
) -> Markup {
    let act = |what: &str| format!("/api/v1/beads/{slug}:{}/{what}", row.id);
    layout(
        &format!("{} — braids", row.id),
        html! {
            header { h1 { a href="/" { "braids" } } }
            section class="bead" {
                h2 { (row.id) " " span class="title" { (row.title) } }
                p { "Project " (slug) " · " (row.not_pushed.as_deref().unwrap_or(row.status.as_str()))
                    @if row.in_scope { " · in this iteration" }
                    @if row.attempts > 0 { " · " (row.attempts) " failed attempt(s)" } }
                @if let Some(w) = &row.waiting { p { (w.kind.as_str()) ": " (w.text) } }
                @if let Some(w) = &row.worker { p { "Worker " (w.session) " for " (elapsed(w.elapsed_seconds)) } }
                @if let Some(v) = &row.review {
                    p class="review" { "In review: "
                        @if v.number == 0 { "its pull request is not opened yet (branch " code { (v.branch) } ")" }
                        @else { a href=(web_link(&v.url)) { "pull request #" (v.number) } " from " code { (v.branch) } }
                        " · " (clip(&v.last, 200))
                        @if v.attempts > 0 { " · " (v.attempts) " attempt(s) answered the forge" } }
                }
                @if let Some(h) = held {
                    h3 { "Held work: commit " code { (h.commit.get(..12).unwrap_or(&h.commit)) } " on " code { (h.branch) } " (against " code { (h.base) } ")" }
                    @if !h.control.is_empty() {
                        p class="warning" { "It changes braids' control files: " (h.control.join(", ")) }
                    }
                    pre class="diffstat" { (h.stat) }
                    pre class="diff" { (h.patch) }
                    @if h.truncated { p { "The patch is cut here; " code { "git diff " (h.base) "..." (h.branch) } " shows it whole." } }
                    (action(ctx, &act("approve"), "Approve and land", html! {}))
                    (action(ctx, &act("reject"), "Reject", html! { label { "Reason " input type="text" name="reason" required; } }))
                } @else if row.status == crate::model::BeadStatus::Blocked {
                    (action(ctx, &act("retry"), "Retry", html! {}))
                }
                @if let Some((path, text)) = deliverable {
                    h3 { "Deliverable " code { (path) } }
                    article class="markdown" { (markdown(&text)) }
                }
            }
        },
    )
}
