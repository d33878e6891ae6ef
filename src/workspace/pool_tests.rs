//! The pool against the real `git`: reuse across many beads with every kind of leftover, what
//! is never pooled, pruning, and what a workspace gets (copied files, the setup command).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::model::BeadId;
use crate::workspace::{Landing, Workspaces};

fn g(dir: &Path, args: &[&str]) -> String {
    git_ok(dir, args).unwrap()
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn bead(s: &str) -> BeadId {
    BeadId::new(s).unwrap()
}

struct World {
    tmp: tempfile::TempDir,
    project: PathBuf,
    wss: GitWorktrees,
}

fn world(pooling: Pooling) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("app");
    std::fs::create_dir_all(&project).unwrap();
    g(&project, &["init", "--quiet", "-b", "main"]);
    g(&project, &["config", "user.name", "t"]);
    g(&project, &["config", "user.email", "t@t"]);
    write(&project.join("shared.txt"), "one\n");
    write(&project.join(".gitignore"), "target/\n*.log\n.env\n");
    g(&project, &["add", "--all"]);
    g(&project, &["commit", "--quiet", "-m", "start"]);
    let wss = GitWorktrees {
        root: tmp.path().join("braids/workspaces"),
        sandbox: Default::default(),
        pooling,
    };
    World { tmp, project, wss }
}

fn pooled(size: usize) -> Pooling {
    Pooling {
        size,
        ..Default::default()
    }
}

/// Every path in the worktree but `.git`, as `find` would list them.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let rel = e
                .path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".git" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
            out.push(rel);
        }
    }
    out.sort();
    out
}

