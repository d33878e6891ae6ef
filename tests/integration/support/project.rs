//! [`NewProject`]: a project in a sandbox, with its tracker, beads and an active iteration.

use std::path::PathBuf;

use super::{br_init, Sandbox};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracker {
    /// The native WORKPLAN.md tracker.
    Workplan,
    /// The real `br`.
    Br,
    /// `Tracker: br` and an empty `.beads/`: the `br` is a stub the test puts in the sandbox bin.
    StubBr,
}

#[derive(Debug, Clone)]
enum Beads {
    /// `n` beads: br titles `<slug> bead <i>`, native ids `<slug>-w<i>` titled `<slug> item <i>`.
    Count(usize),
    /// br beads with these titles.
    Titled(Vec<String>),
    /// native items with these ids.
    Ids(Vec<String>),
}

/// A project: `sb.new_project(slug)`, refined, then [`create`](NewProject::create)d. By default
/// through `braids new` on the native tracker, with no beads and iteration 1 active.
#[must_use]
pub struct NewProject<'a> {
    sb: &'a Sandbox,
    slug: String,
    by_hand: bool,
    tracker: Tracker,
    max_workers: Option<u32>,
    channel: Option<String>,
    priority: Option<String>,
    fields: Vec<(String, String)>,
    beads: Beads,
    iteration: Option<String>,
}

/// A project made by [`NewProject::create`].
#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    /// Its beads' ids, in creation order (= the Stories order of iteration 1).
    pub beads: Vec<String>,
}

impl Sandbox {
    /// A new project `slug` (see [`NewProject`]).
    pub fn new_project(&self, slug: &str) -> NewProject<'_> {
        NewProject {
            sb: self,
            slug: slug.to_string(),
            by_hand: false,
            tracker: Tracker::Workplan,
            max_workers: None,
            channel: None,
            priority: None,
            fields: Vec::new(),
            beads: Beads::Count(0),
            iteration: Some("active".into()),
        }
    }
}

