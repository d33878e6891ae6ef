//! What braids says on an issue when it blocks the bead (the agent's question, a plan to
//! approve, work held for a person), and how a person's reply after it is read.

use crate::forge::issues::IssueComment;
use crate::tracker::said::Said;

/// The comment that blocks the bead for `reason` (the worker's: `question: …`, `ask-first: …`,
/// or any other), mentioning `mention`.
pub fn blocked_comment(reason: &str, mention: Option<&str>) -> String {
    format!("{}\n\n{ASKS}", asking(reason, mention))
}

fn asking(reason: &str, mention: Option<&str>) -> String {
    let at = mention
        .filter(|m| !m.is_empty())
        .map(|m| format!("@{m} "))
        .unwrap_or_default();
    if let Some(q) = reason.strip_prefix("question: ") {
        format!(
            "{at}The agent working on this issue asks:\n\n{}\n\nReply with a comment: the first reply from the issue's author, the project's owner or someone with write access is the answer, and the next attempt starts from it.",
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

/// Ends each comment of braids' that asks something: replies are read from the newest on,
/// so braids' other comments (telling someone their ruling was not acted on) cut nothing off.
pub const ASKS: &str = "<!-- braids asks -->";

/// The replies by anyone but `me` after `me`'s newest asking comment (its newest comment,
/// when none is marked), each with its comment's id, oldest first. Empty when braids never
/// spoke.
pub fn replies(comments: &[IssueComment], me: &str) -> Vec<(u64, Said)> {
    let mine = |c: &IssueComment| c.author.eq_ignore_ascii_case(me);
    let Some(asked) = comments
        .iter()
        .rposition(|c| mine(c) && c.body.trim_end().ends_with(ASKS))
        .or_else(|| comments.iter().rposition(mine))
    else {
        return Vec::new();
    };
    comments[asked + 1..]
        .iter()
        .filter(|c| !mine(c))
        .map(|c| (c.id, read(&c.author, &c.body)))
        .collect()
}

/// One reply by `author`: `/approve [note]`, `/reject <reason>`, or else an answer.
fn read(author: &str, body: &str) -> Said {
    let author = author.to_string();
    let body = body.trim();
    let command = |name: &str| {
        let rest = body.strip_prefix(name)?;
        (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim().to_string())
    };
    if let Some(note) = command("/approve") {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: u64, author: &str, body: &str) -> IssueComment {
        IssueComment {
            id,
            author: author.into(),
            body: body.into(),
            created: String::new(),
        }
    }

    fn answer(author: &str, text: &str) -> Said {
        Said::Answer {
            author: author.into(),
            text: text.into(),
        }
    }

    #[test]
    fn every_reply_after_braids_last_asked_is_read_in_order() {
        let me = "braids-bot";
        let asks = |id| c(id, me, &blocked_comment("question: Which?", None));
        let cases: Vec<(Vec<IssueComment>, Vec<(u64, Said)>)> = vec![
            (vec![c(1, "ana", "hello")], vec![]),
            (vec![asks(1), c(2, "Braids-Bot", "more")], vec![]),
            (
                vec![
                    c(1, "ana", "early"),
                    asks(2),
                    c(3, "bob", " Use Postgres. "),
                    c(4, "ana", "no"),
                ],
                vec![
                    (3, answer("bob", "Use Postgres.")),
                    (4, answer("ana", "no")),
                ],
            ),
            (
                vec![
                    asks(1),
                    c(2, "eve", "+1"),
                    c(3, "ana", "/approve keep it small"),
                ],
                vec![
                    (2, answer("eve", "+1")),
                    (
                        3,
                        Said::Approve {
                            author: "ana".into(),
                            note: Some("keep it small".into()),
                        },
                    ),
                ],
            ),
            (
                vec![asks(1), c(2, "ana", "/approve")],
                vec![(
                    2,
                    Said::Approve {
                        author: "ana".into(),
                        note: None,
                    },
                )],
            ),
            (
                vec![asks(1), c(2, "ana", "/reject too big")],
                vec![(
                    2,
                    Said::Reject {
                        author: "ana".into(),
                        reason: "too big".into(),
                    },
                )],
            ),
            // Not a command: words that start like one.
            (
                vec![asks(1), c(2, "ana", "/approved already?")],
                vec![(2, answer("ana", "/approved already?"))],
            ),
            // braids telling a stranger cuts off nothing: replies count from its last ask.
            (
                vec![
                    asks(1),
                    c(2, "eve", "/approve"),
                    c(3, "ana", "/approve"),
                    c(4, me, "@eve only people with write access"),
                ],
                vec![
                    (
                        2,
                        Said::Approve {
                            author: "eve".into(),
                            note: None,
                        },
                    ),
                    (
                        3,
                        Said::Approve {
                            author: "ana".into(),
                            note: None,
                        },
                    ),
                ],
            ),
            // A new ask: what came before it is old.
            (vec![asks(1), c(2, "ana", "JSON"), asks(3)], vec![]),
            // Without a marked ask, braids' newest comment is where replies start.
            (
                vec![c(1, me, "asks"), c(2, "bob", "yes")],
                vec![(2, answer("bob", "yes"))],
            ),
        ];
        for (comments, want) in cases {
            assert_eq!(replies(&comments, me), want, "{comments:?}");
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
        assert!([q, plan, other].iter().all(|c| c.ends_with(ASKS)));
    }
}
