//! The user's crontab: one tagged line per installation, edited as text.
//!
//! The editing is pure ([`upsert`], [`remove`], [`find`]) over the text `crontab -l` printed:
//! braids' own line is recognised by its trailing tag, `# braids:tick <braids dir>`, and every
//! other byte is kept as it was — comments, `VAR=value` lines, other jobs, blank lines, CRLFs,
//! another installation's braids line. The one byte braids may add is a final newline, because
//! `crontab -` refuses a file without one.
//!
//! The crontab is read with `crontab -l` (no crontab is an empty one) and written with
//! `crontab -` on stdin: argv only, never a shell, never a temp file of ours.

use std::time::Duration;

use anyhow::{bail, Result};

use crate::system::proc::Invocation;

use super::TickCommand;

/// How the tag comment starts; the installation's directory follows it.
pub const TAG_PREFIX: &str = "# braids:tick";

/// Escapes for cron, which reads `%` as a line break and `\` as an escape before the shell
/// sees the command.
pub fn cron_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('%', "\\%")
}

/// The tag that marks this installation's line.
pub fn tag(braids_dir: &str) -> String {
    cron_escape(&format!("{TAG_PREFIX} {braids_dir}"))
}

/// The tag of this installation's `braids supervise --once` line.
pub fn supervise_tag(braids_dir: &str) -> String {
    cron_escape(&format!("# braids:supervise {braids_dir}"))
}

fn shell_quote(s: &str) -> Result<String> {
    match shlex::try_quote(s) {
        Ok(q) => Ok(q.into_owned()),
        Err(_) => bail!("`{s}` cannot be quoted for a crontab line (it contains a NUL byte)"),
    }
}

/// The crontab line: schedule, environment, the command with its output appended to the log,
/// and the tag.
///
/// `*/5 * * * * HOME=/home/u PATH=/usr/bin:/bin /usr/local/bin/braids tick >/dev/null 2>>/home/u/.openclaw/braids/logs/tick.log # braids:tick /home/u/.openclaw/braids`
///
/// stdout goes nowhere: the run's one log line goes to stderr, so the log gets each run once.
pub fn entry_line(expr: &str, cmd: &TickCommand, tag: &str) -> Result<String> {
    let mut words: Vec<String> = Vec::new();
    for (k, v) in &cmd.env {
        words.push(format!("{k}={}", shell_quote(v)?));
    }
    for a in &cmd.argv {
        words.push(shell_quote(a)?);
    }
    let log = shell_quote(&super::path_str(&cmd.log, "the log path")?)?;
    words.push(">/dev/null".into());
    words.push(format!("2>>{log}"));
    Ok(format!("{expr} {} {tag}", cron_escape(&words.join(" "))))
}

/// Whether a line (without its terminator) is the one `tag` marks: a job, not a comment,
/// ending in exactly the tag.
fn is_ours(line: &str, tag: &str) -> bool {
    let t = line.trim_end();
    if t.trim_start().starts_with('#') {
        return false;
    }
    match t.strip_suffix(tag) {
        Some(before) => before.ends_with([' ', '\t']),
        None => false,
    }
}

/// The lines `tag` marks (normally none or one).
pub fn find<'a>(crontab: &'a str, tag: &str) -> Vec<&'a str> {
    crontab
        .split_inclusive('\n')
        .map(|l| l.trim_end_matches(['\n', '\r']))
        .filter(|l| is_ours(l, tag))
        .collect()
}

/// Jobs that run `braids … tick` without a tag: set up by hand or by something else. braids
/// leaves them alone and points them out, since they would tick a second time.
pub fn untagged_ticks(crontab: &str) -> Vec<&str> {
    crontab
        .split_inclusive('\n')
        .map(|l| l.trim_end_matches(['\n', '\r']))
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with('#')
                && !t.contains(TAG_PREFIX)
                && t.split_whitespace()
                    .any(|w| w == "braids" || w.ends_with("/braids"))
                && t.split_whitespace().any(|w| w == "tick")
        })
        .collect()
}

