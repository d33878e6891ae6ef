//! The agents' sandbox as config.toml's `[worker]` sets it.

use serde::Deserialize;

/// One `sandbox_connect` entry: a port, or `"host:port"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum SandboxPort {
    Port(u16),
    Named(String),
}

impl SandboxPort {
    /// The port; 0 (which nothing listens on) for an entry `braids check` names as wrong.
    pub fn port(&self) -> u16 {
        match self {
            SandboxPort::Port(p) => *p,
            SandboxPort::Named(s) => s
                .rsplit_once(':')
                .map_or(s.as_str(), |(_, p)| p)
                .parse()
                .unwrap_or(0),
        }
    }
}

impl super::Config {
    /// The agents' sandbox as `[worker]` sets it, with `state` (folders under the home an
    /// agent CLI keeps its state in) writable too.
    pub fn sandbox_settings(&self, state: &[&str]) -> crate::system::sandbox::Settings {
        let paths = crate::system::paths::Paths::from_env().ok();
        crate::system::sandbox::Settings {
            kind: self.worker.sandbox,
            read: self.worker.sandbox_read.clone(),
            ports: self
                .worker
                .sandbox_connect
                .iter()
                .map(SandboxPort::port)
                .collect(),
            home: paths.as_ref().map(|p| p.home.clone()).unwrap_or_default(),
            braids_dir: paths.map(|p| p.braids_dir).unwrap_or_default(),
            state: state.iter().map(|s| s.to_string()).collect(),
            extra: self.worker.sandbox_write.clone(),
            bwrap: self.worker.bwrap.clone(),
        }
    }

    /// The sandbox of an agent run by `preset`, with `state` its CLI's state folders: its
    /// provider's ports reachable too.
    pub fn preset_sandbox(
        &self,
        preset: crate::agent::Preset,
        state: &[&str],
    ) -> crate::system::sandbox::Settings {
        let mut out = self.sandbox_settings(state);
        out.ports.extend(crate::agent::provider_ports(
            preset,
            &self.preset_settings(preset),
        ));
        out
    }
}
