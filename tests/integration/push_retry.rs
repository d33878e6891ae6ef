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
