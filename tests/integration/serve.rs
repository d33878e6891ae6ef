//! `braids serve` over real HTTP: the API's named objects, the actions through the CLI's use
//! cases, the token, the Host check, the event stream, and hostile text shown as text.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use crate::day_two::{install, workers_end};
use crate::support::{wait_for, Install, ReportExt};

const HOSTILE: &str = "<script>alert('pwned')</script> & <img src=x onerror=alert(1)>";

#[test]
fn c9_5_the_api_acts_only_with_the_token_and_shows_hostile_text_as_text() {
    let sb = install(0);
    let app = sb
        .new_project("app")
        .br()
        .titled(&[&format!("Ask the person {HOSTILE}"), "Build the parser"])
        .max_workers(2)
        .create();
    let (ask, build) = (app.beads[0].as_str(), app.beads[1].as_str());
    sb.tick().force().run();
    workers_end(&sb);
    // A deliverable with HTML in it, shown on the bead's page.
    let it = app.root.join(".braids/iterations/001");
    let suffix = ask.rsplit_once('-').unwrap().1;
    std::fs::write(
        it.join(format!("{suffix}-notes.md")),
        format!("# Notes\n\n## Summary\n\nSaw {HOSTILE}.\n"),
    )
    .unwrap();
    let s = sb.serve();

    // Reads: named objects; every page with the policy; text escaped.
    let state = s.get("/api/v1/state").json();
    let p = &state["projects"][0];
    assert_eq!(p["iteration"]["name"], "001", "{p:#}");
    assert_eq!(state["details"]["app"]["stories_total"], 2, "{state:#}");
    let waiting = state["details"]["app"]["waiting"].as_array().unwrap();
    assert_eq!(waiting.len(), 2, "{state:#}");
    let page = s.get("/");
    assert_eq!(page.status, 200);
    let csp = page.csp.clone().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!page.body.contains("<script>alert"), "{}", page.body);
    assert!(!page.body.contains("<img src=x"), "{}", page.body);
    assert!(page.body.contains("&lt;script&gt;alert"), "{}", page.body);
    assert!(page.body.contains("Should the API speak JSON or XML?"));
    assert!(!page.body.contains(&s.token), "no page carries the token");
    let bead_page = s.get(&format!("/beads/{ask}"));
    assert_eq!(bead_page.status, 200);
    assert!(
        bead_page.body.contains("Saw &lt;script&gt;"),
        "{}",
        bead_page.body
    );
    assert!(
        !bead_page.body.contains("<script>alert"),
        "{}",
        bead_page.body
    );
    let status_md = s.get("/status");
    assert!(
        status_md.body.contains("<h1>braids status</h1>"),
        "{}",
        status_md.body
    );
    assert!(!status_md.body.contains("<script>alert"));
    assert_eq!(
        s.get(&format!("/api/v1/beads/{build}")).json()["bead"]["status"],
        "blocked"
    );
    assert_eq!(s.get("/api/v1/beads/app-nope").status, 404);
    assert_eq!(
        s.get("/api/v1/projects/app").json()["beads"]["beads"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(s.get("/favicon.ico").status, 200);
    assert_eq!(
        s.get_with_host("/", "rebind.example:80").status,
        421,
        "DNS rebinding"
    );

    // Actions: refused without the token, with a wrong one, and by GET.
    let answer = format!("/api/v1/beads/{ask}/answer");
    let r = s.post(&answer, None, serde_json::json!({"text": "JSON"}));
    assert_eq!(r.status, 401, "{r:?}");
    let r = s.post(
        &answer,
        Some("not-the-token"),
        serde_json::json!({"text": "JSON"}),
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = s.post_form(&answer, &[("text", "JSON"), ("token", &s.token)]);
    assert_eq!(r.status, 401, "a token in a form is no credential: {r:?}");
    assert_eq!(s.get(&answer).status, 405);
    assert_eq!(sb.br_status("app", ask), "blocked", "nothing was done");

    // A JSON body is JSON whatever its content type (`curl -d` calls it a form).
    let r = s.post_form_raw(
        &format!("/api/v1/beads/{build}/answer"),
        &s.token,
        r#"{"text": "x"}"#,
    );
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.body.contains("asked nothing"), "JSON, not a page: {r:?}");

    // The same rules as the CLI, through the same code.
    let r = s.post(
        &format!("/api/v1/beads/{build}/answer"),
        Some(&s.token),
        serde_json::json!({"text": "x"}),
    );
    assert_eq!(r.status, 409, "{r:?}");
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("asked nothing"),
        "{r:?}"
    );

    // The event stream tells of an action as it happens.
    let mut stream = std::net::TcpStream::connect(s.base.trim_start_matches("http://")).unwrap();
    std::io::Write::write_all(
        &mut stream,
        format!("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\r\n", s.token).as_bytes(),
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut lines = BufReader::new(stream.try_clone().unwrap()).lines();
    wait_for("the stream's headers", Duration::from_secs(30), || {
        (lines.next()?.ok()?.is_empty()).then_some(())
    });
    let r = s.post(
        &answer,
        Some(&s.token),
        serde_json::json!({"text": "JSON, always."}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["kind"], "question");
    assert_eq!(sb.br_status("app", ask), "open");
    let seen = wait_for(
        "the answered event on the stream",
        Duration::from_secs(30),
        || {
            let l = lines.next()?.ok()?;
            l.contains("\"answered\"").then_some(l)
        },
    );
    assert!(
        seen.starts_with("data: ") && seen.contains("JSON, always."),
        "{seen}"
    );

    // A form post from a logged-in browser comes back to the dashboard.
    let cookie = s.browser_cookie();
    let csrf = csrf_of(&s.with_cookie("GET", "/", &cookie, &[], None).body);
    let r = s.with_cookie(
        "POST",
        &format!("/api/v1/beads/{build}/retry"),
        &cookie,
        &[],
        Some(&[("csrf", &csrf)]),
    );
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(sb.br_status("app", build), "open");
    let r = s.post(
        "/api/v1/projects/app/pause",
        Some(&s.token),
        serde_json::json!({}),
    );
    assert_eq!(r.json()["to"], "paused", "{r:?}");
    let r = sb.tick().force().run();
    assert!(r.spawned_beads().is_empty(), "{r:#?}");
    let r = s.post(
        "/api/v1/projects/app/resume",
        Some(&s.token),
        serde_json::Value::Null,
    );
    assert_eq!(r.json()["to"], "active", "{r:?}");
    let r = s.post(
        "/api/v1/projects/app/explode",
        Some(&s.token),
        serde_json::json!({}),
    );
    assert_eq!(r.status, 404, "{r:?}");
}

#[test]
fn c9_5_a_reachable_address_needs_a_token_file() {
    let sb = install(0);
    let out = sb.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--token-file"), "{err}");
    let empty = sb.home().join("empty.token");
    std::fs::write(&empty, "").unwrap();
    let out = sb.run(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--token-file",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is empty"),
        "{out:?}"
    );
}

#[test]
fn c9_5_a_reachable_address_asks_the_token_for_every_read_and_a_stop_ends_open_streams() {
    let sb = install(0);
    sb.new_project("app").br().beads(1).create();
    let token = sb.home().join("my.token");
    std::fs::write(&token, "a-long-random-token-only-i-hold").unwrap();
    let s = sb.serve_with(&[
        "--listen",
        "0.0.0.0:0",
        "--token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(s.token, "a-long-random-token-only-i-hold");
    assert_eq!(s.get_anon("/api/v1/state").status, 401);
    assert_eq!(s.get_anon("/").status, 401);
    assert_eq!(s.get("/static/app.css").status, 200);
    let r = s.get_with_token("/api/v1/state");
    assert_eq!(r.status, 200, "{r:?}");
    let page = s.get_with_token("/");
    assert!(
        !page.body.contains(&s.token),
        "never embedded for a remote client"
    );

    // SIGTERM with an event stream open: the server still stops, within seconds.
    let mut stream = std::net::TcpStream::connect(s.base.trim_start_matches("http://")).unwrap();
    std::io::Write::write_all(
        &mut stream,
        format!(
            "GET /api/v1/events HTTP/1.1\r\nHost: x\r\nX-Braids-Token: {}\r\n\r\n",
            s.token
        )
        .as_bytes(),
    )
    .unwrap();
    let mut first = [0u8; 12];
    std::io::Read::read_exact(&mut stream, &mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    let mut s = s;
    assert!(
        s.stop(Duration::from_secs(30)),
        "serve did not stop with a stream open"
    );
}

/// `curl` as the unprivileged user `nobody` (uid 65534): status and body.
fn curl_as_nobody(args: &[&str]) -> (u16, String) {
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .args(["curl", "-s", "-w", "\n%{http_code}", "--max-time", "20"])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn c11_4_another_user_of_the_machine_gets_no_token_and_no_action() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipping: needs root to act as another user");
        return;
    }
    let sb = Install::new().build();
    sb.new_project("app").beads(1).create();
    let s = sb.serve();
    // The person without a login gets the way to log in, never the token.
    let own = s.get_anon("/");
    assert_eq!(own.status, 401);
    assert!(!own.body.contains(&s.token), "{}", own.body);
    assert!(own.body.contains("braids serve --login"), "{}", own.body);
    // Another user gets neither the page, nor the API, nor an action.
    let (status, body) = curl_as_nobody(&[&format!("{}/", s.base)]);
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains(&s.token));
    let (status, _) = curl_as_nobody(&[&format!("{}/api/v1/state", s.base)]);
    assert_eq!(status, 403);
    let (status, _) = curl_as_nobody(&[
        "-X",
        "POST",
        &format!("{}/api/v1/projects/app/pause", s.base),
    ]);
    assert_eq!(status, 403);
    assert!(!sb
        .read("Projects/app/.braids/PROJECT.md")
        .contains("paused"));
    // With the token, another user may act (the token is the person's to hand out).
    let header = format!("x-braids-token: {}", s.token);
    let (status, _) = curl_as_nobody(&["-H", &header, &format!("{}/api/v1/state", s.base)]);
    assert_eq!(status, 200);
}

/// Reads from `conn` until it is closed; the seconds that took, or `None` if it stayed open
/// for `within`.
fn closed_within(conn: &mut std::net::TcpStream, within: Duration) -> Option<f64> {
    let start = std::time::Instant::now();
    conn.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 4096];
    while start.elapsed() < within {
        match std::io::Read::read(conn, &mut buf) {
            Ok(0) => return Some(start.elapsed().as_secs_f64()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return Some(start.elapsed().as_secs_f64()),
        }
    }
    None
}

#[test]
fn c11_4_a_slow_client_is_cut_off_and_connections_and_streams_are_capped() {
    let sb = Install::new().build();
    sb.new_project("app").beads(1).create();
    sb.config("[serve]\nheader_timeout = \"3s\"\n");
    let mut s = sb.serve();
    let addr = s.base.trim_start_matches("http://").to_string();
    let connect = || std::net::TcpStream::connect(&addr).unwrap();
    let send =
        |c: &mut std::net::TcpStream, text: &str| std::io::Write::write_all(c, text.as_bytes());

    // Slowloris: a header line every half second never finishes the request; the server
    // closes the connection at the header timeout instead of waiting for ever.
    let mut slow = connect();
    send(&mut slow, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    let start = std::time::Instant::now();
    let mut cut = false;
    while start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        if send(&mut slow, "X-Slow: yes\r\n").is_err() {
            cut = true;
            break;
        }
        slow.set_nonblocking(true).unwrap();
        let mut b = [0u8; 64];
        let read = std::io::Read::read(&mut slow, &mut b);
        slow.set_nonblocking(false).unwrap();
        if matches!(read, Ok(0)) || matches!(read, Ok(n) if n > 0) {
            cut = true;
            break;
        }
    }
    let took = start.elapsed();
    assert!(cut, "a slow client was still connected after {took:?}");
    assert!(
        took >= Duration::from_secs(2),
        "cut off before its header timeout: {took:?}"
    );
    // A client that connects and sends nothing is closed too.
    let mut silent = connect();
    let took = closed_within(&mut silent, Duration::from_secs(60));
    assert!(
        took.is_some(),
        "a silent connection stayed open for a minute"
    );
    assert!(s.stop(Duration::from_secs(30)));

    // A request whose body stalls ends at the idle timeout, with a 408.
    sb.config("[serve]\nheader_timeout = \"10m\"\nidle_timeout = \"3s\"\n");
    let mut s = sb.serve();
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut stalled = std::net::TcpStream::connect(&addr).unwrap();
    send(
        &mut stalled,
        &format!("POST /api/v1/projects/app/pause HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Length: 100\r\n\r\n{{", s.token),
    )
    .unwrap();
    let mut text = String::new();
    stalled
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let _ = std::io::Read::read_to_string(&mut stalled, &mut text);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(!sb
        .read("Projects/app/.braids/PROJECT.md")
        .contains("paused"));
    assert!(s.stop(Duration::from_secs(30)));

    // The caps, with a header timeout no test machine reaches.
    sb.config("[serve]\nheader_timeout = \"10m\"\nmax_connections = 4\nmax_event_streams = 1\n");
    let s = sb.serve();
    let addr = s.base.trim_start_matches("http://").to_string();
    let connect = || std::net::TcpStream::connect(&addr).unwrap();
    // The connection cap: with four held open, a fifth is answered 503 and closed.
    let held: Vec<_> = (0..4)
        .map(|_| {
            let mut c = connect();
            send(&mut c, "GET /api/v1/events HTTP/1.1\r\n").unwrap();
            c
        })
        .collect();
    let mut fifth = connect();
    let mut text = String::new();
    fifth
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    std::io::Read::read_to_string(&mut fifth, &mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("max_connections"), "{text}");
    drop(held);
    // Once they go, the server answers again.
    wait_for("connections taken again", Duration::from_secs(30), || {
        (s.get("/api/v1/state").status == 200).then_some(())
    });

    // The event-stream cap: the second client is refused while the first listens.
    let stream_request = format!(
        "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
        s.token
    );
    let mut first = connect();
    send(&mut first, &stream_request).unwrap();
    let mut head = [0u8; 12];
    std::io::Read::read_exact(&mut first, &mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let r = s.get("/api/v1/events");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.contains("max_event_streams"), "{}", r.body);
    drop(first);
    // Its slot frees when it goes (the server notices at its next keep-alive write).
    let again = wait_for(
        "the event-stream slot back",
        Duration::from_secs(60),
        || {
            let mut c = connect();
            send(&mut c, &stream_request).unwrap();
            let mut head = [0u8; 12];
            let ok =
                std::io::Read::read_exact(&mut c, &mut head).is_ok() && &head == b"HTTP/1.1 200";
            ok.then_some(c)
        },
    );
    drop(again);
}

/// The CSRF value in a page's forms.
fn csrf_of(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no form with a csrf value in {page}"));
    let rest = &page[at + "name=\"csrf\" value=\"".len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// An agent on the machine can fetch every page: without the token or a login it learns
/// neither the token nor anything of the beads, and cannot act. The person logs in with a
/// one-time link; the cookie it sets is the browser's credential, with a CSRF check on actions.
#[test]
fn c11_9_the_dashboard_never_hands_out_the_token_and_logs_in_once() {
    let sb = install(0);
    let app = sb
        .new_project("app")
        .br()
        .titled(&["Secret plan for the parser"])
        .create();
    let bead = app.beads[0].as_str();
    let s = sb.serve();
    for path in [
        "/",
        "/fragment",
        "/status",
        &format!("/beads/{bead}"),
        "/api/v1/state",
    ] {
        let r = s.get_anon(path);
        assert_eq!(r.status, 401, "{path}: {r:?}");
        assert!(!r.body.contains(&s.token), "{path} carries the token");
        assert!(
            !r.body.contains("Secret plan"),
            "{path} shows a bead: {}",
            r.body
        );
        assert!(!r.body.contains(bead), "{path} shows a bead: {}", r.body);
    }
    assert!(s.get_anon("/").body.contains("braids serve --login"));
    let approve = format!("/api/v1/beads/{bead}/approve");
    assert_eq!(s.post(&approve, None, serde_json::json!({})).status, 401);
    assert_eq!(s.post_form(&approve, &[("csrf", "x")]).status, 401);
    assert_eq!(s.get_anon("/static/app.js").status, 200);

    // The link works once: a cookie only scripts of no page can read, then never again.
    let (status, cookie, to) = s.visit_login(&s.login);
    assert_eq!((status, to.as_deref()), (303, Some("/")), "{cookie:?}");
    let cookie = cookie.unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    assert!(!cookie.contains(&s.token), "the session is not the token");
    let (again, set, _) = s.visit_login(&s.login);
    assert_eq!((again, set), (401, None), "a used link");
    let (forged, set, _) = s.visit_login(&format!("{}/login?once=00", s.base));
    assert_eq!((forged, set), (401, None));
    let cookie = cookie.split(';').next().unwrap().to_string();

    // With the cookie: the pages and the API, never the token.
    let page = s.with_cookie("GET", "/", &cookie, &[], None);
    assert_eq!(page.status, 200, "{page:?}");
    assert!(!page.body.contains(&s.token));
    let one = s.with_cookie("GET", &format!("/beads/{bead}"), &cookie, &[], None);
    assert!(one.body.contains("Secret plan"), "{one:?}");
    let csrf = csrf_of(&page.body);
    assert_eq!(
        s.with_cookie("GET", "/api/v1/state", &cookie, &[], None)
            .status,
        200
    );
    // An action needs the page's proof, and never comes from another site.
    let pause = "/api/v1/projects/app/pause";
    let r = s.with_cookie("POST", pause, &cookie, &[], None);
    assert_eq!(r.status, 403, "{r:?}");
    let r = s.with_cookie("POST", pause, &cookie, &[], Some(&[("csrf", "not-it")]));
    assert_eq!(r.status, 403, "{r:?}");
    let r = s.with_cookie(
        "POST",
        pause,
        &cookie,
        &[("X-Braids-Request", "1"), ("Sec-Fetch-Site", "cross-site")],
        None,
    );
    assert_eq!(r.status, 403, "{r:?}");
    assert!(!sb
        .read("Projects/app/.braids/PROJECT.md")
        .contains("paused"));
    let r = s.with_cookie("POST", pause, &cookie, &[("X-Braids-Request", "1")], None);
    assert_eq!(r.json()["to"], "paused", "{r:?}");
    let r = s.with_cookie(
        "POST",
        "/api/v1/projects/app/resume",
        &cookie,
        &[],
        Some(&[("csrf", &csrf)]),
    );
    assert_eq!(r.status, 303, "{r:?}");
    // A session cannot make login links; the token's holder can, from the command line.
    let r = s.with_cookie(
        "POST",
        "/api/v1/login",
        &cookie,
        &[("X-Braids-Request", "1")],
        None,
    );
    assert_eq!(r.status, 403, "{r:?}");
    let port = s.base.rsplit_once(':').unwrap().1;
    let fresh = sb.ok(&["serve", "--login", "--listen", &format!("127.0.0.1:{port}")]);
    let fresh = fresh.trim();
    assert!(
        fresh.starts_with(&format!("{}/login?once=", s.base)),
        "{fresh}"
    );
    assert_eq!(s.visit_login(fresh).0, 303);
    assert_eq!(s.visit_login(fresh).0, 401);
    // Scripts: the token in `Authorization: Bearer`.
    assert_eq!(s.get("/api/v1/state").status, 200);
}
