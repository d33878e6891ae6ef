//! A bounded load test of `braids serve`, on loopback: 200 server-sent-event clients and 500
//! API requests a second for 60 s, with a tick every 5 s whose workers write events. No request
//! may fail and every stream client must see events; the latencies (p50, p99, max) and the
//! server's memory are printed for the performance notes.
//!
//! Long, so opt-in: `scripts/load` (or `cargo test --features failpoints --test integration
//! -- --ignored serve_load`); `BRAIDS_LOAD_SECS` shortens it.

use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::serve::agent;
use crate::support::Install;

const STREAMS: usize = 200;
const RATE: u64 = 500;
const SENDERS: u64 = 10;

fn rss_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[test]
#[ignore = "a 60 s load test: scripts/load runs it"]
fn serve_under_load() {
    let secs: u64 = std::env::var("BRAIDS_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let sb = Install::new().build();
    let agent_script = sb.script(
        "bin/agent",
        r#"mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\ncost_usd: 0.01\n' > "$BRAIDS_RESULT_FILE"
"#,
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n",
        agent_script.display().to_string()
    ));
    for slug in ["app", "lib", "web"] {
        sb.new_project(slug).br().beads(40).max_workers(2).create();
    }
    let s = sb.serve();
    let base = s.base.clone();
    let bearer = format!("Bearer {}", s.token);
    let addr = base.trim_start_matches("http://").to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let rss_start = rss_kib(s.pid(), "VmRSS:");

    // The stream clients: each counts the events it is sent.
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..STREAMS).map(|_| AtomicU64::new(0)).collect());
    let mut threads = Vec::new();
    for i in 0..STREAMS {
        let (addr, seen, stop) = (addr.clone(), Arc::clone(&seen), Arc::clone(&stop));
        let bearer = bearer.clone();
        threads.push(std::thread::spawn(move || {
            let mut conn = std::net::TcpStream::connect(&addr).unwrap();
            conn.write_all(
                format!("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {bearer}\r\n\r\n")
                    .as_bytes(),
            )
            .unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut r = BufReader::new(conn);
            let mut line = String::new();
            while !stop.load(Ordering::SeqCst) {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) => panic!("stream {i} was closed by the server"),
                    Ok(_) if line.starts_with("data: ") => {
                        seen[i].fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => panic!("stream {i}: {e}"),
                }
            }
        }));
    }

    // A tick every 5 s, as a schedule would run it.
    let ticker = {
        let stop = Arc::clone(&stop);
        let mut tick = sb.command(&["tick", "--force"]);
        tick.stdout(std::process::Stdio::null());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let st = tick.status().unwrap();
                assert!(st.success(), "tick failed: {st:?}");
                n += 1;
                let until = Instant::now() + Duration::from_secs(5);
                while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            n
        })
    };

    // The API load: RATE requests a second, open loop, spread over SENDERS threads.
    let latencies = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let paths = [
        "/api/v1/state",
        "/api/v1/projects/app",
        "/fragment",
        "/api/v1/state",
        "/",
    ];
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let mut senders = Vec::new();
    for t in 0..SENDERS {
        let (base, latencies, errors) = (base.clone(), Arc::clone(&latencies), Arc::clone(&errors));
        let bearer = bearer.clone();
        senders.push(std::thread::spawn(move || {
            let http = agent();
            let every = Duration::from_micros(1_000_000 * SENDERS / RATE);
            let mut next =
                start + every * u32::try_from(t).unwrap() / u32::try_from(SENDERS).unwrap();
            let mut k = 0usize;
            while next < end {
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let path = paths[(k + usize::try_from(t).unwrap()) % paths.len()];
                let sent = Instant::now();
                match http
                    .get(format!("{base}{path}"))
                    .header("Authorization", &bearer)
                    .call()
                {
                    Ok(mut r) if r.status() == 200 => {
                        let _ = r.body_mut().read_to_vec();
                        latencies.lock().unwrap().push(sent.elapsed());
                    }
                    Ok(r) => errors
                        .lock()
                        .unwrap()
                        .push(format!("{path}: {}", r.status())),
                    Err(e) => errors.lock().unwrap().push(format!("{path}: {e}")),
                }
                k += 1;
                next += every;
            }
        }));
    }
    for h in senders {
        h.join().unwrap();
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::SeqCst);
    let ticks = ticker.join().unwrap();
    for h in threads {
        h.join().unwrap();
    }
    let rss_end = rss_kib(s.pid(), "VmRSS:");
    let hwm = rss_kib(s.pid(), "VmHWM:");
    let errors = errors.lock().unwrap();
    let mut lat = latencies.lock().unwrap().clone();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    let events: Vec<u64> = seen.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    println!(
        "serve load: {} requests in {:.1} s ({:.0}/s), {} errors; latency p50 {:?}, p99 {:?}, max {:?}; \
         {STREAMS} streams saw {}..{} events each; {ticks} ticks; server RSS {} KiB at start, {} KiB at end, peak {} KiB",
        lat.len(),
        elapsed.as_secs_f64(),
        lat.len() as f64 / elapsed.as_secs_f64(),
        errors.len(),
        pct(0.50),
        pct(0.99),
        lat.last().unwrap(),
        events.iter().min().unwrap(),
        events.iter().max().unwrap(),
        rss_start,
        rss_end,
        hwm
    );
    assert!(
        errors.is_empty(),
        "{} errors, first: {:?}",
        errors.len(),
        errors.first()
    );
    assert!(
        lat.len() as u64 >= RATE * secs * 95 / 100,
        "only {} requests were answered",
        lat.len()
    );
    assert!(
        events.iter().all(|n| *n > 0),
        "a stream saw no event: {events:?}"
    );
}
