//! What a person said on a bead where the tracker lives among people (a forge's issue), after
//! braids last spoke there: an answer to the agent's question, or a ruling on a plan or on
//! held work.

/// A person's reply, with who wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Said {
    /// A reply from someone who may answer (write access, the project's `Owner:` or the
    /// issue's author): the answer to the agent's question.
    Answer { author: String, text: String },
    /// `/approve`, with the note after it, from someone with write access.
    Approve {
        author: String,
        note: Option<String>,
    },
    /// `/reject <reason>`, from someone with write access.
    Reject { author: String, reason: String },
    /// `/approve` or `/reject` from someone without write access: not acted on.
    NotAllowed { author: String },
}

impl Said {
    pub fn author(&self) -> &str {
        match self {
            Said::Answer { author, .. }
            | Said::Approve { author, .. }
            | Said::Reject { author, .. }
            | Said::NotAllowed { author } => author,
        }
    }
}
