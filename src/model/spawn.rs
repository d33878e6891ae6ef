//! The spawn message a worker receives: exactly four lines, `Project`, `Bead`, `Iteration`,
//! `Channel` (CONTRACTS 2.4).
//!
//! Rendering refuses any value with a line break, so a crafted path or channel can never add a
//! fifth field; parsing refuses anything but the four fields, once each.

use std::fmt;
use std::path::PathBuf;

use super::bead::{BeadId, BeadIdError};
use super::iteration::IterationName;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnMessageError {
    #[error("spawn message line {line} `{text}` is not `Field: value`")]
    NotAField { line: usize, text: String },
    #[error("spawn message has unknown field `{0}`; only Project, Bead, Iteration and Channel are allowed")]
    Unknown(String),
    #[error("spawn message repeats field `{0}`")]
    Repeated(&'static str),
    #[error("spawn message lacks field `{0}`")]
    Missing(&'static str),
    #[error(
        "spawn message field {0} contains a line break, a line separator or a control character"
    )]
    ControlChar(&'static str),
    #[error("spawn message Project `{0}` starts or ends with whitespace, which a message line cannot carry")]
    Whitespace(String),
    #[error("spawn message Iteration `{0}` is not an iteration directory's name (digits, such as `008`)")]
    Iteration(String),
    #[error("spawn message Project `{0}` is not an absolute path")]
    RelativePath(String),
    #[error(transparent)]
    Bead(#[from] BeadIdError),
}

/// The four facts a worker needs, and nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnMessage {
    pub project: PathBuf,
    pub bead: BeadId,
    /// The iteration's directory name as written (`008`); a worker started by an older braids
    /// got the number (`8`), which still finds the directory ([`IterationName::find`]).
    pub iteration: IterationName,
    /// Empty means no channel: notifications are skipped (3.8).
    pub channel: String,
}

/// Refuses anything some reader takes for a line break: control characters (`\n`, `\r`, VT,
/// FF, NEL …) and the Unicode line and paragraph separators, which Python's `splitlines` and
/// JavaScript split on.
fn clean(field: &'static str, v: &str) -> Result<(), SpawnMessageError> {
    if v.chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        Err(SpawnMessageError::ControlChar(field))
    } else {
        Ok(())
    }
}

impl SpawnMessage {
    /// Builds a message, refusing values that would break the four-line shape.
    pub fn new(
        project: PathBuf,
        bead: BeadId,
        iteration: impl Into<IterationName>,
        channel: impl Into<String>,
    ) -> Result<Self, SpawnMessageError> {
        let channel = channel.into();
        let shown = project.to_string_lossy().into_owned();
        clean("Project", &shown)?;
        clean("Channel", &channel)?;
        if !project.is_absolute() {
            return Err(SpawnMessageError::RelativePath(shown));
        }
        if shown.trim() != shown {
            return Err(SpawnMessageError::Whitespace(shown));
        }
        Ok(SpawnMessage {
            project,
            bead,
            iteration: iteration.into(),
            channel: channel.trim().to_string(),
        })
    }

    /// Parses the four-line form; blank lines and a trailing newline are allowed.
    pub fn parse(text: &str) -> Result<Self, SpawnMessageError> {
        let (mut project, mut bead, mut iteration, mut channel) = (None, None, None, None);
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let (key, value) =
                line.split_once(':')
                    .ok_or_else(|| SpawnMessageError::NotAField {
                        line: i + 1,
                        text: line.chars().take(80).collect(),
                    })?;
            let value = value.trim().to_string();
            let slot = match key.trim() {
                "Project" => (&mut project, "Project"),
                "Bead" => (&mut bead, "Bead"),
                "Iteration" => (&mut iteration, "Iteration"),
                "Channel" => (&mut channel, "Channel"),
                other => return Err(SpawnMessageError::Unknown(other.chars().take(40).collect())),
            };
            if slot.0.replace(value).is_some() {
                return Err(SpawnMessageError::Repeated(slot.1));
            }
        }
        let project = project.ok_or(SpawnMessageError::Missing("Project"))?;
        let bead = BeadId::new(&bead.ok_or(SpawnMessageError::Missing("Bead"))?)?;
        let it = iteration.ok_or(SpawnMessageError::Missing("Iteration"))?;
        let iteration = IterationName::new(&it)
            .map_err(|_| SpawnMessageError::Iteration(it.chars().take(40).collect()))?;
        let channel = channel.ok_or(SpawnMessageError::Missing("Channel"))?;
        SpawnMessage::new(PathBuf::from(project), bead, iteration, channel)
    }
}

