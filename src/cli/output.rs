//! Printing a command's result as text or JSON, one place for both.

use serde::Serialize;

/// A command result that can show itself to a person or a program.
pub trait Output: Serialize {
    fn text(&self) -> String;

    fn print(&self, json: bool) {
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(self).expect("output serialises")
            );
        } else {
            let t = self.text();
            if !t.is_empty() {
                print!("{t}");
                if !t.ends_with('\n') {
                    println!();
                }
            }
        }
    }
}
