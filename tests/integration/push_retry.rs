//! 4.4: work is not complete until `git push` succeeds. A failed push is remembered and the
//! next tick retries it.

use crate::support::Sandbox;

#[test]
fn c4_4_failed_push_is_retried_by_the_next_tick() {
    let s = Sandbox::new();
    let root = s.new_project("app").no_iteration().create().root;
    let bare = s.home().join("upstream.git");
    s.git(s.home(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
    s.git(&root, &["remote", "add", "origin", bare.to_str().unwrap()]);
    s.git(&root, &["push", "-q", "-u", "origin", "HEAD"]);

    std::fs::write(root.join("work.txt"), "done\n").unwrap();
    s.git(&root, &["add", "work.txt"]);
    s.git(&root, &["commit", "-qm", "Work (app-1)"]);
    // the upstream goes away: the push fails and is remembered
    std::fs::rename(&bare, s.home().join("elsewhere.git")).unwrap();
    let err =
        braids::git::push_recorded(&root, "main", std::time::Duration::from_secs(30)).unwrap_err();
    assert!(format!("{err:#}").contains("git push failed"), "{err:#}");
    assert!(braids::git::push_pending(&root));

    // still failing: reported, kept for later
    let r = s.tick().force().run();
    assert!(
        r.errors.iter().any(|e| e.contains("push still failing")),
        "{r:#?}"
    );
    assert!(braids::git::push_pending(&root));

    // the upstream is back: the next tick pushes
    std::fs::rename(s.home().join("elsewhere.git"), &bare).unwrap();
    let r = s.tick().force().run();
    assert_eq!(r.pushed, ["app"], "{r:#?}");
    assert!(!braids::git::push_pending(&root));
    assert!(s.git(&bare, &["log", "--oneline"]).contains("Work (app-1)"));
}

/// Closes its bead with a deliverable.
const AGENT: &str = r#"
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid it.\n' "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

#[test]
fn c4_4_closed_not_pushed_is_shown_everywhere_and_the_iteration_is_told_once_pushed() {
    let sb = crate::support::Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    let told = sb.home().join("told");
    let notifier = sb.script(
        "bin/notify",
        &format!("printf '%s|%s\\n' \"$1\" \"$2\" >> {:?}\n", told),
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n[notify]\ncommand = [{:?}, \"{{event}}\", \"{{message}}\"]\n",
        agent.display().to_string(),
        notifier.display().to_string()
    ));
    let app = sb.new_project("app").br().beads(1).channel("ops").create();
    let bead = app.beads[0].as_str();
    let bare = sb.bare_upstream("app");
    let away = sb.home().join("away.git");
    std::fs::rename(&bare, &away).unwrap();

    let r = sb.tick().force().run();
    assert_eq!(r.spawns.len(), 1, "{r:#?}");
    crate::day_two::workers_end(&sb);
    assert_eq!(sb.br_status("app", bead), "closed");
    let said = std::fs::read_to_string(&told).unwrap_or_default();
    assert!(
        said.contains("bead-complete|") && said.contains("not pushed yet"),
        "{said}"
    );
    assert!(
        !said.contains("iteration-complete|"),
        "complete means pushed: {said}"
    );

    // Shown as closed, not pushed: `beads` (its JSON is the API's), `status` and STATUS.md.
    let beads: serde_json::Value =
        serde_json::from_str(&sb.ok(&["beads", "app", "--json"])).unwrap();
    let row = &beads["beads"][0];
    let shown = row["not_pushed"].as_str().unwrap_or_default();
    assert!(shown.starts_with("closed, not pushed (since "), "{beads:#}");
    assert!(sb.ok(&["beads", "app"]).contains("not pushed"));
    let status = sb.ok(&["status", "--json"]);
    assert!(status.contains("\"not_pushed\""), "{status}");
    let r = sb.tick().force().run();
    assert!(
        r.errors.iter().any(|e| e.contains("push still failing")),
        "{r:#?}"
    );
    let md = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(md.contains("**Not pushed** since"), "{md}");
    assert!(
        md.contains(bead) && md.contains("closed, not pushed"),
        "{md}"
    );
    // Failed pushes in a row: an unforced run waits for the backoff instead of pushing.
    let debt = braids::git::push_debt(&app.root).unwrap();
    assert!(debt.failures >= 2, "{debt:?}");
    assert!(debt.next_try() > chrono::Utc::now(), "{debt:?}");
    std::fs::rename(&away, &bare).unwrap();

    // The upstream is back: a forced run pushes, and the iteration is told then, once.
    let r = sb.tick().force().run();
    assert_eq!(r.pushed, ["app"], "{r:#?}");
    let log = sb.git(&bare, &["log", "--format=%s", "main"]);
    assert!(log.contains(bead), "{log}");
    let said = std::fs::read_to_string(&told).unwrap();
    assert_eq!(said.matches("iteration-complete|").count(), 1, "{said}");
    assert!(!braids::git::push_pending(&app.root));
    // The run that pushed shows it.
    let md = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(!md.contains("not pushed"), "{md}");
}