#[test]
fn c6_6_twenty_beads_through_a_pool_of_two_leak_nothing_into_a_later_workspace_or_commit() {
    let w = world(pooled(2));
    write(&w.project.join("shared.txt"), "the person's change\n");
    g(
        &w.project,
        &["stash", "push", "--quiet", "-m", "the person's"],
    );
    let mut ids = std::collections::BTreeSet::new();
    let mut reused = 0;
    for i in 0..20 {
        let b = bead(&format!("b{i}"));
        let ws = w.wss.create(&w.project, &b).unwrap();
        let ready = w.wss.make_ready(&ws).unwrap();
        reused += usize::from(ready.reused);
        ids.insert(crate::workspace::workspace_id(&ws.dir));
        // Exactly the base, plus the kept build cache of earlier beads.
        let files: Vec<String> = tree(&ws.dir)
            .into_iter()
            .filter(|f| !f.starts_with("target"))
            .collect();
        let mut expected = vec![".gitignore".to_string(), "shared.txt".to_string()];
        expected.extend(
            (0..i)
                .filter(|j| j % 2 == 0)
                .map(|j| format!("landed-{j}.txt")),
        );
        expected.sort();
        assert_eq!(
            files, expected,
            "bead {i}: the workspace is the base, nothing more"
        );
        assert_eq!(
            g(&ws.dir, &["status", "--porcelain", "--untracked-files=all"]),
            ""
        );
        assert_eq!(g(&ws.dir, &["diff", "--cached", "--name-only"]), "");
        assert_eq!(
            g(&ws.dir, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
            format!("braids/b{i}")
        );
        assert_eq!(
            g(&ws.dir, &["rev-parse", "HEAD"]),
            g(&w.project, &["rev-parse", "main"]),
            "bead {i} starts at the base's tip"
        );
        let stashes = g(&ws.dir, &["stash", "list", "--format=%gs"]);
        assert!(
            !stashes.contains("braids/"),
            "bead {i}: no stash of an earlier bead: {stashes}"
        );
        if ready.reused {
            assert!(
                ws.dir.join("target/cache").is_file(),
                "bead {i}: the build cache stays"
            );
        }
        // Every kind of leftover.
        write(&ws.dir.join("shared.txt"), &format!("stashed by {i}\n"));
        g(&ws.dir, &["stash", "push", "--quiet"]);
        write(&ws.dir.join(format!("staged-{i}.txt")), "s\n");
        g(&ws.dir, &["add", &format!("staged-{i}.txt")]);
        write(&ws.dir.join(format!("untracked-{i}.txt")), "u\n");
        write(&ws.dir.join(format!("debug-{i}.log")), "ignored\n");
        write(&ws.dir.join(format!("deep/new-{i}/file.txt")), "u\n");
        write(&ws.dir.join("target/cache"), &format!("built by {i}\n"));
        g(&ws.dir, &["branch", &format!("feature-{i}")]);
        if i % 2 == 0 {
            // This bead's work lands: only its own file.
            std::fs::remove_file(ws.dir.join(format!("untracked-{i}.txt"))).unwrap();
            std::fs::remove_dir_all(ws.dir.join(format!("deep/new-{i}"))).unwrap();
            g(
                &ws.dir,
                &["rm", "--cached", "--quiet", &format!("staged-{i}.txt")],
            );
            std::fs::remove_file(ws.dir.join(format!("staged-{i}.txt"))).unwrap();
            write(&ws.dir.join(format!("landed-{i}.txt")), "work\n");
            let _lock = crate::git::RepoLock::acquire(&w.project).unwrap();
            let p = w.wss.prepare_landing(&ws, &b, &[], None).unwrap();
            assert!(
                matches!(p, crate::workspace::Prepared::Ready { .. }),
                "{p:?}"
            );
            let landing = Landing {
                message: format!("bead {i} (b{i})"),
                ..Landing::default()
            };
            let commit = w.wss.land(&ws, &landing).unwrap().unwrap();
            let files = g(&w.project, &["show", "--name-only", "--format=", &commit]);
            assert_eq!(
                files.trim(),
                format!("landed-{i}.txt"),
                "bead {i}'s commit holds its own file only"
            );
        } else {
            let kept = w.wss.keep(&ws, &b).unwrap();
            assert!(kept.is_some(), "unlanded work is kept for a person");
        }
        let retired = w.wss.retire(&ws).unwrap();
        assert_eq!(retired, Retired::Pooled, "bead {i}");
        assert!(!ws.dir.exists());
        assert!(members(&w.wss.pool_dir(&w.project)).len() <= 2);
    }
    assert!(reused >= 18, "{reused} of 20 beads reused a workspace");
    // The person's own stash is theirs.
    assert_eq!(
        g(&w.project, &["stash", "list", "--format=%gs"]).trim(),
        "On main: the person's"
    );
    assert!(ids.len() <= 2, "two workspaces served every bead: {ids:?}");
    // The beads' branches are gone; the kept ones and the agents' own branches stay theirs.
    let branches = g(&w.project, &["branch", "--list", "braids/b*"]);
    assert_eq!(branches.trim(), "");
    let stashes = g(&w.project, &["stash", "list", "--format=%gs"]);
    assert_eq!(
        stashes.trim(),
        "On main: the person's",
        "no bead's stash is left"
    );
}

#[test]
fn c6_6_a_workspace_that_cannot_be_shown_clean_is_removed_never_pooled() {
    let w = world(pooled(3));
    // A rebase cut short.
    let ws = w.wss.create(&w.project, &bead("r1")).unwrap();
    write(&ws.dir.join("shared.txt"), "mine\n");
    g(&ws.dir, &["commit", "--quiet", "-am", "mine"]);
    write(&w.project.join("shared.txt"), "theirs\n");
    g(&w.project, &["commit", "--quiet", "-am", "theirs"]);
    let _ = git(&ws.dir, &["rebase", "main"]).unwrap();
    let r = w.wss.retire(&ws).unwrap();
    assert!(
        matches!(&r, Retired::Removed { why: Some(w) } if w.contains("rebase")),
        "{r:?}"
    );
    assert!(!ws.dir.exists());
    // The repository's hooks changed while its agent worked.
    let ws = w.wss.create(&w.project, &bead("r2")).unwrap();
    let hook = w.project.join(".git/hooks/pre-commit");
    write(&hook, "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let r = w.wss.retire(&ws).unwrap();
    assert!(matches!(&r, Retired::Removed { why: Some(_) }), "{r:?}");
    std::fs::remove_file(&hook).unwrap();
    // Its gitfile points elsewhere.
    let ws = w.wss.create(&w.project, &bead("r3")).unwrap();
    write(&ws.dir.join(".git"), "gitdir: /tmp/elsewhere\n");
    let r = w.wss.retire(&ws).unwrap();
    assert!(matches!(&r, Retired::Removed { why: Some(_) }), "{r:?}");
    assert!(members(&w.wss.pool_dir(&w.project)).is_empty());
    // A file planted under an index flag git's own checkout and status trust.
    let ws = w.wss.create(&w.project, &bead("r5")).unwrap();
    write(&ws.dir.join("shared.txt"), "planted\n");
    g(&ws.dir, &["update-index", "--skip-worktree", "shared.txt"]);
    let r = w.wss.retire(&ws).unwrap();
    assert!(
        matches!(&r, Retired::Removed { why: Some(w) } if w.contains("shared.txt")),
        "{r:?}"
    );
    // A process its agent left running there.
    let ws = w.wss.create(&w.project, &bead("r6")).unwrap();
    let mut daemon = std::process::Command::new("sleep")
        .arg("60")
        .current_dir(&ws.dir)
        .spawn()
        .unwrap();
    let r = w.wss.retire(&ws).unwrap();
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(
        matches!(&r, Retired::Removed { why: Some(w) } if w.contains("process")),
        "{r:?}"
    );
    // Settings changed while it waited in the pool: not taken.
    let ws = w.wss.create(&w.project, &bead("r7")).unwrap();
    assert_eq!(w.wss.retire(&ws).unwrap(), Retired::Pooled);
    let pooled = &members(&w.wss.pool_dir(&w.project))[0].path;
    let admin = crate::workspace::guard::admin_of(pooled).unwrap();
    write(
        &admin.join("config.worktree"),
        "[core]\n\tfsmonitor = /tmp/evil\n",
    );
    let ws = w.wss.create(&w.project, &bead("r8")).unwrap();
    let r = w.wss.make_ready(&ws).unwrap();
    assert!(!r.reused, "a member changed while it waited is not reused");
    assert!(!admin.exists());
    assert_eq!(w.wss.retire(&ws).unwrap(), Retired::Pooled);
    // A worktree its worker left (crashed) is the sweep's: removed, never pooled.
    let ws = w.wss.create(&w.project, &bead("r4")).unwrap();
    write(&ws.dir.join("half.txt"), "x\n");
    let swept = w.wss.sweep(&w.project, &[]).unwrap();
    assert_eq!(swept.len(), 1);
    assert!(!ws.dir.exists());
    assert!(members(&w.wss.pool_dir(&w.project)).is_empty());
    let listed = g(&w.project, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
}

#[test]
fn c6_6_a_full_pool_removes_what_it_cannot_keep_and_idle_or_unregistered_pools_are_pruned() {
    let mut w = world(pooled(1));
    let a = w.wss.create(&w.project, &bead("p1")).unwrap();
    let b = w.wss.create(&w.project, &bead("p2")).unwrap();
    assert_eq!(w.wss.retire(&a).unwrap(), Retired::Pooled);
    let full = w.wss.retire(&b).unwrap();
    assert!(
        matches!(&full, Retired::Removed { why: Some(w) } if w.contains("full")),
        "{full:?}"
    );
    assert_eq!(members(&w.wss.pool_dir(&w.project)).len(), 1);
    // Not idle for a day yet: kept; idle longer than `idle_max`: removed.
    assert_eq!(w.wss.prune_pool(&w.project, false).unwrap(), 0);
    w.wss.pooling.idle_max = Duration::ZERO;
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(w.wss.prune_pool(&w.project, false).unwrap(), 1);
    // A project moved to `Workspace: shared` loses its whole pool.
    let c = w.wss.create(&w.project, &bead("p3")).unwrap();
    w.wss.pooling.idle_max = Duration::from_secs(3600);
    assert_eq!(w.wss.retire(&c).unwrap(), Retired::Pooled);
    assert_eq!(w.wss.prune_pool(&w.project, true).unwrap(), 1);
    // One removed from the registry too.
    let d = w.wss.create(&w.project, &bead("p4")).unwrap();
    assert_eq!(w.wss.retire(&d).unwrap(), Retired::Pooled);
    assert_eq!(w.wss.sweep_orphans(std::slice::from_ref(&w.project)), 0);
    assert_eq!(w.wss.sweep_orphans(&[]), 1);
    assert!(!w.wss.pool_dir(&w.project).exists());
    let listed = g(&w.project, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    drop(w.tmp);
}

#[test]
fn c6_7_named_untracked_files_are_copied_into_every_workspace_and_never_land() {
    let mut w = world(pooled(2));
    write(&w.project.join(".env"), "SECRET=1\n");
    write(&w.project.join("config/app.local.yml"), "db: x\n");
    write(&w.project.join("config/app.yml.example"), "not named\n");
    write(
        &w.project.join(".worktreeinclude"),
        "# what a worktree needs\n.env\n",
    );
    std::os::unix::fs::symlink("/etc/hostname", w.project.join("config/link.local.yml")).unwrap();
    w.wss.pooling.copy = vec!["config/*.local.yml".into()];
    for i in 0..3 {
        let b = bead(&format!("c{i}"));
        let ws = w.wss.create(&w.project, &b).unwrap();
        let ready = w.wss.make_ready(&ws).unwrap();
        let mut copied = ready.copied.clone();
        copied.sort();
        assert_eq!(copied, [".env", "config/app.local.yml"], "bead {i}");
        assert_eq!(
            std::fs::read_to_string(ws.dir.join(".env")).unwrap(),
            "SECRET=1\n"
        );
        assert!(ws.dir.join("config/app.local.yml").is_file());
        assert!(!ws.dir.join("config/app.yml.example").exists());
        assert!(
            std::fs::symlink_metadata(ws.dir.join("config/link.local.yml")).is_err(),
            "links are not copied"
        );
        // The agent changes them, even commits them by force, and adds work; only the work
        // lands.
        write(&ws.dir.join(".env"), "SECRET=changed\n");
        write(&ws.dir.join("config/app.local.yml"), "db: changed\n");
        write(&ws.dir.join(format!("work-{i}.txt")), "w\n");
        if i == 1 {
            g(&ws.dir, &["add", "--force", ".env", "config/app.local.yml"]);
            g(
                &ws.dir,
                &["commit", "--quiet", "-m", "the agent's own commit"],
            );
        }
        let _lock = crate::git::RepoLock::acquire(&w.project).unwrap();
        let p = w.wss.prepare_landing(&ws, &b, &[], None).unwrap();
        assert!(
            matches!(p, crate::workspace::Prepared::Ready { .. }),
            "{p:?}"
        );
        // A report listing them as changed changes nothing.
        let landing = Landing {
            message: format!("c{i}"),
            include: vec![
                PathBuf::from(".env"),
                PathBuf::from(format!("work-{i}.txt")),
            ],
            exclude: vec![PathBuf::from(".")],
            ..Landing::default()
        };
        let commit = w.wss.land(&ws, &landing).unwrap().unwrap();
        let files = g(&w.project, &["show", "--name-only", "--format=", &commit]);
        assert_eq!(files.trim(), format!("work-{i}.txt"));
        drop(_lock);
        assert_eq!(w.wss.retire(&ws).unwrap(), Retired::Pooled);
    }
    assert_eq!(
        std::fs::read_to_string(w.project.join(".env")).unwrap(),
        "SECRET=1\n"
    );
}

#[test]
fn c6_7_the_setup_command_runs_once_per_new_workspace_and_says_why_it_failed() {
    let mut w = world(pooled(2));
    let count = w.tmp.path().join("setups");
    w.wss.pooling.setup = vec![
        "sh".into(),
        "-c".into(),
        "echo \"$BRAIDS_WORKSPACE_ID\" >> \"$0\"; test -f .env || { echo 'no .env here' >&2; exit 3; }"
            .into(),
        count.to_string_lossy().into_owned(),
    ];
    let runs = || {
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .count()
    };
    // Fails: what it printed comes back.
    let ws = w.wss.create(&w.project, &bead("s1")).unwrap();
    let r = w.wss.make_ready(&ws).unwrap();
    let setup = r.setup.unwrap();
    assert!(!setup.ok);
    assert!(setup.output.contains("no .env here"), "{}", setup.output);
    assert_eq!(runs(), 1);
    // A failed setup runs again in the reused workspace.
    assert_eq!(w.wss.retire(&ws).unwrap(), Retired::Pooled);
    write(&w.project.join(".env"), "x\n");
    w.wss.pooling.copy = vec![".env".into()];
    let ws = w.wss.create(&w.project, &bead("s2")).unwrap();
    let r = w.wss.make_ready(&ws).unwrap();
    assert!(r.reused && r.setup.as_ref().is_some_and(|s| s.ok), "{r:?}");
    assert_eq!(runs(), 2);
    assert_eq!(w.wss.retire(&ws).unwrap(), Retired::Pooled);
    // Passed once: a reused workspace does not run it again...
    let ws = w.wss.create(&w.project, &bead("s3")).unwrap();
    let r = w.wss.make_ready(&ws).unwrap();
    assert!(r.reused && r.setup.is_none(), "{r:?}");
    assert_eq!(runs(), 2);
    // ...unless asked, or a new workspace.
    w.wss.pooling.setup_on_reuse = true;
    assert!(w.wss.make_ready(&ws).unwrap().setup.is_some());
    assert_eq!(runs(), 3);
    w.wss.pooling.setup_on_reuse = false;
    let fresh = w.wss.create(&w.project, &bead("s4")).unwrap();
    assert!(!w.wss.make_ready(&fresh).unwrap().reused);
    assert_eq!(runs(), 4);
    // Each line is the workspace's own stable id.
    let ids: Vec<String> = std::fs::read_to_string(&count)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[1], ids[2]);
    assert_ne!(ids[2], ids[3]);
}

#[test]
fn c6_7_a_sparse_workspace_holds_only_its_folders_lands_only_its_change_and_holds_no_other_bead() {
    let mut w = world(pooled(2));
    for f in [
        "src/app/main.rs",
        "src/other/lib.rs",
        "docs/guide.md",
        "Cargo.toml",
    ] {
        write(&w.project.join(f), "x\n");
    }
    g(&w.project, &["add", "--all"]);
    g(&w.project, &["commit", "--quiet", "-m", "a monorepo"]);
    // A bead already at work in a full checkout when the first sparse one starts.
    let full = w.wss.create(&w.project, &bead("f1")).unwrap();
    w.wss.pooling.sparse = vec!["src/app/".into(), "docs".into()];
    let ws = w.wss.create(&w.project, &bead("s1")).unwrap();
    assert!(ws.dir.join("src/app/main.rs").is_file());
    assert!(ws.dir.join("docs/guide.md").is_file());
    assert!(
        ws.dir.join("Cargo.toml").is_file(),
        "files at the top stay (cone mode)"
    );
    assert!(!ws.dir.join("src/other").exists());
    assert_eq!(g(&ws.dir, &["status", "--porcelain"]), "");
    write(&ws.dir.join("src/app/main.rs"), "changed\n");
    let _lock = crate::git::RepoLock::acquire(&w.project).unwrap();
    let p = w.wss.prepare_landing(&ws, &bead("s1"), &[], None).unwrap();
    assert_eq!(
        p,
        crate::workspace::Prepared::Ready {
            paths: vec!["src/app/main.rs".into()]
        }
    );
    let commit = w
        .wss
        .land(
            &ws,
            &Landing {
                message: "s1".into(),
                ..Landing::default()
            },
        )
        .unwrap()
        .unwrap();
    let files = g(&w.project, &["show", "--name-status", "--format=", &commit]);
    assert_eq!(
        files.trim(),
        "M\tsrc/app/main.rs",
        "nothing outside the sparse folders is deleted"
    );
    // The full checkout's bead is not held for the sparse one's settings.
    write(&full.dir.join("src/other/lib.rs"), "full\n");
    let p = w
        .wss
        .prepare_landing(&full, &bead("f1"), &[], None)
        .unwrap();
    assert!(
        matches!(p, crate::workspace::Prepared::Ready { .. }),
        "{p:?}"
    );
    drop(_lock);
    assert_eq!(w.wss.retire(&ws).unwrap(), Retired::Pooled);
    // Reused as it is; and whole again once the project is no longer sparse.
    let again = w.wss.create(&w.project, &bead("s2")).unwrap();
    assert!(!again.dir.join("src/other").exists());
    assert_eq!(w.wss.retire(&again).unwrap(), Retired::Pooled);
    w.wss.pooling.sparse.clear();
    let whole = w.wss.create(&w.project, &bead("s3")).unwrap();
    assert!(whole.dir.join("src/other/lib.rs").is_file());
    assert_eq!(g(&whole.dir, &["status", "--porcelain"]), "");
    // An agent that changes its worktree's own settings is caught like a repository change.
    g(
        &whole.dir,
        &["config", "--worktree", "core.hooksPath", "/tmp/evil"],
    );
    let p = w
        .wss
        .prepare_landing(&whole, &bead("s3"), &[], None)
        .unwrap();
    assert!(
        matches!(p, crate::workspace::Prepared::Held { keep: false, .. }),
        "{p:?}"
    );
}
