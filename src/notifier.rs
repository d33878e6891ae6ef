//! Notifications (CONTRACTS 3.8): only events that are `on` in the project's Notifications
//! table, none at all without a Channel, the event's mention appended.
//!
//! Check-ins ([`send_checkin`], the tick's check-in module) are their own kind of message: they go to
//! the Channel whatever the Notifications table says, and likewise never without a Channel.
//!
//! Delivery is by a configured notifier — an argv template (`openclaw message send …`) or a
//! webhook taking a Discord/Slack-style JSON POST. Delivery failures are logged and swallowed:
//! a notification that could not be sent never fails the bead or the tick.

use std::time::Duration;

use serde::Serialize;

use crate::config::NotifyConfig;
use crate::format::project::ProjectConfig;
use crate::model::{BeadId, NotificationEvent};
use crate::system::proc::Invocation;
pub use crate::system::templates::expand;

/// What a message is about: one of the 1.2 events, or a check-in. Shown to notifiers as the
/// event's name (`{event}`, the webhook's `event`): `bead-complete`, …, `checkin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Table(NotificationEvent),
    Checkin,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Table(e) => e.as_str(),
            Event::Checkin => "checkin",
        }
    }
}

impl From<NotificationEvent> for Event {
    fn from(e: NotificationEvent) -> Self {
        Event::Table(e)
    }
}

impl PartialEq<NotificationEvent> for Event {
    fn eq(&self, other: &NotificationEvent) -> bool {
        *self == Event::Table(*other)
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One message to one channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub event: Event,
    pub channel: String,
    pub project: String,
    pub bead: Option<BeadId>,
    /// The text, mention included.
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("notifier command failed: {0}")]
    Command(String),
    #[error("webhook {url} failed: {detail}")]
    Webhook { url: String, detail: String },
}

pub trait Notifier: Send + Sync {
    fn send(&self, n: &Notification) -> Result<(), NotifyError>;

    /// Whether anything is configured to deliver to: with nothing, a notification is skipped,
    /// never reported sent.
    fn configured(&self) -> bool {
        true
    }
}

/// The 3.8 policy: `None` when the event is off or there is no Channel.
pub fn compose(
    project: &ProjectConfig,
    slug: &str,
    event: NotificationEvent,
    bead: Option<&BeadId>,
    text: &str,
) -> Option<Notification> {
    let channel = project.channel.as_deref()?.trim();
    if channel.is_empty() || !project.notifications.is_on(event) {
        return None;
    }
    let message = match project.notifications.mention(event) {
        Some(m) if !m.trim().is_empty() => format!("{text} {}", m.trim()),
        _ => text.to_string(),
    };
    Some(Notification {
        event: event.into(),
        channel: channel.to_string(),
        project: slug.to_string(),
        bead: bead.cloned(),
        message,
    })
}

/// What became of one notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// The event is off, or there is no Channel (3.8).
    Skipped,
    /// The notifier failed; logged, never fatal.
    Failed(String),
}

impl std::fmt::Display for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Delivery::Sent => f.write_str("sent"),
            Delivery::Skipped => f.write_str("skipped (event off, no Channel, or no notifier)"),
            Delivery::Failed(e) => write!(f, "not delivered: {e}"),
        }
    }
}

/// Composes and sends; logs instead of failing.
pub fn deliver(
    notifier: &dyn Notifier,
    project: &ProjectConfig,
    slug: &str,
    event: NotificationEvent,
    bead: Option<&BeadId>,
    text: &str,
) -> Delivery {
    let Some(n) = compose(project, slug, event, bead, text) else {
        tracing::debug!(%slug, event = %event, "notification skipped (event off or no channel)");
        return Delivery::Skipped;
    };
    if !notifier.configured() {
        tracing::debug!(%slug, event = %event, "notification skipped: no [notify] command or webhook in config.toml");
        return Delivery::Skipped;
    }
    match notifier.send(&n) {
        Ok(()) => {
            tracing::info!(%slug, event = %event, channel = %n.channel, "notification sent");
            Delivery::Sent
        }
        Err(e) => {
            tracing::warn!(%slug, event = %event, "notification not delivered: {e}");
            Delivery::Failed(e.to_string())
        }
    }
}

/// [`deliver`], answering whether a message went out.
pub fn send(
    notifier: &dyn Notifier,
    project: &ProjectConfig,
    slug: &str,
    event: NotificationEvent,
    bead: Option<&BeadId>,
    text: &str,
) -> bool {
    deliver(notifier, project, slug, event, bead, text) == Delivery::Sent
}

/// Sends a check-in to the project's Channel, whatever its Notifications table says; nothing
/// without a Channel. Returns whether it was delivered (or there is no notifier to deliver to).
/// Logs at debug level: the tick's one summary line reports check-ins.
pub fn send_checkin(
    notifier: &dyn Notifier,
    channel: Option<&str>,
    slug: &str,
    text: &str,
) -> bool {
    let Some(channel) = channel.map(str::trim).filter(|c| !c.is_empty()) else {
        return false;
    };
    let n = Notification {
        event: Event::Checkin,
        channel: channel.to_string(),
        project: slug.to_string(),
        bead: None,
        message: text.to_string(),
    };
    match notifier.send(&n) {
        Ok(()) => {
            tracing::debug!(%slug, channel, "check-in sent");
            true
        }
        Err(e) => {
            tracing::warn!(%slug, "check-in not delivered: {e}; trying again next run");
            false
        }
    }
}

