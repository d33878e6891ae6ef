//! A project's landing choice, from its PROJECT.md fields. Errors are lowercase fragments the
//! format layer turns into a diagnostic naming the file, the line and the fix.

use std::fmt;
use std::str::FromStr;

use crate::format::project::ProjectConfig;

/// How a bead's work reaches the base branch (`Landing:`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Landing {
    /// Committed and pushed straight to the base branch.
    #[default]
    Push,
    /// Pushed to a branch of its own and opened as a pull request against the base branch.
    PullRequest,
}

/// Who merges a pull request once it may be merged (`Merge:`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MergePolicy {
    /// braids, through the forge's API, naming the head it saw pass.
    Auto,
    /// A person, on the forge; braids closes the bead when it sees the merge.
    #[default]
    Person,
}

/// Which forge and repository a project's pull requests go to (`Forge: github me/app`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeRef {
    /// A `[forges.<name>]` entry of config.toml, or a built-in one (`github`, `gitlab`).
    pub name: String,
    /// `owner/name` on GitHub, `group/sub/name` on GitLab.
    pub repository: String,
}

/// A project's landing settings together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewSettings {
    pub landing: Landing,
    pub merge: MergePolicy,
    /// Approving reviews needed before braids merges.
    pub approvals: u32,
    /// `None`: taken from the `origin` remote's host.
    pub forge: Option<ForgeRef>,
}

impl FromStr for Landing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "push" => Ok(Landing::Push),
            "pull-request" | "pull request" | "pr" | "merge-request" | "mr" => {
                Ok(Landing::PullRequest)
            }
            other => Err(format!(
                "landing `{other}` is neither `push` nor `pull-request`"
            )),
        }
    }
}

impl FromStr for MergePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(MergePolicy::Auto),
            "person" => Ok(MergePolicy::Person),
            other => Err(format!("merge `{other}` is neither `auto` nor `person`")),
        }
    }
}

impl FromStr for ForgeRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut words = s.split_whitespace();
        let (Some(name), Some(repository), None) = (words.next(), words.next(), words.next())
        else {
            return Err(format!(
                "forge `{}` is not `<forge> <repository>`, such as `github me/app`",
                s.trim()
            ));
        };
        let parts: Vec<&str> = repository.trim_end_matches(".git").split('/').collect();
        let named = |p: &&str| {
            !p.is_empty()
                && *p != "."
                && *p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if parts.len() < 2 || !parts.iter().all(named) {
            return Err(format!(
                "repository `{repository}` is not `owner/name` (GitLab: `group/sub/name`)"
            ));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        {
            return Err(format!("forge name `{name}` has characters a name cannot"));
        }
        Ok(ForgeRef {
            name: name.to_string(),
            repository: parts.join("/"),
        })
    }
}

/// A landing field PROJECT.md gets wrong: the rest of its settings still apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// The field as docs/files.md spells it.
    pub field: &'static str,
    pub line: usize,
    /// What is wrong, and the default used instead.
    pub sentence: String,
    pub fix: &'static str,
}

impl ReviewSettings {
    /// The landing settings `project` writes, each wrong field's default used instead and
    /// named among the problems.
    pub fn of(project: &ProjectConfig) -> (ReviewSettings, Vec<FieldProblem>) {
        let mut out = ReviewSettings::default();
        let mut problems = Vec::new();
        let mut read = |field: &'static str,
                        fix: &'static str,
                        apply: &mut dyn FnMut(&str) -> Result<(), String>| {
            if let Some(f) = project.field(field) {
                if let Err(e) = apply(&f.value) {
                    problems.push(FieldProblem {
                        field,
                        line: f.line,
                        sentence: e,
                        fix,
                    });
                }
            }
        };
        read(
            "Landing",
            "write `Landing: push` (the default) or `Landing: pull-request`",
            &mut |v| v.parse().map(|l| out.landing = l),
        );
        read(
            "Merge",
            "write `Merge: person` (the default: a person merges on the forge) or `Merge: auto`",
            &mut |v| v.parse().map(|m| out.merge = m),
        );
        read(
            "Approvals",
            "write the number of approving reviews braids waits for, such as `Approvals: 1`",
            &mut |v| parse_approvals(v).map(|n| out.approvals = n),
        );
        read(
            "Forge",
            "write the forge and the repository, such as `Forge: github me/app` or `Forge: gitlab group/app`, or remove the line to take them from the `origin` remote",
            &mut |v| v.parse().map(|f| out.forge = Some(f)),
        );
        (out, problems)
    }
}

