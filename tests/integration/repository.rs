//! Repositories as people have them, not as braids would make them: no commit yet, and a
//! person's unsaved edit while braids commits; with real ticks, real workers, real `br`, real
//! git.

use std::time::Duration;

use crate::day_two::{install, workers_end};
use crate::support::{wait_for, ReportExt, Sandbox};

/// An installation whose agent does the work, and a project `app` with one bead.
fn one_bead() -> (Sandbox, crate::support::project::Project) {
    let sb = install(0);
    sb.write("fixed", "");
    let app = sb.new_project("app").br().beads(1).create();
    (sb, app)
}

/// Waits for `bead` of `app` to close, its workers gone.
fn closed(sb: &Sandbox, bead: &str) {
    workers_end(sb);
    wait_for("the bead closed", Duration::from_secs(120), || {
        (sb.br_status("app", bead) == "closed").then_some(())
    });
}

#[test]
fn a_repository_with_no_commit_claims_nothing_until_it_has_one() {
    let (sb, app) = one_bead();
    let bead = &app.beads[0];
    // The person's `git init`, and no commit yet.
    std::fs::remove_dir_all(app.root.join(".git")).unwrap();
    sb.git(&app.root, &["init", "-q", "-b", "trunk"]);

    let r = sb.tick().force().run();
    assert!(r.spawned_beads().is_empty(), "{r:#?}");
    assert_eq!(
        sb.br_status("app", bead),
        "open",
        "nothing claimed or blocked"
    );
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(status.contains("no commit yet"), "{status}");
    let check = sb.run(&["check"]);
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("add -A"), "{said}");

    // A first commit, and the bead runs on `trunk`.
    sb.git(&app.root, &["add", "-A"]);
    sb.git(&app.root, &["commit", "-q", "-m", "Start"]);
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()], "{r:#?}");
    closed(&sb, bead);
    let log = sb.git(&app.root, &["log", "--format=%s", "trunk"]);
    assert!(log.contains(bead.as_str()), "{log}");
}

#[test]
fn a_machine_where_git_knows_nobody_still_lands_the_work() {
    let (sb, app) = one_bead();
    let bead = &app.beads[0];
    // Nobody told git who they are, and this host's name gives it no email to guess.
    std::fs::write(
        sb.home().join(".gitconfig"),
        "[init]\n\tdefaultBranch = main\n",
    )
    .unwrap();
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()], "{r:#?}");
    closed(&sb, bead);
    let log = sb.git(&app.root, &["log", "--format=%s <%ae>", "-3"]);
    assert!(log.contains(bead.as_str()), "{log}");
}

/// `slug` with `beads` beads on a branch called `branch`, pushed to a bare upstream.
fn on_branch(
    sb: &Sandbox,
    slug: &str,
    branch: &str,
) -> (crate::support::project::Project, std::path::PathBuf) {
    let p = sb.new_project(slug).br().beads(1).create();
    sb.git(&p.root, &["branch", "-m", branch]);
    let bare = sb.bare_upstream(slug);
    (p, bare)
}

#[test]
fn beads_land_and_are_pushed_on_master_and_on_trunk() {
    let sb = install(0);
    sb.write("fixed", "");
    let (app, app_up) = on_branch(&sb, "app", "master");
    let (web, web_up) = on_branch(&sb, "web", "trunk");
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 2, "{r:#?}");
    workers_end(&sb);
    for (slug, p, bare, branch) in [
        ("app", &app, &app_up, "master"),
        ("web", &web, &web_up, "trunk"),
    ] {
        let bead = &p.beads[0];
        assert_eq!(sb.br_status(slug, bead), "closed");
        let pushed = sb.git(bare, &["log", "--format=%s", branch]);
        assert!(pushed.contains(bead.as_str()), "{slug}: {pushed}");
        let branches = sb.git(bare, &["branch", "--format=%(refname:short)"]);
        assert_eq!(branches.trim(), branch, "{slug}: no `main` made up");
    }
}

#[test]
fn a_person_on_a_feature_branch_keeps_it_and_their_edits_while_beads_land_on_main() {
    let sb = install(0);
    sb.write("fixed", "");
    // `app` knows its base from the upstream's default branch (as `git clone` records it),
    // `web` from PROJECT.md.
    let (app, app_up) = on_branch(&sb, "app", "main");
    sb.git(&app.root, &["remote", "set-head", "origin", "main"]);
    let web = sb
        .new_project("web")
        .br()
        .beads(1)
        .field("Branch", "main")
        .create();
    let web_up = sb.bare_upstream("web");
    for p in [&app, &web] {
        sb.git(&p.root, &["switch", "-q", "-c", "feature"]);
        std::fs::write(p.root.join("notes.txt"), "mine\n").unwrap();
        sb.git(&p.root, &["add", "notes.txt"]);
        sb.git(&p.root, &["commit", "-q", "-m", "feature work"]);
        std::fs::write(p.root.join("notes.txt"), "mine, not saved yet\n").unwrap();
    }
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 2, "{r:#?}");
    workers_end(&sb);
    for (slug, p, bare) in [("app", &app, &app_up), ("web", &web, &web_up)] {
        let bead = &p.beads[0];
        wait_for("the bead closed", Duration::from_secs(60), || {
            (sb.br_status(slug, bead) == "closed").then_some(())
        });
        let head = sb.git(&p.root, &["symbolic-ref", "--short", "HEAD"]);
        assert_eq!(
            head.trim(),
            "feature",
            "{slug}: the person's branch stays checked out"
        );
        let notes = std::fs::read_to_string(p.root.join("notes.txt")).unwrap();
        assert_eq!(
            notes, "mine, not saved yet\n",
            "{slug}: the edit is untouched"
        );
        let feature = sb.git(&p.root, &["log", "--format=%s", "feature"]);
        assert!(!feature.contains(bead.as_str()), "{slug}: {feature}");
        let main = sb.git(&p.root, &["rev-parse", "main"]);
        let pushed = sb.git(bare, &["rev-parse", "main"]);
        assert_eq!(main, pushed, "{slug}: main is pushed");
        let log = sb.git(bare, &["log", "--format=%s", "main"]);
        assert!(log.contains(bead.as_str()), "{slug}: {log}");
        assert!(!log.contains("feature work"), "{slug}: {log}");
        // braids' own commit (the iteration's completion) waits for the checkout to be back on
        // main rather than go onto the person's branch or change their ITERATION.md.
        assert!(!feature.contains("Complete iteration"), "{slug}: {feature}");
        let it =
            std::fs::read_to_string(p.root.join(".braids/iterations/001/ITERATION.md")).unwrap();
        assert!(it.to_lowercase().contains("active"), "{slug}: {it}");
    }
    for p in [&app, &web] {
        sb.git(&p.root, &["stash", "-q"]);
        sb.git(&p.root, &["switch", "-q", "main"]);
    }
    sb.tick().force().run();
    for (slug, p) in [("app", &app), ("web", &web)] {
        let main = sb.git(&p.root, &["log", "--format=%s", "main"]);
        assert!(main.contains("Complete iteration"), "{slug}: {main}");
    }
}

