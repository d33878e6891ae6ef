//! What braids says on an issue when it blocks the bead (the agent's question, a plan to
//! approve, work held for a person), and how a person's reply after it is read.

use crate::forge::issues::IssueComment;
use crate::tracker::said::Said;

/// The comment that blocks the bead for `reason` (the worker's: `question: …`, `ask-first: …`,
/// or any other), mentioning `mention`.
pub fn blocked_comment(reason: &str, mention: Option<&str>) -> String {
    let at = mention
        .filter(|m| !m.is_empty())
        .map(|m| format!("@{m} "))
        .unwrap_or_default();
    if let Some(q) = reason.strip_prefix("question: ") {
        format!(
            "{at}The agent working on this issue asks:\n\n{}\n\nReply with a comment: your reply is the answer, and the next attempt starts from it.",
            quote(q)
        )
    } else if reason.starts_with("ask-first:") {
        format!(
            "{at}braids waits for a person to approve the plan for this issue before an agent starts on it.\n\nSomeone with write access replies `/approve` (any words after it reach the agent) or `/reject <reason>`."
        )
    } else {
        format!(
            "{at}Blocked by braids: {}\n\nRemove the label, or run `braids retry`, once it may go on. Work kept for a person is landed by a reply of `/approve` or dropped by `/reject <reason>` from someone with write access.",
            one_paragraph(reason)
        )
    }
}

/// `text` as a markdown quote, each line.
fn quote(text: &str) -> String {
    text.trim()
        .lines()
        .map(|l| format!("> {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` on one paragraph.
pub fn one_paragraph(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first reply by anyone but `me` after `me`'s newest comment, read: `/approve [note]`,
/// `/reject <reason>`, or else an answer. None when braids spoke last or never.
pub fn reply(comments: &[IssueComment], me: &str) -> Option<Said> {
    let mine = |c: &IssueComment| c.author.eq_ignore_ascii_case(me);
    let last = comments.iter().rposition(mine)?;
    let c = comments[last + 1..].iter().find(|c| !mine(c))?;
    let author = c.author.clone();
    let body = c.body.trim();
    let command = |name: &str| {
        let rest = body.strip_prefix(name)?;
        (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim().to_string())
    };
    Some(if let Some(note) = command("/approve") {
        Said::Approve {
            author,
            note: (!note.is_empty()).then_some(note),
        }
    } else if let Some(reason) = command("/reject") {
        Said::Reject {
            author,
            reason: if reason.is_empty() {
                "rejected on the issue".into()
            } else {
                reason
            },
        }
    } else {
        Said::Answer {
            author,
            text: body.to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(author: &str, body: &str) -> IssueComment {
        IssueComment {
            id: 0,
            author: author.into(),
            body: body.into(),
            created: String::new(),
        }
    }

    #[test]
    fn the_first_reply_after_braids_last_spoke_is_read() {
        let me = "braids-bot";
        let cases: Vec<(Vec<IssueComment>, Option<Said>)> = vec![
            (vec![c("ana", "hello")], None),
            (vec![c(me, "asks"), c("Braids-Bot", "more")], None),
            (
                vec![
                    c("ana", "early"),
                    c(me, "asks"),
                    c("bob", " Use Postgres. "),
                    c("ana", "no"),
                ],
                Some(Said::Answer {
                    author: "bob".into(),
                    text: "Use Postgres.".into(),
                }),
            ),
            (
                vec![c(me, "plan?"), c("ana", "/approve keep it small")],
                Some(Said::Approve {
                    author: "ana".into(),
                    note: Some("keep it small".into()),
                }),
            ),
            (
                vec![c(me, "plan?"), c("ana", "/approve")],
                Some(Said::Approve {
                    author: "ana".into(),
                    note: None,
                }),
            ),
            (
                vec![c(me, "plan?"), c("ana", "/reject too big")],
                Some(Said::Reject {
                    author: "ana".into(),
                    reason: "too big".into(),
                }),
            ),
            // Not a command: words that start like one.
            (
                vec![c(me, "plan?"), c("ana", "/approved already?")],
                Some(Said::Answer {
                    author: "ana".into(),
                    text: "/approved already?".into(),
                }),
            ),
            // A stranger's command before braids spoke again is old.
            (
                vec![
                    c(me, "plan?"),
                    c("eve", "/approve"),
                    c(me, "only write access"),
                ],
                None,
            ),
        ];
        for (comments, want) in cases {
            assert_eq!(reply(&comments, me), want, "{comments:?}");
        }
    }

    #[test]
    fn each_block_says_what_a_person_can_reply() {
        let q = blocked_comment(
            "question: Which database?\nPostgres or SQLite?",
            Some("ana"),
        );
        assert!(q.starts_with("@ana The agent working on this issue asks:\n\n> Which database?\n> Postgres or SQLite?"), "{q}");
        let plan = blocked_comment("ask-first: waiting for a person", None);
        assert!(
            plan.contains("`/approve`") && !plan.starts_with('@'),
            "{plan}"
        );
        let other = blocked_comment("tests failed\n\ttwice", Some("ana"));
        assert!(
            other.starts_with("@ana Blocked by braids: tests failed twice"),
            "{other}"
        );
    }
}
