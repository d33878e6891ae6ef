//! aider prints text, not events: its `Tokens: 1.2k sent, 40 received. Cost: $0.01 message,
//! $0.02 session.` lines give the usage, and its provider errors are litellm's exception names
//! and messages. It writes no session braids could resume.

use super::outcome::{provider_from_message, AgentOutcome, StreamReader};
use super::Preset;

pub struct AiderReader {
    out: AgentOutcome,
    last_error: Option<String>,
    last_text: Option<String>,
    /// The text before the last `Tokens:` line: the model's closing words.
    said: Option<String>,
}

impl AiderReader {
    pub fn new() -> AiderReader {
        AiderReader {
            out: AgentOutcome::of(Preset::Aider),
            last_error: None,
            last_text: None,
            said: None,
        }
    }
}

/// `1.2k` → 1200, `40` → 40.
fn count(word: &str) -> Option<u64> {
    let w = word.trim().trim_end_matches(',').replace(',', "");
    let (num, scale) = match w.chars().last()? {
        'k' | 'K' => (&w[..w.len() - 1], 1_000.0),
        'm' | 'M' => (&w[..w.len() - 1], 1_000_000.0),
        _ => (w.as_str(), 1.0),
    };
    num.parse::<f64>().ok().map(|n| (n * scale).round() as u64)
}

/// The tokens and the session cost of one `Tokens:` line.
pub fn tokens_line(line: &str) -> Option<(u64, u64, Option<f64>)> {
    let rest = line.trim().strip_prefix("Tokens:")?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let sent = words
        .iter()
        .position(|w| w.starts_with("sent"))
        .and_then(|i| count(words.get(i.checked_sub(1)?)?))?;
    let received = words
        .iter()
        .position(|w| w.starts_with("received"))
        .and_then(|i| count(words.get(i.checked_sub(1)?)?))?;
    let session = words
        .iter()
        .position(|w| w.starts_with("session"))
        .and_then(|i| words.get(i.checked_sub(1)?))
        .and_then(|w| w.trim_start_matches('$').trim_end_matches(',').parse().ok());
    Some((sent, received, session))
}

impl StreamReader for AiderReader {
    fn line(&mut self, line: &str) {
        let t = line.trim();
        if t.is_empty() {
            return;
        }
        self.out.events += 1;
        if let Some((sent, received, session)) = tokens_line(t) {
            self.said = self.last_text.take();
            self.out.usage.tokens_in = Some(self.out.usage.tokens_in.unwrap_or(0) + sent);
            self.out.usage.tokens_out = Some(self.out.usage.tokens_out.unwrap_or(0) + received);
            if session.is_some() {
                self.out.usage.cost_usd = session;
            }
            return;
        }
        let lower = t.to_ascii_lowercase();
        if lower.contains("error")
            && (lower.contains("litellm")
                || lower.contains("api")
                || provider_from_message(t).is_some())
        {
            self.last_error = Some(t.to_string());
        } else if !t.starts_with("```") {
            self.last_text = Some(t.to_string());
        }
    }

    fn finish(self: Box<Self>, code: Option<i32>, stderr: &str) -> AgentOutcome {
        let mut out = self.out;
        out.final_text = self.said.or(self.last_text);
        let error = self.last_error.or_else(|| {
            stderr
                .lines()
                .rev()
                .find(|l| l.to_ascii_lowercase().contains("error"))
                .map(str::to_string)
        });
        // aider may exit 0 after giving up on a provider; its usage then shows no reply.
        let replied = out.usage.tokens_out.is_some_and(|n| n > 0);
        if let Some(e) = error.filter(|_| code != Some(0) || !replied) {
            out.provider = provider_from_message(&e);
            out.failed = Some(format!(
                "aider: {}",
                crate::system::templates::clip(&e, 200)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::outcome::Verdict;

    #[test]
    fn token_lines_are_read() {
        assert_eq!(
            tokens_line("Tokens: 1.2k sent, 40 received. Cost: $0.01 message, $0.02 session."),
            Some((1200, 40, Some(0.02)))
        );
        assert_eq!(
            tokens_line("Tokens: 100 sent, 20 received."),
            Some((100, 20, None))
        );
        assert_eq!(tokens_line("Applied edit to hello.txt"), None);
    }

    #[test]
    fn a_rate_limit_with_no_reply_is_a_provider_failure_whatever_the_exit() {
        let mut r = Box::new(AiderReader::new());
        r.line("litellm.RateLimitError: RateLimitError: OpenAIException - Too Many Requests");
        r.line("Retrying in 0.2 seconds...");
        let o = r.finish(Some(0), "");
        assert!(matches!(o.verdict(Some(0)), Verdict::Provider(_)), "{o:?}");
        let mut r = Box::new(AiderReader::new());
        for l in [
            "hello.txt",
            "```",
            "hi",
            "```",
            "Created both.",
            "Tokens: 100 sent, 20 received. Cost: $0.00060 message, $0.00060 session.",
            "Applied edit to hello.txt",
        ] {
            r.line(l);
        }
        let o = r.finish(Some(0), "");
        assert_eq!(o.verdict(Some(0)), Verdict::Succeeded);
        assert_eq!(o.final_text.as_deref(), Some("Created both."));
        assert_eq!(o.usage.cost_usd, Some(0.0006));
    }
}
