//! A person's answers to a bead's questions (`braids answer`), kept outside the project beside
//! the bead's prompt, so every later prompt of that bead carries the conversation: the agent
//! that asked is gone, and the next one starts from the prompt alone.

use std::path::PathBuf;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::BeadId;
use crate::system::paths::Paths;

/// One question and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub question: String,
    pub answer: String,
    pub at: DateTime<Utc>,
}

fn file(paths: &Paths, slug: &str, bead: &BeadId) -> PathBuf {
    paths.work_dir(slug, bead).join("answers.json")
}

/// The bead's answers, oldest first; none when there are none or the file cannot be read (a
/// prompt without them is still a prompt).
pub fn load(paths: &Paths, slug: &str, bead: &BeadId) -> Vec<Answer> {
    std::fs::read(file(paths, slug, bead))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Adds `answer` to the bead's answers (read, add, temp + rename, under the file's own lock so
/// two answers at once both land). A file that cannot be read is an error, never replaced.
pub fn record(paths: &Paths, slug: &str, bead: &BeadId, answer: Answer) -> Result<()> {
    let path = file(paths, slug, bead);
    crate::system::atomic::update_json(
        &path,
        &path.with_extension("lock"),
        |all: &mut Vec<Answer>| {
            all.push(answer);
        },
    )
    .with_context(|| format!("cannot record the answer for {bead}"))
}

/// The prompt's section for `answers`: empty when there are none.
pub fn prompt_block(answers: &[Answer]) -> String {
    if answers.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# A person answered your questions\n\n");
    for a in answers {
        out.push_str(&format!(
            "Question ({}): {}\n\nAnswer: {}\n\n",
            a.at.format("%Y-%m-%d %H:%M UTC"),
            a.question.trim(),
            a.answer.trim()
        ));
    }
    out.push_str("Go on with the bead using these answers; do not ask the same question again.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_kept_in_order_and_shown_in_the_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path().to_path_buf(), None);
        let bead = BeadId::new("app-1").unwrap();
        assert!(load(&paths, "app", &bead).is_empty());
        assert_eq!(prompt_block(&[]), "");
        for (q, a) in [("JSON or XML?", "JSON"), ("Which port?", "8080")] {
            let answer = Answer {
                question: q.into(),
                answer: a.into(),
                at: Utc::now(),
            };
            record(&paths, "app", &bead, answer).unwrap();
        }
        let all = load(&paths, "app", &bead);
        assert_eq!(all.len(), 2);
        let block = prompt_block(&all);
        let json = block.find("Answer: JSON").unwrap();
        assert!(block.find("Answer: 8080").unwrap() > json, "{block}");
        assert!(block.contains("JSON or XML?"), "{block}");
    }
}
