//! The observation cache seen from `observe` (5.2): an unchanged project observed from the
//! cache looks exactly as observed from its files; any change to its files is seen next run;
//! files written just now are not cached; a damaged or unvouched cache is no cache.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{observe, Context, Observed};
use crate::config::Config;
use crate::system::paths::Paths;
use crate::tick::observe::cache;

struct World {
    _dir: tempfile::TempDir,
    paths: Paths,
    config: Config,
}

const PROJECT: &str = "# {slug}\n\n- **Status:** active\n- **Priority:** {priority}\n- **Autonomy:** full\n- **MaxWorkers:** 2\n- **Tracker:** workplan\n- **Channel:** #c\n- **Executor:** claude -p\n\n## Goal\n\nShip it.\n\n## Guardrails\n\n- Small steps.\n\n## Notifications\n\n| Event | Enabled |\n|---|---|\n| bead-start | off (mention <@1>) |\n";

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path().to_path_buf(), None);
        std::fs::create_dir_all(&paths.braids_dir).unwrap();
        World {
            _dir: dir,
            paths,
            config: Config::default(),
        }
    }

    fn root(&self, slug: &str) -> PathBuf {
        self.paths.home.join("Projects").join(slug)
    }

    /// A project with `items` WORKPLAN.md items, an iteration listing them (and one unknown
    /// story and a plain-word one), and a complete iteration before it.
    fn project(&self, slug: &str, items: usize) {
        let dot = self.root(slug).join(".braids");
        let text = PROJECT
            .replace("{slug}", slug)
            .replace("{priority}", "high");
        write(&dot.join("PROJECT.md"), &text);
        let mut wp = String::from("# Workplan\n\n");
        let mut it = String::from("# Iteration\n\n- **Status:** active\n\n## Stories\n\n");
        for i in 0..items {
            wp.push_str(&format!("- [ ] Item {i} <!-- id:{slug}-{i} -->\n"));
            it.push_str(&format!("- {slug}-{i}: story {i}\n"));
        }
        wp.push_str("- [ ] Readme <!-- id:readme -->\n");
        it.push_str("- readme: the readme\n- zz-404: gone\n\n## Notes\n\nSome.\n");
        write(&dot.join("WORKPLAN.md"), &wp);
        write(&dot.join("iterations/002/ITERATION.md"), &it);
        write(
            &dot.join("iterations/001/ITERATION.md"),
            "# One\n\n- **Status:** complete\n\n## Stories\n\n- old-1: done\n",
        );
        write(&dot.join("iterations/README.md"), "not an iteration\n");
        let mut registry = String::from("| Slug | Status | Priority | Path |\n|---|---|---|---|\n");
        let existing = std::fs::read_to_string(self.paths.registry()).unwrap_or_default();
        for line in existing.lines().skip(2) {
            registry.push_str(line);
            registry.push('\n');
        }
        registry.push_str(&format!(
            "| {slug} | active | normal | {} |\n",
            self.root(slug).display()
        ));
        write(&self.paths.registry(), &registry);
    }

    /// Every file and directory of the world, an hour old: past the racy window.
    fn backdate(&self) {
        backdate(
            &self.paths.home,
            SystemTime::now() - Duration::from_secs(3600),
        );
    }

    fn observe(&self, read_only: bool, generation: Option<&str>) -> Observed {
        self.observe_as(read_only, true, generation)
    }

    fn observe_as(&self, read_only: bool, dashboard: bool, generation: Option<&str>) -> Observed {
        let ctx = Context {
            paths: &self.paths,
            config: &self.config,
            config_warnings: &[],
            read_only,
            dashboard,
            now: chrono::Utc::now(),
            unreadable: 0,
        };
        let prior = cache::open(&self.paths.braids_dir, generation);
        observe(&ctx, Vec::new(), Vec::new(), prior)
    }

    /// A full run's cache, as its state would record it.
    fn record(&self) -> String {
        let o = self.observe(false, None);
        o.cache.expect("a full run writes the cache")
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn backdate(p: &Path, when: SystemTime) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            backdate(&e.path(), when);
        }
    }
    let f = std::fs::File::open(p).unwrap();
    f.set_modified(when).unwrap();
}

/// What the rest of the tick sees of a run: views, reports (with the PROJECT.md notifications
/// use), the trackers' kinds.
fn seen(o: &Observed) -> String {
    let reports: Vec<String> = o
        .reports
        .iter()
        .map(|r| format!("{r:?} config={:?}", r.config))
        .collect();
    format!(
        "{:#?}\n{reports:#?}\n{:?}",
        o.snapshot.projects,
        o.trackers.keys().collect::<Vec<_>>()
    )
}

#[test]
fn c5_2_an_unchanged_project_is_observed_from_the_cache_exactly_as_from_its_files() {
    let w = World::new();
    w.project("web", 3);
    w.project("api", 0);
    w.backdate();
    for read_only in [true, false] {
        let fresh = w.observe(read_only, None);
        assert_eq!(fresh.from_cache, 0);
        // A full run writes a cache of its own: the one the next run is given.
        let generation = fresh.cache.clone().unwrap_or_else(|| w.record());
        let cached = w.observe(read_only, Some(&generation));
        assert_eq!(cached.from_cache, 2, "5.2 violated: the cache was not used");
        assert_eq!(seen(&cached), seen(&fresh), "read_only {read_only}");
    }
    let generation = w.record();
    // A dry run keeps no Story titles, from the cache or not.
    let dry = w.observe_as(true, false, Some(&generation));
    assert_eq!(dry.from_cache, 2);
    assert_eq!(seen(&dry), seen(&w.observe_as(true, false, None)));
    assert!(dry.reports.iter().all(|r| r.stories.is_empty()));
    let o = w.observe(true, Some(&generation));
    let web = &o.reports[0];
    assert_eq!(web.stories.len(), 5, "{web:?}");
    assert_eq!(o.snapshot.projects[0].ready.len(), 4);
    assert!(web.unknown_stories.as_ref().unwrap().len() == 1, "{web:?}");
}

