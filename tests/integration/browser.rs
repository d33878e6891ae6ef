//! The dashboard in a real headless Chromium, driven over WebDriver (`chromedriver`, started
//! here): a worker appears live without a reload, a question is answered in the page and the
//! bead is spawned again, a blocked bead is retried from its button, and an action without the
//! page's proof is refused. The browser logs in with the one-time link `braids serve` prints. The screenshot it takes (in cargo's test temporary directory, and at
//! `$BRAIDS_SCREENSHOT` when set) is `docs/dashboard.png`, which docs/day-two.md shows.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them). Without them the
//! test fails and says so, unless `BRAIDS_BROWSER_TESTS=skip` asks for it to be skipped.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::day_two::{install, workers_end};
use crate::support::ReportExt;

/// How long the page may take to show something: well past any load on two cores.
const PATIENCE: Duration = Duration::from_secs(60);

struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .chain([std::path::PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Waits until `css` matches an element (or, with `gone`, until none does).
async fn wait_for(c: &Client, what: &str, css: &str, gone: bool) {
    let start = Instant::now();
    loop {
        let found = c
            .execute(
                "return document.querySelector(arguments[0]) !== null;",
                vec![json!(css)],
            )
            .await
            .map(|v| v == json!(true))
            .unwrap_or(false);
        if found != gone {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{what}: `{css}` {} after {PATIENCE:?}; page:\n{}",
            if gone {
                "still there"
            } else {
                "never appeared"
            },
            c.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the page's main text contains `text` (a render in flight may not show it yet).
async fn wait_for_text(c: &Client, text: &str) {
    let start = Instant::now();
    loop {
        let shown = match c.find(Locator::Css("main")).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if shown.contains(text) {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "`{text}` never appeared after {PATIENCE:?}; main:\n{shown}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Types `text` into the field `css` as a person would. A render that lands before the field
/// has focus replaces it, so typing is tried again until the field holds the whole text.
async fn type_into(c: &Client, css: &str, text: &str) {
    let start = Instant::now();
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            let _ = e.clear().await;
            let _ = e.send_keys(text).await;
        }
        let held = c
            .execute(
                "const f = document.querySelector(arguments[0]);\
                 return f !== null && f === document.activeElement ? f.value : null;",
                vec![json!(css)],
            )
            .await
            .unwrap_or_default();
        if held == json!(text) {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "`{css}` never held {text:?}: {held}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Finds and clicks `css`. The live page re-renders its lists when the server says something
/// changed, so an element found a moment ago can be replaced before the click lands: the
/// click is then tried again on the new element, up to PATIENCE.
async fn click(c: &Client, css: &str) {
    let start = std::time::Instant::now();
    loop {
        let found = c.find(Locator::Css(css)).await;
        let clicked = match found {
            Ok(e) => e.click().await,
            Err(e) => Err(e),
        };
        match clicked {
            Ok(()) => return,
            Err(e) if start.elapsed() >= PATIENCE => panic!("`{css}`: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c9_5_the_dashboard_is_live_and_its_buttons_act() {
    let (Some(driver), Some(chromium)) = (which("chromedriver"), which("chromium")) else {
        if std::env::var("BRAIDS_BROWSER_TESTS").as_deref() == Ok("skip") {
            eprintln!("SKIPPED browser test: chromium or chromedriver is not installed (BRAIDS_BROWSER_TESTS=skip)");
            return;
        }
        panic!("the browser test needs Debian's chromium and chromium-driver: apt-get install -y chromium chromium-driver fonts-liberation (or BRAIDS_BROWSER_TESTS=skip)");
    };
    let sb = install(0);
    let app = sb
        .new_project("app")
        .br()
        .titled(&[
            "Slow work: index the corpus",
            "Ask the person about the API",
            "Fix the failing tests",
        ])
        .max_workers(3)
        .create();
    let (slow, ask, fail) = (
        app.beads[0].clone(),
        app.beads[1].clone(),
        app.beads[2].clone(),
    );
    let served = sb.serve();
    let port = free_port();
    let _driver = Driver(
        Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let caps = json!({
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1200,1000", "--disable-gpu"]
        }
    });
    // Two TLS backends are linked (ureq's and WebDriver's): name one, though only HTTP is used.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let start = Instant::now();
    let c = loop {
        match ClientBuilder::rustls()
            .unwrap()
            .capabilities(caps.as_object().unwrap().clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(c) => break c,
            Err(e) if start.elapsed() < PATIENCE => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("chromedriver did not take a session: {e}"),
        }
    };
    // Without a login the page says how to get one; the link logs in and lands on `/`.
    c.goto(&format!("{}/", served.base)).await.unwrap();
    wait_for(&c, "the login page", "section.login", false).await;
    assert!(!c.source().await.unwrap().contains(&served.token));
    c.goto(&served.login).await.unwrap();
    assert_eq!(
        c.current_url().await.unwrap().as_str(),
        format!("{}/", served.base),
        "the login link's code is gone from the address"
    );
    wait_for(&c, "the event stream", "body[data-live='yes']", false).await;
    c.execute("window.braidsNotReloaded = true; return null;", vec![])
        .await
        .unwrap();

    // A run spawns three workers: the page shows them without a reload.
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 3, "{r:#?}");
    let row = format!("tr.worker[data-bead='{slow}']");
    wait_for(&c, "the slow worker", &row, false).await;
    wait_for(
        &c,
        "the question",
        &format!(".question[data-bead='{ask}']"),
        false,
    )
    .await;
    wait_for(
        &c,
        "the blocked bead",
        &format!(".blocked[data-bead='{fail}']"),
        false,
    )
    .await;
    // The failed worker's row goes once it has blocked its bead.
    wait_for(
        &c,
        "the failed worker to end",
        &format!("tr.worker[data-bead='{fail}']"),
        true,
    )
    .await;
    let same_page = c
        .execute("return window.braidsNotReloaded === true;", vec![])
        .await
        .unwrap();
    assert_eq!(same_page, json!(true), "the page was reloaded");
    wait_for_text(&c, "Should the API speak JSON or XML?").await;
    wait_for_text(&c, "Slow work: index the corpus").await;
    wait_for_text(&c, "Cost today: 0.12 USD").await;
    let shot = c.screenshot().await.unwrap();
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&out, &shot).unwrap();
    if let Ok(to) = std::env::var("BRAIDS_SCREENSHOT") {
        std::fs::write(to, &shot).unwrap();
    }

    // An action without the page's proof (its form's CSRF value, or the header its own
    // script sends) is refused, even from the page with its cookie.
    let refused = c
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             fetch('/api/v1/beads/' + arguments[0] + '/retry', {method: 'POST'})\
               .then(r => done(r.status), e => done(String(e)));",
            vec![json!(fail)],
        )
        .await
        .unwrap();
    assert_eq!(refused, json!(403));
    assert_eq!(sb.br_status("app", &fail), "blocked");

    // The question is answered in the page; the next run spawns the bead, which completes.
    let form = format!(".question[data-bead='{ask}'] form");
    type_into(&c, &format!("{form} textarea"), "JSON, always.").await;
    click(&c, &format!("{form} button")).await;
    wait_for(
        &c,
        "the answered question to go",
        &format!(".question[data-bead='{ask}']"),
        true,
    )
    .await;
    assert_eq!(sb.br_status("app", &ask), "open");
    let r = sb.tick().force().run();
    assert!(r.spawned_beads().contains(&ask), "{r:#?}");

    // The blocked bead is retried from its button, and spawned again.
    std::fs::write(sb.home().join("fixed"), "").unwrap();
    wait_for(
        &c,
        "the page after the answer",
        "body[data-live='yes']",
        false,
    )
    .await;
    click(&c, &format!(".blocked[data-bead='{fail}'] button")).await;
    wait_for(
        &c,
        "the retried bead to leave Blocked",
        &format!(".blocked[data-bead='{fail}']"),
        true,
    )
    .await;
    let r = sb.tick().force().run();
    assert!(r.spawned_beads().contains(&fail), "{r:#?}");

    sb.ok(&["kill", &slow, "--block", "the test is over"]);
    workers_end(&sb);
    assert_eq!(sb.br_status("app", &ask), "closed");
    assert_eq!(sb.br_status("app", &fail), "closed");
    c.close().await.unwrap();
}
