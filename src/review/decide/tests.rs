use super::*;

fn check(name: &str, state: CheckState) -> Check {
    Check {
        name: name.into(),
        state,
        summary: format!("{name} said so"),
    }
}

fn review(id: u64, author: &str, state: ReviewState) -> Review {
    Review {
        id,
        author: author.into(),
        state,
        body: format!("review {id}"),
        inline: false,
    }
}

/// An open request, clean, up to date, its one check passed, no review.
fn green() -> PullRequest {
    PullRequest {
        number: 7,
        state: PrState::Open,
        head: "h1".into(),
        behind: false,
        mergeable: Mergeable::Clean,
        checks: vec![check("ci", CheckState::Passed)],
        reviews: vec![],
    }
}

fn auto(pr: &PullRequest, handled: &Handled) -> Step {
    decide(pr, handled, MergePolicy::Auto, 0, 3)
}

fn waits(step: &Step, about: &str) {
    match step {
        Step::Wait { why } => assert!(why.contains(about), "{why}"),
        other => panic!("expected a wait about {about}, got {other:?}"),
    }
}

#[test]
fn a_merged_or_closed_request_ends_the_review_whatever_else_it_says() {
    let mut pr = green();
    pr.checks = vec![check("ci", CheckState::Failed)];
    pr.state = PrState::Merged {
        by: Some("ana".into()),
    };
    assert_eq!(
        auto(&pr, &Handled::default()),
        Step::Done {
            merged_by: Some("ana".into())
        }
    );
    pr.state = PrState::Closed {
        by: Some("bo".into()),
    };
    match auto(&pr, &Handled::default()) {
        Step::Blocked { why } => assert!(why.contains("#7") && why.contains("by bo"), "{why}"),
        other => panic!("{other:?}"),
    }
    pr.state = PrState::Closed { by: None };
    match auto(&pr, &Handled::default()) {
        Step::Blocked { why } => assert!(why.ends_with("without a merge"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A login is the forge's text: the reason a person reads carries no escape of it.
    pr.state = PrState::Closed {
        by: Some("bo\u{1b}[2J\nrm -rf".into()),
    };
    match auto(&pr, &Handled::default()) {
        Step::Blocked { why } => {
            assert!(why.ends_with("by bo[2Jrm -rf"), "{why}");
            assert!(!why.chars().any(char::is_control), "{why:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_green_request_merges_at_the_head_it_saw_or_waits_for_its_person() {
    let pr = green();
    assert_eq!(
        auto(&pr, &Handled::default()),
        Step::Merge { head: "h1".into() }
    );
    waits(
        &decide(&pr, &Handled::default(), MergePolicy::Person, 0, 3),
        "a person",
    );
    // No checks at all is green too.
    let mut bare = green();
    bare.checks.clear();
    assert_eq!(
        auto(&bare, &Handled::default()),
        Step::Merge { head: "h1".into() }
    );
}

#[test]
fn a_red_check_starts_one_attempt_per_head_and_the_last_one_gives_up() {
    let mut pr = green();
    pr.checks = vec![
        check("lint", CheckState::Passed),
        check("test", CheckState::Failed),
        check("build", CheckState::Pending),
    ];
    let step = auto(&pr, &Handled::default());
    assert_eq!(
        step,
        Step::Rework(Rework::Checks(vec![check("test", CheckState::Failed)]))
    );
    // Handed to an attempt: the same head waits for its fix.
    let handled = Handled {
        checks_at: Some("h1".into()),
        attempts: 1,
        ..Handled::default()
    };
    waits(&auto(&pr, &handled), "failing checks");
    // The fix pushed a new head that is red again: another attempt, while there are some.
    pr.head = "h2".into();
    assert!(matches!(
        auto(&pr, &handled),
        Step::Rework(Rework::Checks(_))
    ));
    let spent = Handled {
        attempts: 3,
        ..handled
    };
    match auto(&pr, &spent) {
        Step::GiveUp { why } => assert!(
            why.contains("checks failed: test") && why.contains("3 attempts"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn running_checks_wait_and_a_fixed_head_merges() {
    let mut pr = green();
    pr.checks = vec![check("test", CheckState::Pending)];
    waits(&auto(&pr, &Handled::default()), "running");
    pr.checks = vec![check("test", CheckState::Passed)];
    let handled = Handled {
        checks_at: Some("h0".into()),
        attempts: 1,
        ..Handled::default()
    };
    assert_eq!(auto(&pr, &handled), Step::Merge { head: "h1".into() });
}

#[test]
fn changes_requested_start_an_attempt_with_every_new_review_then_wait_for_the_reviewer() {
    let mut pr = green();
    pr.reviews = vec![
        review(1, "ana", ReviewState::Commented),
        review(2, "bo", ReviewState::ChangesRequested),
    ];
    assert_eq!(
        auto(&pr, &Handled::default()),
        Step::Rework(Rework::Changes(vec![
            review(1, "ana", ReviewState::Commented),
            review(2, "bo", ReviewState::ChangesRequested),
        ]))
    );
    // Answered: until bo approves, it waits, however green.
    let handled = Handled {
        review: Some(2),
        attempts: 1,
        ..Handled::default()
    };
    pr.head = "h2".into();
    waits(&auto(&pr, &handled), "bo asked for changes");
    // A later comment from bo on the new head is shown to the agent too.
    pr.reviews.push(review(3, "bo", ReviewState::Commented));
    assert_eq!(
        auto(&pr, &handled),
        Step::Rework(Rework::Changes(vec![review(
            3,
            "bo",
            ReviewState::Commented
        )]))
    );
    // bo approves: it merges.
    pr.reviews.push(review(4, "bo", ReviewState::Approved));
    let handled = Handled {
        review: Some(3),
        attempts: 2,
        ..Handled::default()
    };
    assert_eq!(auto(&pr, &handled), Step::Merge { head: "h2".into() });
}

#[test]
fn a_comment_on_lines_starts_an_attempt_a_bare_one_nothing_and_a_dismissed_request_no_longer_holds()
{
    let mut pr = green();
    pr.reviews = vec![review(1, "ana", ReviewState::Commented)];
    assert_eq!(
        auto(&pr, &Handled::default()),
        Step::Merge { head: "h1".into() }
    );
    pr.reviews[0].inline = true;
    assert_eq!(
        auto(&pr, &Handled::default()),
        Step::Rework(Rework::Changes(pr.reviews.clone()))
    );
    let answered = Handled {
        review: Some(1),
        ..Handled::default()
    };
    assert_eq!(auto(&pr, &answered), Step::Merge { head: "h1".into() });
    pr.reviews = vec![
        review(1, "ana", ReviewState::ChangesRequested),
        review(2, "ana", ReviewState::Dismissed),
    ];
    let handled = Handled {
        review: Some(1),
        ..Handled::default()
    };
    assert_eq!(auto(&pr, &handled), Step::Merge { head: "h1".into() });
}

#[test]
fn approvals_count_each_reviewers_standing_verdict_once() {
    let mut pr = green();
    pr.reviews = vec![
        review(1, "ana", ReviewState::Approved),
        review(2, "ana", ReviewState::Approved),
        review(3, "bo", ReviewState::Commented),
    ];
    waits(
        &decide(&pr, &Handled::default(), MergePolicy::Auto, 2, 3),
        "1 of 2 approvals",
    );
    pr.reviews.push(review(4, "bo", ReviewState::Approved));
    assert_eq!(
        decide(&pr, &Handled::default(), MergePolicy::Auto, 2, 3),
        Step::Merge { head: "h1".into() }
    );
    // An approval later withdrawn by a request for changes counts no more.
    pr.reviews
        .push(review(5, "ana", ReviewState::ChangesRequested));
    assert!(matches!(
        decide(&pr, &Handled::default(), MergePolicy::Auto, 2, 3),
        Step::Rework(Rework::Changes(_))
    ));
}

#[test]
fn a_moved_base_is_rebased_when_it_merges_cleanly_and_a_conflict_goes_to_the_agent() {
    let mut pr = green();
    pr.behind = true;
    assert_eq!(auto(&pr, &Handled::default()), Step::Rebase);
    // Rebased for a person's merge too.
    assert_eq!(
        decide(&pr, &Handled::default(), MergePolicy::Person, 0, 3),
        Step::Rebase
    );
    pr.mergeable = Mergeable::Conflict;
    assert_eq!(
        auto(&pr, &Handled::default()),
        Step::Rework(Rework::Conflict)
    );
    let handled = Handled {
        conflict_at: Some("h1".into()),
        attempts: 1,
        ..Handled::default()
    };
    waits(&auto(&pr, &handled), "conflict");
    // Not yet computed: neither rebased nor merged.
    pr.mergeable = Mergeable::Unknown;
    waits(&auto(&pr, &handled), "merges");
}

#[test]
fn the_conflict_is_shown_before_the_checks_and_the_checks_before_the_reviews() {
    let mut pr = green();
    pr.mergeable = Mergeable::Conflict;
    pr.checks = vec![check("test", CheckState::Failed)];
    pr.reviews = vec![review(1, "bo", ReviewState::ChangesRequested)];
    assert_eq!(
        auto(&pr, &Handled::default()),
        Step::Rework(Rework::Conflict)
    );
    let handled = Handled {
        conflict_at: Some("h1".into()),
        ..Handled::default()
    };
    assert!(matches!(
        auto(&pr, &handled),
        Step::Rework(Rework::Checks(_))
    ));
    let handled = Handled {
        conflict_at: Some("h1".into()),
        checks_at: Some("h1".into()),
        ..Handled::default()
    };
    assert!(matches!(
        auto(&pr, &handled),
        Step::Rework(Rework::Changes(_))
    ));
}

#[test]
fn a_refused_merge_or_a_failed_rebase_is_not_tried_again_at_the_same_head() {
    let pr = green();
    let refused = Handled {
        merge_refused_at: Some("h1".into()),
        ..Handled::default()
    };
    waits(&auto(&pr, &refused), "refused to merge");
    // A new head is tried again.
    let mut moved = green();
    moved.head = "h2".into();
    assert_eq!(auto(&moved, &refused), Step::Merge { head: "h2".into() });
    // Behind: rebased once per head; after a failed one a person's project waits, an auto one
    // merges as the forge allows.
    let mut behind = green();
    behind.behind = true;
    assert_eq!(auto(&behind, &Handled::default()), Step::Rebase);
    let failed = Handled {
        rebase_failed_at: Some("h1".into()),
        ..Handled::default()
    };
    waits(
        &decide(&behind, &failed, MergePolicy::Person, 0, 3),
        "could not rebase",
    );
    assert_eq!(auto(&behind, &failed), Step::Merge { head: "h1".into() });
}