/// Runs an argv template per notification. Never a shell.
pub struct CommandNotifier {
    pub argv: Vec<String>,
    pub timeout: Duration,
}

impl Notifier for CommandNotifier {
    fn send(&self, n: &Notification) -> Result<(), NotifyError> {
        let bead = n.bead.as_ref().map(|b| b.to_string()).unwrap_or_default();
        let vars = [
            ("channel", n.channel.as_str()),
            ("event", n.event.as_str()),
            ("message", n.message.as_str()),
            ("project", n.project.as_str()),
            ("bead", bead.as_str()),
        ];
        let argv: Vec<String> = self.argv.iter().map(|a| expand(a, &vars)).collect();
        let out = Invocation::new(argv)
            .timeout(self.timeout)
            .run()
            .map_err(|e| NotifyError::Command(e.to_string()))?;
        if out.success() {
            Ok(())
        } else if out.timed_out {
            Err(NotifyError::Command(format!(
                "timed out after {}s",
                self.timeout.as_secs()
            )))
        } else {
            Err(NotifyError::Command(format!(
                "{}: {}",
                out.status_text(),
                out.stderr.trim()
            )))
        }
    }
}

/// POSTs `{"content", "text", "event", "channel", "project", "bead"}` as JSON: `content` is what
/// Discord reads, `text` what Slack reads.
pub struct WebhookNotifier {
    pub url: String,
    pub timeout: Duration,
}

impl Notifier for WebhookNotifier {
    fn send(&self, n: &Notification) -> Result<(), NotifyError> {
        let body = serde_json::json!({
            "content": n.message, "text": n.message, "event": n.event,
            "channel": n.channel, "project": n.project, "bead": n.bead,
        });
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .build()
            .into();
        agent
            .post(&self.url)
            .send_json(&body)
            .map(|_| ())
            .map_err(|e| NotifyError::Webhook {
                url: self.url.clone(),
                detail: e.to_string(),
            })
    }
}

/// Sends to every configured notifier; succeeds if any delivery did.
pub struct Fanout(pub Vec<Box<dyn Notifier>>);

impl Notifier for Fanout {
    fn configured(&self) -> bool {
        !self.0.is_empty()
    }

    fn send(&self, n: &Notification) -> Result<(), NotifyError> {
        let mut last = None;
        let mut any = false;
        for x in &self.0 {
            match x.send(n) {
                Ok(()) => any = true,
                Err(e) => last = Some(e),
            }
        }
        match (any || self.0.is_empty(), last) {
            (true, _) | (false, None) => Ok(()),
            (false, Some(e)) => Err(e),
        }
    }
}

/// The notifier `config.toml` describes; an empty [`Fanout`] when none is set.
pub fn from_config(c: &NotifyConfig) -> Fanout {
    let timeout = Duration::from_secs(c.timeout_secs.unwrap_or(10));
    let mut v: Vec<Box<dyn Notifier>> = Vec::new();
    if !c.command.is_empty() {
        v.push(Box::new(CommandNotifier {
            argv: c.command.clone(),
            timeout,
        }));
    }
    if let Some(url) = c.webhook.as_ref().filter(|u| !u.trim().is_empty()) {
        v.push(Box::new(WebhookNotifier {
            url: url.clone(),
            timeout,
        }));
    }
    Fanout(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_reported_sent_without_a_notifier() {
        let md = "Status: active\nPriority: normal\nAutonomy: full\nChannel: #dev\n";
        let project =
            crate::format::project::parse_project(md, std::path::Path::new("PROJECT.md")).value;
        let none = from_config(&NotifyConfig::default());
        assert!(!none.configured());
        let event = NotificationEvent::BeadComplete;
        assert_eq!(
            deliver(&none, &project, "app", event, None, "done"),
            Delivery::Skipped
        );
        struct Recorder(std::sync::Mutex<usize>);
        impl Notifier for Recorder {
            fn send(&self, _: &Notification) -> Result<(), NotifyError> {
                *self.0.lock().unwrap() += 1;
                Ok(())
            }
        }
        let rec = Recorder(std::sync::Mutex::new(0));
        assert_eq!(
            deliver(&rec, &project, "app", event, None, "done"),
            Delivery::Sent
        );
        assert_eq!(*rec.0.lock().unwrap(), 1);
    }

    #[test]
    fn expand_is_single_pass_and_literal() {
        let v = [("message", "hi {channel} $(rm -rf /)"), ("channel", "#dev")];
        assert_eq!(
            expand("--msg={message}", &v),
            "--msg=hi {channel} $(rm -rf /)"
        );
        assert_eq!(expand("{channel}{unknown}{", &v), "#dev{unknown}{");
    }
}