/// The crontab with `line` in place of this installation's line: the first tagged line is
/// replaced where it stands, later duplicates are dropped, and with none the line is appended.
/// Idempotent; every other line is kept byte for byte.
pub fn upsert(crontab: &str, line: &str, tag: &str) -> String {
    let mut out = String::with_capacity(crontab.len() + line.len() + 1);
    let mut placed = false;
    for raw in crontab.split_inclusive('\n') {
        let content = raw.trim_end_matches(['\n', '\r']);
        if is_ours(content, tag) {
            if !placed {
                out.push_str(line);
                // Keep the line's own terminator (`\r\n` stays `\r\n`).
                let term = &raw[content.len()..];
                out.push_str(if term.is_empty() { "\n" } else { term });
                placed = true;
            }
        } else {
            out.push_str(raw);
        }
    }
    if !placed {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The crontab without this installation's line(s), and how many were removed. Unchanged text
/// when there were none.
pub fn remove(crontab: &str, tag: &str) -> (String, usize) {
    let mut out = String::with_capacity(crontab.len());
    let mut n = 0;
    for raw in crontab.split_inclusive('\n') {
        if is_ours(raw.trim_end_matches(['\n', '\r']), tag) {
            n += 1;
        } else {
            out.push_str(raw);
        }
    }
    if n == 0 {
        return (crontab.to_string(), 0);
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    (out, n)
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// `crontab -l`; no crontab yet is an empty one.
pub fn read() -> Result<String> {
    read_if_installed()?.ok_or_else(|| anyhow::anyhow!("{NOT_INSTALLED}"))
}

/// Why nothing can be installed on a machine without `crontab`.
pub const NOT_INSTALLED: &str = "`crontab` is not installed; install cron (Debian/Ubuntu: `apt-get install cron`), use a systemd timer (--systemd), or run `braids daemon`";

/// [`read`], with `None` when `crontab` is not installed (a dry run still shows its line).
pub fn read_if_installed() -> Result<Option<String>> {
    let out = match Invocation::new(["crontab", "-l"]).timeout(TIMEOUT).run() {
        Ok(o) => o,
        Err(crate::system::proc::RunError::NotFound { .. }) => return Ok(None),
        Err(e) => bail!("cannot run `crontab -l`: {e}"),
    };
    if out.success() {
        return Ok(Some(out.stdout));
    }
    if out.stderr.to_ascii_lowercase().contains("no crontab") {
        return Ok(Some(String::new()));
    }
    bail!(
        "`crontab -l` failed ({}): {}",
        out.status_text(),
        out.stderr.trim()
    )
}

/// `crontab -` with the new text on stdin.
pub fn write(text: &str) -> Result<()> {
    let out = Invocation::new(["crontab", "-"])
        .stdin(text.as_bytes().to_vec())
        .timeout(TIMEOUT)
        .run()
        .map_err(|e| anyhow::anyhow!("cannot run `crontab -`: {e}"))?;
    if !out.success() {
        bail!(
            "`crontab -` refused the new crontab ({}): {}",
            out.status_text(),
            format!("{}{}", out.stdout, out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const TAG_A: &str = "# braids:tick /home/u/.openclaw/braids";

    /// A crontab as people have them: a header comment, env lines, blank lines, other jobs, a
    /// job mentioning braids in a comment, another installation's braids line, an older braids
    /// line of this installation, and no newline at the end.
    const MESSY: &str = "# m h  dom mon dow   command\nMAILTO=ops@example.com\nSHELL=/bin/bash\n\n0 3 * * * /usr/bin/backup --all > /dev/null 2>&1\n# */5 * * * * /old/braids tick # braids:tick /home/u/.openclaw/braids\n*/10 * * * * HOME=/srv/other /opt/braids tick >/dev/null 2>>/srv/other/log # braids:tick /srv/other/.openclaw/braids\n*/5 * * * * HOME=/home/u /old/bin/braids tick >> /tmp/old.log 2>&1 # braids:tick /home/u/.openclaw/braids\n@reboot /usr/bin/say-hello\t# trailing tab comment\r\n30 4 1,15 * 5 echo 50\\% done";

    fn lines(s: &str) -> Vec<&str> {
        s.split_inclusive('\n').collect()
    }

    #[test]
    fn upsert_replaces_our_line_in_place_and_keeps_every_other_byte() {
        let new = format!("*/2 * * * * /usr/local/bin/braids tick {TAG_A}");
        let out = upsert(MESSY, &new, TAG_A);
        let before = lines(MESSY);
        let after = lines(&out);
        assert_eq!(before.len(), after.len());
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            if i == 7 {
                assert_eq!(*a, format!("{new}\n"), "our line, replaced where it was");
            } else if i == before.len() - 1 {
                assert_eq!(*a, format!("{b}\n"), "only a final newline is added");
            } else {
                assert_eq!(a, b, "line {i} untouched");
            }
        }
        assert_eq!(find(&out, TAG_A), vec![new.as_str()]);
        // Idempotent.
        assert_eq!(upsert(&out, &new, TAG_A), out);
        // The commented-out line and the other installation's line are not ours.
        assert!(
            out.contains("# */5 * * * * /old/braids tick # braids:tick /home/u/.openclaw/braids\n")
        );
        assert!(out.contains("# braids:tick /srv/other/.openclaw/braids\n"));
    }

    #[test]
    fn upsert_appends_when_absent_and_drops_duplicates() {
        let new = format!("* * * * * b tick {TAG_A}");
        assert_eq!(upsert("", &new, TAG_A), format!("{new}\n"));
        assert_eq!(
            upsert("MAILTO=x\n0 1 * * * job", &new, TAG_A),
            format!("MAILTO=x\n0 1 * * * job\n{new}\n")
        );
        let dup = format!("a\n1 * * * * old {TAG_A}\nb\n2 * * * * older {TAG_A}\nc\n");
        assert_eq!(upsert(&dup, &new, TAG_A), format!("a\n{new}\nb\nc\n"));
        let once = upsert("x\n", &new, TAG_A);
        assert_eq!(upsert(&once, &new, TAG_A), once);
    }

    #[test]
    fn a_longer_tag_with_our_tag_as_suffix_is_not_ours() {
        let other = "* * * * * b tick # braids:tick /x/home/u/.openclaw/braids";
        assert!(find(other, TAG_A).is_empty());
        let glued = format!("* * * * * b tick x{TAG_A}");
        assert!(find(&glued, TAG_A).is_empty());
    }

    #[test]
    fn remove_takes_only_our_lines() {
        let (out, n) = remove(MESSY, TAG_A);
        assert_eq!(n, 1);
        let expected: String = lines(MESSY)
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 7)
            .map(|(_, l)| *l)
            .collect::<String>()
            + "\n";
        assert_eq!(out, expected);
        assert_eq!(remove(&out, TAG_A), (out.clone(), 0));
        // Nothing of ours: the text is returned exactly, final newline or not.
        assert_eq!(remove("0 1 * * * job", TAG_A), ("0 1 * * * job".into(), 0));
        assert_eq!(
            remove(&format!("1 * * * * b {TAG_A}"), TAG_A),
            (String::new(), 1)
        );
    }

    #[test]
    fn untagged_braids_ticks_are_pointed_out() {
        let text = "*/5 * * * * /usr/local/bin/braids tick\n*/5 * * * * braids --log-format json tick >> x 2>&1\n# */5 * * * * braids tick\n0 * * * * braids-backup tick\n*/5 * * * * b tick # braids:tick /a\n";
        assert_eq!(
            untagged_ticks(text),
            vec![
                "*/5 * * * * /usr/local/bin/braids tick",
                "*/5 * * * * braids --log-format json tick >> x 2>&1"
            ]
        );
    }

    #[test]
    fn entry_line_quotes_for_the_shell_and_escapes_for_cron() {
        let cmd = TickCommand {
            argv: vec!["/opt/my apps/braids".into(), "tick".into()],
            env: vec![
                ("HOME".into(), "/home/u 100%".into()),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ],
            log: PathBuf::from("/home/u 100%/.openclaw/braids/logs/tick.log"),
        };
        let t = tag("/home/u 100%/.openclaw/braids");
        let line = entry_line("*/5 * * * *", &cmd, &t).unwrap();
        assert_eq!(
            line,
            "*/5 * * * * HOME='/home/u 100\\%' PATH=/usr/bin:/bin '/opt/my apps/braids' tick >/dev/null 2>>'/home/u 100\\%/.openclaw/braids/logs/tick.log' # braids:tick /home/u 100\\%/.openclaw/braids"
        );
        assert_eq!(find(&line, &t), vec![line.as_str()]);
        assert_eq!(cron_escape("a\\b%c"), "a\\\\b\\%c");
    }
}