/// `Approvals:`, a whole number of reviews.
pub fn parse_approvals(s: &str) -> Result<u32, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("approvals `{}` is not a whole number", s.trim()))
}

impl fmt::Display for Landing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Landing::Push => "push",
            Landing::PullRequest => "pull-request",
        })
    }
}

impl fmt::Display for MergePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MergePolicy::Auto => "auto",
            MergePolicy::Person => "person",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn landing_and_merge_read_their_words_and_name_a_wrong_one() {
        assert_eq!("pull-request".parse(), Ok(Landing::PullRequest));
        assert_eq!(" Push ".parse(), Ok(Landing::Push));
        assert_eq!("merge-request".parse(), Ok(Landing::PullRequest));
        let e = "rebase".parse::<Landing>().unwrap_err();
        assert!(e.contains("`rebase`") && e.contains("pull-request"), "{e}");
        assert_eq!("AUTO".parse(), Ok(MergePolicy::Auto));
        assert!("maybe"
            .parse::<MergePolicy>()
            .unwrap_err()
            .contains("`maybe`"));
        assert_eq!(parse_approvals(" 2 "), Ok(2));
        assert!(parse_approvals("two").unwrap_err().contains("whole number"));
    }

    #[test]
    fn a_projects_fields_are_read_and_each_wrong_one_is_named_with_its_line() {
        let text = "# App\n\n- **Status:** active\n- **Priority:** normal\n- **Autonomy:** full\n- **Landing:** pull-request\n- **Merge:** sometimes\n- **Approvals:** 2\n- **Forge:** github me\n";
        let parsed = crate::format::layout::parse_project(text, std::path::Path::new("PROJECT.md"));
        let (settings, problems) = ReviewSettings::of(&parsed.value);
        assert_eq!(settings.landing, Landing::PullRequest);
        assert_eq!(
            settings.merge,
            MergePolicy::Person,
            "the default for a wrong word"
        );
        assert_eq!(settings.approvals, 2);
        assert_eq!(settings.forge, None);
        let named: Vec<(&str, usize)> = problems.iter().map(|p| (p.field, p.line)).collect();
        assert_eq!(named, [("Merge", 7), ("Forge", 9)]);
        assert!(problems[0].sentence.contains("`sometimes`"), "{problems:?}");
        assert!(problems[1].fix.contains("github me/app"), "{problems:?}");
        // Nothing written: today's landing.
        let parsed = crate::format::layout::parse_project(
            "# App\n\n- **Status:** active\n",
            std::path::Path::new("PROJECT.md"),
        );
        assert_eq!(
            ReviewSettings::of(&parsed.value),
            (ReviewSettings::default(), vec![])
        );
    }

    #[test]
    fn a_forge_names_its_entry_and_a_repository_of_two_or_more_parts() {
        let f: ForgeRef = "github me/app".parse().unwrap();
        assert_eq!(
            (f.name.as_str(), f.repository.as_str()),
            ("github", "me/app")
        );
        let f: ForgeRef = "gitlab group/sub/app.git".parse().unwrap();
        assert_eq!(f.repository, "group/sub/app");
        for bad in [
            "github",
            "github app",
            "github me/app extra",
            "github me/../app",
            "github me//app",
            "github me/a;pp",
            "git$hub me/app",
        ] {
            assert!(bad.parse::<ForgeRef>().is_err(), "{bad}");
        }
    }
}