#[test]
fn c5_2_a_changed_project_md_iteration_or_workplan_is_seen_on_the_next_run() {
    let w = World::new();
    w.project("web", 3);
    let dot = w.root("web").join(".braids");
    // (what, whether the project's own files changed: else only the tracker's)
    type Change<'a> = (&'a str, bool, Box<dyn Fn() + 'a>);
    let changes: Vec<Change> = vec![
        (
            "PROJECT.md",
            true,
            Box::new(|| {
                let p = dot.join("PROJECT.md");
                let t = std::fs::read_to_string(&p).unwrap();
                write(&p, &t.replace("MaxWorkers:** 2", "MaxWorkers:** 1"));
            }),
        ),
        (
            "ITERATION.md",
            true,
            Box::new(|| {
                let p = dot.join("iterations/002/ITERATION.md");
                let t = std::fs::read_to_string(&p).unwrap();
                write(&p, &t.replace("- web-0: story 0\n", ""));
            }),
        ),
        (
            "WORKPLAN.md",
            false,
            Box::new(|| {
                let p = dot.join("WORKPLAN.md");
                let t = std::fs::read_to_string(&p).unwrap();
                write(&p, &t.replace("- [ ] Item 1", "- [x] Item 1"));
            }),
        ),
        (
            "a new iteration",
            true,
            Box::new(|| {
                write(
                    &dot.join("iterations/003/ITERATION.md"),
                    "# Three\n\n- **Status:** active\n",
                );
            }),
        ),
        (
            "an ITERATION.md removed",
            true,
            Box::new(|| std::fs::remove_file(dot.join("iterations/003/ITERATION.md")).unwrap()),
        ),
    ];
    for (what, own, change) in changes {
        w.backdate();
        let generation = w.record();
        let before = w.observe(true, Some(&generation));
        assert_eq!(before.from_cache, 1, "{what}: recorded");
        change();
        let after = w.observe(true, Some(&generation));
        let from_cache = usize::from(!own);
        assert_eq!(
            after.from_cache, from_cache,
            "5.2 violated: {what} changed, yet the cache was used"
        );
        assert_eq!(seen(&after), seen(&w.observe(true, None)), "{what}");
        assert_ne!(
            seen(&after),
            seen(&before),
            "{what} changed nothing the tick sees"
        );
    }
}

#[test]
fn c5_2_files_written_just_now_are_not_cached() {
    let w = World::new();
    w.project("old", 2);
    w.backdate();
    w.project("new", 2);
    // `new`'s files, and the registry, were written just now: within the racy window.
    let generation = w.record();
    let o = w.observe(true, Some(&generation));
    assert_eq!(o.from_cache, 1, "only the settled project");
    // A directory counts too: a new iteration directory is not vouched for.
    w.backdate();
    std::fs::create_dir(w.root("old").join(".braids/iterations/009")).unwrap();
    let generation = w.record();
    assert_eq!(
        w.observe(true, Some(&generation)).from_cache,
        1,
        "only `new`"
    );
}

#[test]
fn c5_2_a_garbage_old_or_unvouched_cache_is_no_cache() {
    let w = World::new();
    w.project("web", 2);
    w.backdate();
    let generation = w.record();
    let good = seen(&w.observe(true, None));
    let file = cache::path(&w.paths.braids_dir);
    let bytes = std::fs::read(&file).unwrap();
    // Killed between the cache and the state: the state names the previous generation.
    let other = cache::generation_text(u64::from_str_radix(&generation, 16).unwrap() ^ 1);
    for (what, contents, generation) in [
        ("garbage", b"{garbage".to_vec(), generation.as_str()),
        (
            "truncated",
            bytes[..bytes.len() / 2].to_vec(),
            generation.as_str(),
        ),
        ("empty", Vec::new(), generation.as_str()),
        ("another generation", bytes.clone(), other.as_str()),
        ("a garbled generation", bytes.clone(), "not hex"),
    ] {
        std::fs::write(&file, &contents).unwrap();
        let o = w.observe(true, Some(generation));
        assert_eq!(o.from_cache, 0, "{what}");
        assert_eq!(seen(&o), good, "{what}");
    }
    // A damaged entry inside a sound file is no entry.
    let mut damaged = bytes.clone();
    let at = damaged.len() / 3;
    damaged[at..at + 8].copy_from_slice(&[0xff; 8]);
    std::fs::write(&file, &damaged).unwrap();
    let o = w.observe(true, Some(&generation));
    assert_eq!(seen(&o), good, "a damaged entry");
    std::fs::write(&file, &bytes).unwrap();
    assert_eq!(
        w.observe(true, Some(&generation)).from_cache,
        1,
        "and sound again"
    );
}
