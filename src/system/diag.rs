//! Findings about input, each naming a file, a line, the contract section and a fix.
//!
//! Readers never fail on bad input (CONTRACTS 3.9); they return what they could read plus a list
//! of these. `braids check` prints them, the tick puts them on STATUS.md, and tests match on
//! their section so a finding is tied to the invariant it protects.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something is wrong but a default or a skip keeps braids going.
    Warning,
    /// A contract is violated.
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub path: PathBuf,
    /// 1-based; `None` when the finding is about the file as a whole.
    pub line: Option<usize>,
    /// The CONTRACTS section, such as `1.2`.
    pub section: &'static str,
    pub message: String,
    pub fix: String,
}

impl Diagnostic {
    pub fn new(
        severity: Severity,
        path: &Path,
        line: Option<usize>,
        section: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity,
            path: path.to_path_buf(),
            line,
            section,
            message: message.into(),
            fix: fix.into(),
        }
    }

    pub fn error(
        path: &Path,
        line: Option<usize>,
        section: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Diagnostic::new(Severity::Error, path, line, section, message, fix)
    }

    pub fn warning(
        path: &Path,
        line: Option<usize>,
        section: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Diagnostic::new(Severity::Warning, path, line, section, message, fix)
    }

    /// The same finding about another file.
    pub fn about(&mut self, path: &Path) -> &mut Self {
        self.path = path.to_path_buf();
        self
    }

    /// The same finding under another contract section.
    pub fn in_section(&mut self, section: &'static str) -> &mut Self {
        self.section = section;
        self
    }

    /// `path:line`, or just the path.
    pub fn location(&self) -> String {
        match self.line {
            Some(l) => format!("{}:{l}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{}: {sev} [{}]: {}",
            self.location(),
            self.section,
            self.message
        )?;
        if !self.fix.is_empty() {
            write!(f, " (fix: {})", self.fix)?;
        }
        Ok(())
    }
}

/// Collects one reader's findings about one file, under its contract section.
///
/// `diags.error(Some(line), message, fix)` records a finding; the finding is returned so the
/// odd one can name another file or section: `diags.error(..).in_section("4.1")`.
#[derive(Debug, Clone)]
pub struct Diags {
    file: PathBuf,
    section: &'static str,
    found: Vec<Diagnostic>,
}

impl Diags {
    pub fn new(file: &Path, section: &'static str) -> Self {
        Diags {
            file: file.to_path_buf(),
            section,
            found: Vec::new(),
        }
    }

    pub fn error(
        &mut self,
        line: Option<usize>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> &mut Diagnostic {
        self.add(Severity::Error, line, message.into(), fix.into())
    }

    pub fn warn(
        &mut self,
        line: Option<usize>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> &mut Diagnostic {
        self.add(Severity::Warning, line, message.into(), fix.into())
    }

    fn add(
        &mut self,
        severity: Severity,
        line: Option<usize>,
        message: String,
        fix: String,
    ) -> &mut Diagnostic {
        let d = Diagnostic::new(severity, &self.file, line, self.section, message, fix);
        self.found.push(d);
        self.found.last_mut().expect("just pushed")
    }

    pub fn extend(&mut self, found: impl IntoIterator<Item = Diagnostic>) {
        self.found.extend(found);
    }

    /// The findings in the order they were made.
    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.found
    }

    /// `value` with the findings in the order they were made.
    pub fn parsed<T>(self, value: T) -> Parsed<T> {
        Parsed::new(value, self.found)
    }

    /// `value` with the findings in line order (findings about the whole file first).
    pub fn by_line<T>(mut self, value: T) -> Parsed<T> {
        self.found.sort_by_key(|d| d.line);
        Parsed::new(value, self.found)
    }
}

/// A reader's result: whatever it could make of the input, and what it found wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    pub value: T,
    pub diagnostics: Vec<Diagnostic>,
}

impl<T> Parsed<T> {
    pub fn new(value: T, diagnostics: Vec<Diagnostic>) -> Self {
        Parsed { value, diagnostics }
    }

    pub fn into_parts(self) -> (T, Vec<Diagnostic>) {
        (self.value, self.diagnostics)
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}
