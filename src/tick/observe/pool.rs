//! A few threads observing projects, each project with its own time limit.
//!
//! The threads take the next project from a shared counter and send each observation back;
//! the caller's thread collects them and gives up on any project past its budget (counted from
//! that project's start), so a hung tracker or file system costs its own project a run and one
//! thread, never the run. A thread still stuck when the rest are done is left behind: the run
//! goes on without it, and the process ends it when it exits.
//!
//! Plain threads rather than a task per project on an async runtime: with 10,000 cheap
//! projects, a task, a blocking hand-off and a timer each cost more than observing an
//! unchanged project does (measured: a sixth of a 10,000-project dry run's CPU).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Why a project has no observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The observation panicked (with its message, when it has one).
    Panicked(String),
    /// It ran past the budget.
    TimedOut,
}

/// The work for project `i`, run on a pool thread.
pub type Work<T> = Arc<dyn Fn(usize) -> T + Send + Sync>;

/// Runs `work(i)` for every `i` in `0..n` on up to `threads` threads, handing each result (in
/// the order they finish) to `done` on the calling thread, exactly once per project.
pub fn run<T: Send + 'static>(
    n: usize,
    threads: usize,
    budget: Duration,
    work: Work<T>,
    mut done: impl FnMut(usize, Result<T, Failure>),
) {
    let origin = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    // When each project started, in nanoseconds after `origin`, plus one (0: not yet).
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let (tx, rx) = mpsc::channel::<(usize, Result<T, Failure>)>();
    let mut spawned = 0;
    for _ in 0..threads.clamp(1, n.max(1)) {
        let (next, started, tx, work) = (
            Arc::clone(&next),
            Arc::clone(&started),
            tx.clone(),
            Arc::clone(&work),
        );
        let worker = move || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return;
            }
            started[i].store(origin.elapsed().as_nanos() as u64 + 1, Ordering::Relaxed);
            let r = catch_unwind(AssertUnwindSafe(|| work(i))).map_err(|p| panicked(&*p));
            if tx.send((i, r)).is_err() {
                return;
            }
        };
        if std::thread::Builder::new()
            .name("braids-observe".into())
            .spawn(worker)
            .is_ok()
        {
            spawned += 1;
        }
    }
    drop(tx);
    if spawned == 0 {
        // No thread could be started: observe here, one project after another.
        for i in 0..n {
            done(
                i,
                catch_unwind(AssertUnwindSafe(|| work(i))).map_err(|p| panicked(&*p)),
            );
        }
        return;
    }

    let mut finished = vec![false; n];
    let mut left = n;
    // How often started projects are checked against their budget, whatever else arrives.
    let check = (budget / 4).clamp(Duration::from_millis(10), Duration::from_millis(250));
    let mut checked = Instant::now();
    while left > 0 {
        match rx.recv_timeout(check) {
            Ok((i, r)) => {
                if !finished[i] {
                    finished[i] = true;
                    left -= 1;
                    done(i, r);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if checked.elapsed() >= check {
            checked = Instant::now();
            let now = origin.elapsed().as_nanos() as u64 + 1;
            let budget = budget.as_nanos() as u64;
            let begun = next.load(Ordering::Relaxed).min(n);
            for (i, f) in finished.iter_mut().enumerate().take(begun) {
                let at = started[i].load(Ordering::Relaxed);
                if !*f && at != 0 && now.saturating_sub(at) > budget {
                    *f = true;
                    left -= 1;
                    done(i, Err(Failure::TimedOut));
                }
            }
        }
    }
    // Every thread ended and these never came (a thread cannot end without sending: panics
    // are caught); said anyway, so each project is done once.
    for (i, f) in finished.iter().enumerate() {
        if !f {
            done(i, Err(Failure::Panicked(String::new())));
        }
    }
}

fn panicked(p: &(dyn std::any::Any + Send)) -> Failure {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned());
    Failure::Panicked(msg.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_project_is_done_once_and_a_hung_one_times_out_alone() {
        let work: Work<usize> = Arc::new(|i| {
            if i == 3 {
                std::thread::sleep(Duration::from_secs(30));
            }
            if i == 5 {
                panic!("boom");
            }
            i * 10
        });
        let mut seen = Vec::new();
        let t = Instant::now();
        // A budget well past what a panic costs (its hook may print a backtrace, slow in a
        // debug build on a loaded machine), well short of the hung project's sleep.
        run(40, 3, Duration::from_secs(4), work, |i, r| {
            seen.push((i, r))
        });
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "a hung project held the run"
        );
        seen.sort_by_key(|(i, _)| *i);
        assert_eq!(seen.len(), 40);
        for (i, r) in &seen {
            match i {
                3 => assert_eq!(r, &Err(Failure::TimedOut)),
                5 => assert_eq!(r, &Err(Failure::Panicked("boom".into()))),
                _ => assert_eq!(r, &Ok(i * 10)),
            }
        }
        let mut none = 0;
        run(0, 4, Duration::from_secs(1), Arc::new(|i| i), |_, _| {
            none += 1
        });
        assert_eq!(none, 0);
    }
}