impl fmt::Display for SpawnMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Project: {}", self.project.display())?;
        writeln!(f, "Bead: {}", self.bead)?;
        writeln!(f, "Iteration: {}", self.iteration)?;
        writeln!(f, "Channel: {}", self.channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg() -> SpawnMessage {
        SpawnMessage::new("/p/app".into(), BeadId::new("app-x1y").unwrap(), 3, "#dev").unwrap()
    }

    #[test]
    fn c2_4_exactly_four_lines() {
        let text = msg().to_string();
        assert_eq!(
            text,
            "Project: /p/app\nBead: app-x1y\nIteration: 3\nChannel: #dev\n"
        );
        assert_eq!(SpawnMessage::parse(&text).unwrap(), msg());
    }

    #[test]
    fn c2_4_iteration_is_the_directory_name_as_written() {
        let bead = BeadId::new("a-1").unwrap();
        let it = IterationName::new("008").unwrap();
        let m = SpawnMessage::new("/p".into(), bead, it, "").unwrap();
        assert!(m.to_string().contains("\nIteration: 008\n"), "{m}");
        assert_eq!(SpawnMessage::parse(&m.to_string()).unwrap().iteration, it);
        // an older braids wrote the number; it still parses, as written
        let old = SpawnMessage::parse("Project: /p\nBead: a-1\nIteration: 8\nChannel: \n");
        assert_eq!(old.unwrap().iteration.as_str(), "8");
        let bad = SpawnMessage::parse("Project: /p\nBead: a-1\nIteration: eight\nChannel: \n");
        assert!(matches!(bad, Err(SpawnMessageError::Iteration(_))));
    }

    #[test]
    fn c2_4_empty_channel_is_a_field() {
        let m = SpawnMessage::new("/p".into(), BeadId::new("a-1").unwrap(), 1, "").unwrap();
        assert_eq!(m.to_string().lines().count(), 4);
        assert_eq!(m.to_string().lines().last(), Some("Channel: "));
        assert_eq!(SpawnMessage::parse(&m.to_string()).unwrap(), m);
    }

    #[test]
    fn c2_4_fifth_field_or_injection_refused() {
        let five = format!("{}Extra: x\n", msg());
        assert!(matches!(
            SpawnMessage::parse(&five),
            Err(SpawnMessageError::Unknown(_))
        ));
        let twice = format!("{}Bead: app-x1y\n", msg());
        assert!(matches!(
            SpawnMessage::parse(&twice),
            Err(SpawnMessageError::Repeated("Bead"))
        ));
        let bead = BeadId::new("a-1").unwrap();
        assert!(SpawnMessage::new("/p\nBead: evil".into(), bead.clone(), 1, "").is_err());
        assert!(SpawnMessage::new("/p".into(), bead.clone(), 1, "#c\nExtra: 1").is_err());
        assert!(SpawnMessage::new("/p".into(), bead.clone(), 1, "#c\u{2028}Bead: x").is_err());
        assert!(SpawnMessage::new("/p/x ".into(), bead.clone(), 1, "").is_err());
        assert!(SpawnMessage::new("relative".into(), bead, 1, "").is_err());
        assert!(SpawnMessage::parse("Project: /p\nBead: a-1\nIteration: 1\n").is_err());
    }
}
