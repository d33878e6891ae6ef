//! What the agent is told when its pull request needs it again: the forge's words (a failing
//! check's summary and log tail, a reviewer's comments, a conflict), quoted as text. They are
//! somebody else's words about the work, never instructions to follow blindly, and never
//! anything but prompt text.

use super::{Check, Review, Rework};

/// The most of one check's or review's text the prompt carries.
const MOST: usize = 4000;

/// The prompt's section for `rework` of pull request `number` (`url`) on `branch`.
pub fn block(number: u64, url: &str, branch: &str, rework: &Rework) -> String {
    let mut out = format!(
        "\n# Your pull request needs you again\n\nYour earlier work on this bead is pull request #{number} ({url}); this workspace is its branch `{branch}` as it is now, with any commits others added. "
    );
    match rework {
        Rework::Checks(checks) => {
            out.push_str("These checks of its head failed. Each says, in the forge's words:\n\n");
            for c in checks {
                out.push_str(&check(c));
            }
            out.push_str("Find out why each failed and fix the work so they pass.\n");
        }
        Rework::Changes(reviews) => {
            out.push_str("Reviewers asked for changes. What they wrote:\n\n");
            for r in reviews {
                out.push_str(&review(r));
            }
            out.push_str("Make the changes they ask for where they are right; say in your deliverable what you changed and what you did not, and why.\n");
        }
        Rework::Conflict => out.push_str(
            "Its base branch moved, and the branch no longer merges into it cleanly. Bring the work up to date with the base branch and resolve the conflict, keeping both sides' intent.\n",
        ),
    }
    out.push_str("Then rewrite the deliverable's Summary to say what you changed in answer: it is what the request's reviewers read next, and an attempt that leaves it as it was has not answered.\n");
    out
}

fn check(c: &Check) -> String {
    format!(
        "## Check `{}`\n\n{}\n",
        one_line(&c.name),
        quoted(&c.summary)
    )
}

fn review(r: &Review) -> String {
    format!("## From {}\n\n{}\n", one_line(&r.author), quoted(&r.body))
}

/// Forge words on one line, without control characters, at most 200 characters: a name, a
/// login, a log's last line, wherever they are shown outside a quote.
pub fn one_line(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// `text` as a markdown quote, without control characters (a log's colours, a terminal
/// escape), cut to its last [`MOST`] characters (a log's end says what failed).
fn quoted(text: &str) -> String {
    let clean: String = text
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect();
    let n = clean.chars().count();
    let tail: String = clean.chars().skip(n.saturating_sub(MOST)).collect();
    let body = if tail.trim().is_empty() {
        "(it said nothing)"
    } else {
        tail.trim_end()
    };
    body.lines().map(|l| format!("> {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::CheckState;

    #[test]
    fn a_failing_checks_words_are_quoted_without_control_characters_and_cut_to_their_end() {
        let log = format!("{}\x1b[31mFAILED\x1b[0m test_login\n", "x".repeat(5000));
        let b = block(
            7,
            "https://f/7",
            "braids/app-1",
            &Rework::Checks(vec![Check {
                name: "ci\x07".into(),
                state: CheckState::Failed,
                summary: log,
            }]),
        );
        assert!(b.contains("pull request #7 (https://f/7)"), "{b}");
        assert!(b.contains("## Check `ci`"), "{b}");
        assert!(
            b.contains("> ") && b.contains("[31mFAILED[0m test_login"),
            "{b}"
        );
        assert!(!b.contains('\x1b') && !b.contains('\x07'));
        assert!(b.len() < 4600, "{}", b.len());
    }

    #[test]
    fn reviewers_words_are_quoted_line_by_line() {
        let b = block(
            3,
            "u",
            "braids/x",
            &Rework::Changes(vec![Review {
                id: 1,
                author: "ana".into(),
                state: crate::review::ReviewState::ChangesRequested,
                body: "Rename it.\nsrc/a.rs:3: and here\n# not a heading".into(),
                inline: true,
            }]),
        );
        assert!(
            b.contains("## From ana\n\n> Rename it.\n> src/a.rs:3: and here\n> # not a heading\n"),
            "{b}"
        );
    }
}
