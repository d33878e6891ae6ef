//! A project's week as an inline SVG bar chart: completed beads up, failed attempts down, one
//! column a day. Pure: days in, markup out (escaped by maud like everything else).

use maud::{html, Markup};

use crate::app::dashboard::Day;

const W: u32 = 280;
const H: u32 = 96;
const LABEL: u32 = 14;

pub fn week(days: &[Day]) -> Markup {
    let most = days
        .iter()
        .map(|d| d.completed.max(d.failed))
        .max()
        .unwrap_or(0)
        .max(1);
    let col = W / u32::try_from(days.len().max(1)).unwrap_or(1);
    let half = (H - LABEL) / 2;
    let bar = |n: u32| n * (half - 2) / most;
    let total_done: u32 = days.iter().map(|d| d.completed).sum();
    let total_failed: u32 = days.iter().map(|d| d.failed).sum();
    html! {
        svg class="week" role="img" viewBox=(format!("0 0 {W} {H}")) width=(W) height=(H)
            xmlns="http://www.w3.org/2000/svg" {
            title { (format!("Last {} days: {total_done} completed, {total_failed} failed", days.len())) }
            line x1="0" x2=(W) y1=(half) y2=(half) class="axis" {}
            @for (i, d) in days.iter().enumerate() {
                @let x = u32::try_from(i).unwrap_or(0) * col + 3;
                @let w = col.saturating_sub(6).max(1);
                rect class="done" x=(x) y=(half - bar(d.completed)) width=(w) height=(bar(d.completed)) {
                    title { (format!("{}: {} completed", d.day, d.completed)) }
                }
                rect class="failed" x=(x) y=(half) width=(w) height=(bar(d.failed)) {
                    title { (format!("{}: {} failed", d.day, d.failed)) }
                }
                text x=(x + w / 2) y=(H - 2) text-anchor="middle" { (d.day.format("%a")) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn bars_scale_to_the_busiest_day_and_every_day_has_its_label() {
        let day = |d, completed, failed| Day {
            day: NaiveDate::from_ymd_opt(2026, 11, d).unwrap(),
            completed,
            failed,
        };
        let days = [day(17, 0, 0), day(18, 4, 1), day(19, 2, 0)];
        let svg = week(&days).into_string();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("2026-11-18: 4 completed"), "{svg}");
        assert!(svg.contains("6 completed, 1 failed"), "{svg}");
        assert_eq!(svg.matches("<rect").count(), 6);
        assert!(svg.contains(">Wed<"), "{svg}");
        // The busiest day's bar fills its half.
        assert!(svg.contains(r#"height="39""#), "{svg}");
        assert!(!week(&[]).into_string().is_empty());
    }
}
