//! PROJECT.md (CONTRACTS 1.2). (Implemented by the formats work.)
use std::collections::BTreeMap;

use crate::model::{Autonomy, Checkin, NotificationEvent, Priority, ProjectStatus};

use super::fields::Field;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectConfig {
    /// The H1.
    pub name: Option<String>,
    pub status: Option<ProjectStatus>,
    pub priority: Priority,
    pub autonomy: Autonomy,
    pub max_workers: u32,
    /// Seconds.
    pub worker_timeout: u64,
    pub checkin: Checkin,
    /// `None` when missing or `none`: notifications are skipped (3.8).
    pub channel: Option<String>,
    pub notifications: Notifications,
    pub guardrails: Option<String>,
    pub goal: Option<String>,
    /// Every field as written, including unknown ones, for per-project overrides.
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationSetting {
    pub on: bool,
    /// Such as `<@123>`, appended to the message.
    pub mention: Option<String>,
}

/// The Notifications table; events not listed are on (1.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Notifications {
    pub events: BTreeMap<NotificationEvent, NotificationSetting>,
}