/// Looks at the submodule `lib` and the LFS file `big.bin` as checked out, moves `lib` to its
/// upstream's newer commit and adds a line to `big.bin`.
const SUBMODULE_AGENT: &str = r#"
cat lib/lib.txt > "$HOME/seen-lib"
cat big.bin > "$HOME/seen-big"
git -C lib checkout -q origin/HEAD
printf 'more\n' >> big.bin
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nMoved lib.\n' "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: moved lib\n' > "$BRAIDS_RESULT_FILE"
"#;

#[test]
fn a_workspace_has_its_submodules_and_lfs_files_and_a_moved_submodule_lands() {
    let sb = crate::support::Install::new().build();
    let agent = sb.script("bin/agent", SUBMODULE_AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\nretries = 0\n",
        agent.display().to_string()
    ));
    // Submodules from a local path, and Git LFS set up, as the person has them.
    sb.git(
        sb.home(),
        &["config", "--global", "protocol.file.allow", "always"],
    );
    sb.git(sb.home(), &["lfs", "install", "--skip-repo"]);
    let lib = sb.home().join("libsrc");
    std::fs::create_dir_all(&lib).unwrap();
    sb.git(&lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("lib.txt"), "v1\n").unwrap();
    sb.git(&lib, &["add", "lib.txt"]);
    sb.git(&lib, &["commit", "-q", "-m", "v1"]);
    let v1 = sb.git(&lib, &["rev-parse", "HEAD"]).trim().to_string();
    std::fs::write(lib.join("lib.txt"), "v2\n").unwrap();
    sb.git(&lib, &["commit", "-q", "-am", "v2"]);
    let v2 = sb.git(&lib, &["rev-parse", "HEAD"]).trim().to_string();

    let app = sb.new_project("app").br().beads(1).create();
    let root = &app.root;
    sb.git(
        root,
        &["submodule", "add", "-q", lib.to_str().unwrap(), "lib"],
    );
    sb.git(&root.join("lib"), &["checkout", "-q", &v1]);
    sb.git(root, &["lfs", "track", "*.bin"]);
    std::fs::write(root.join("big.bin"), "BIG CONTENT\n").unwrap();
    sb.git(
        root,
        &[
            "add",
            "-A",
            "lib",
            ".gitmodules",
            ".gitattributes",
            "big.bin",
        ],
    );
    sb.git(root, &["commit", "-q", "-m", "lib at v1, big.bin in LFS"]);

    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 1, "{r:#?}");
    closed(&sb, &app.beads[0]);
    let seen = |f: &str| std::fs::read_to_string(sb.home().join(f)).unwrap_or_default();
    assert_eq!(
        seen("seen-lib"),
        "v1\n",
        "the submodule at its recorded commit"
    );
    assert_eq!(
        seen("seen-big"),
        "BIG CONTENT\n",
        "the LFS file's content, not its pointer"
    );
    let pointer = sb.git(root, &["ls-tree", "HEAD", "lib"]);
    assert!(
        pointer.contains(&v2),
        "the moved submodule landed: {pointer}"
    );
    let stored = sb.git(root, &["show", "HEAD:big.bin"]);
    assert!(
        stored.starts_with("version https://git-lfs.github.com/spec/v1"),
        "a pointer is committed, never the content in its place: {stored}"
    );
    let here = std::fs::read_to_string(root.join("big.bin")).unwrap();
    assert_eq!(here, "BIG CONTENT\nmore\n");
}

#[test]
fn a_project_with_no_remote_lands_locally_and_says_no_upstream_once() {
    let sb = install(0);
    sb.write("fixed", "");
    let app = sb.new_project("app").br().beads(2).create();
    for bead in &app.beads {
        wait_for("the bead spawned", Duration::from_secs(60), || {
            sb.tick().force().run();
            (sb.br_status("app", bead) != "open").then_some(())
        });
        closed(&sb, bead);
    }
    let said: usize = app
        .beads
        .iter()
        .map(|b| {
            sb.ok(&["logs", &format!("app:{b}")])
                .matches("no upstream: beads land locally only")
                .count()
        })
        .sum();
    assert_eq!(said, 1, "said once, not by every bead");
    let log = sb.git(&app.root, &["log", "--format=%s"]);
    assert!(app.beads.iter().all(|b| log.contains(b.as_str())), "{log}");
}
