//! Printing a command's result as text or JSON, one place for both.

use std::io::Write;

use serde::Serialize;

/// A command result that can show itself to a person or a program.
pub trait Output: Serialize {
    fn text(&self) -> String;

    /// Prints to stdout. A reader that went away (`braids tick | head`) is not an error: the
    /// command has already done its work, and `println!` would panic there.
    fn print(&self, json: bool) {
        let text = if json {
            let mut s = serde_json::to_string_pretty(self).expect("output serialises");
            s.push('\n');
            s
        } else {
            let mut t = self.text();
            if !t.is_empty() && !t.ends_with('\n') {
                t.push('\n');
            }
            t
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}