impl NewProject<'_> {
    /// Written file by file instead of by `braids new`: a minimal PROJECT.md (Status active,
    /// Priority normal, Autonomy full, MaxWorkers, WorkerTimeout 3600, then the fields), a
    /// WORKPLAN.md, no git, and a registry row `~/Projects/<slug>`.
    pub fn by_hand(mut self) -> Self {
        self.by_hand = true;
        self
    }

    /// On the real `br` (`br init`, beads created with `br create`).
    pub fn br(mut self) -> Self {
        self.tracker = Tracker::Br;
        self
    }

    /// `Tracker: br` with an empty `.beads/`, for a stub `br` in the sandbox bin.
    pub fn stub_br(mut self) -> Self {
        self.tracker = Tracker::StubBr;
        self
    }

    pub fn max_workers(mut self, n: u32) -> Self {
        self.max_workers = Some(n);
        self
    }

    pub fn channel(mut self, channel: &str) -> Self {
        self.channel = Some(channel.into());
        self
    }

    pub fn priority(mut self, priority: &str) -> Self {
        self.priority = Some(priority.into());
        self
    }

    /// A PROJECT.md field (set after `braids new`, or written by hand).
    pub fn field(mut self, key: &str, value: &str) -> Self {
        self.fields.push((key.into(), value.into()));
        self
    }

    /// `n` beads (br: titled `<slug> bead <i>`; native: ids `<slug>-w<i>`).
    pub fn beads(mut self, n: usize) -> Self {
        self.beads = Beads::Count(n);
        self
    }

    /// br beads with these titles.
    pub fn titled(mut self, titles: &[&str]) -> Self {
        self.beads = Beads::Titled(titles.iter().map(|t| t.to_string()).collect());
        self
    }

    /// Native-tracker items with these ids.
    pub fn ids(mut self, ids: &[&str]) -> Self {
        self.beads = Beads::Ids(ids.iter().map(|t| t.to_string()).collect());
        self
    }

    /// Iteration 1 in this status (default `active`), its Stories the beads.
    pub fn iteration(mut self, status: &str) -> Self {
        self.iteration = Some(status.into());
        self
    }

    /// No iteration at all.
    pub fn no_iteration(mut self) -> Self {
        self.iteration = None;
        self
    }

    #[track_caller]
    pub fn create(self) -> Project {
        let sb = self.sb;
        let slug = self.slug.as_str();
        let root = sb.project(slug);
        if self.by_hand {
            self.write_files();
        } else {
            let tracker = match self.tracker {
                Tracker::Br => "br",
                Tracker::Workplan | Tracker::StubBr => "workplan",
            };
            let mut args: Vec<String> =
                ["new", slug, "--tracker", tracker].map(String::from).into();
            if let Some(n) = self.max_workers {
                args.extend(["--max-workers".into(), n.to_string()]);
            }
            if let Some(c) = &self.channel {
                args.extend(["--channel".into(), c.clone()]);
            }
            if let Some(p) = &self.priority {
                args.extend(["--priority".into(), p.clone()]);
            }
            sb.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
            if self.tracker == Tracker::StubBr {
                sb.set_field(slug, "Tracker", "br");
            }
            for (k, v) in &self.fields {
                sb.set_field(slug, k, v);
            }
        }
        if self.tracker == Tracker::StubBr {
            std::fs::create_dir_all(root.join(".beads")).unwrap();
        }
        if self.by_hand && self.tracker == Tracker::Br {
            br_init(&root, slug, Some(sb.home()));
        }
        let beads = self.create_beads();
        if let Some(status) = &self.iteration {
            let stories: Vec<(&str, &str)> = beads.iter().map(|b| (b.as_str(), "story")).collect();
            sb.iteration(slug, 1, status, &stories);
        }
        Project { root, beads }
    }

    fn write_files(&self) {
        let (sb, slug) = (self.sb, self.slug.as_str());
        let root = sb.project(slug);
        std::fs::create_dir_all(root.join(".braids")).unwrap();
        let mut md = format!(
            "# {slug}\n\n- **Status:** active\n- **Priority:** {}\n- **Autonomy:** full\n- **MaxWorkers:** {}\n- **WorkerTimeout:** 3600\n",
            self.priority.as_deref().unwrap_or("normal"),
            self.max_workers.unwrap_or(1)
        );
        if self.tracker != Tracker::Workplan {
            md.push_str("- **Tracker:** br\n");
        }
        if let Some(c) = &self.channel {
            md.push_str(&format!("- **Channel:** {c}\n"));
        }
        for (k, v) in &self.fields {
            md.push_str(&format!("- **{k}:** {v}\n"));
        }
        std::fs::write(root.join(".braids/PROJECT.md"), md).unwrap();
        std::fs::write(
            root.join(".braids/WORKPLAN.md"),
            "# Workplan\n\n## Backlog\n\n",
        )
        .unwrap();
        sb.register(slug, &format!("~/Projects/{slug}"));
    }

    #[track_caller]
    fn create_beads(&self) -> Vec<String> {
        let (sb, slug) = (self.sb, self.slug.as_str());
        match (&self.beads, self.tracker) {
            (Beads::Count(0), _) => Vec::new(),
            (Beads::Count(n), Tracker::Br) => (1..=*n)
                .map(|i| sb.br_create(slug, &format!("{slug} bead {i}")))
                .collect(),
            (Beads::Titled(titles), Tracker::Br) => {
                titles.iter().map(|t| sb.br_create(slug, t)).collect()
            }
            (Beads::Count(n), Tracker::Workplan) => {
                let ids: Vec<String> = (1..=*n).map(|i| format!("{slug}-w{i}")).collect();
                for (i, id) in ids.iter().enumerate() {
                    sb.add_item(slug, &format!("{slug} item {}", i + 1), id);
                }
                ids
            }
            (Beads::Ids(ids), Tracker::Workplan) => {
                for id in ids {
                    sb.add_item(slug, &format!("Work on {id}"), id);
                }
                ids.clone()
            }
            (beads, tracker) => panic!("{beads:?} cannot be made on {tracker:?}"),
        }
    }
}
