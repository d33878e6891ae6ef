//! What braids and tmux say to each other: the pane's wrapper script, the `new-session`
//! command sequence, the `list-sessions` format and its rows, session ids, and the escaping
//! that keeps arguments and paths intact through tmux's own parsing (see the parent module).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::session::SpawnSpec;
use crate::system::proc::Output;

/// Runs in the pane: `$1` message file, `$2` log, `$3` working directory, then the worker argv.
/// The worker's output goes through `tee` to the log and to the pane, so a person who attaches
/// sees it live; the log still has every byte. Its exit status is the worker's (carried past the
/// pipe on descriptor 4), 126 when the directory is missing, 127 when the program is.
const WRAPPER: &str = "cd -- \"$3\" 2>>\"$2\" || exit 126\nm=$1 l=$2\nshift 3\nexec 3>&1\n\
s=$( { { \"$@\" <\"$m\" 2>&1 3>&- 4>&-; echo $? >&4; } | tee -a \"$l\" >&3; } 4>&1 )\nexit \"$s\"";

/// One row per session; every field is free of tabs and newlines (`@braids_log` is encoded).
pub(super) const LIST_FORMAT: &str = "#{session_id}\t#{session_name}\t#{session_created}\t#{pane_pid}\t#{pane_dead}\t#{@braids_label}\t#{@braids_started}\t#{@braids_log}";

/// One line of `list-sessions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub session_id: String,
    pub name: String,
    pub created: i64,
    pub pane_pid: u32,
    pub pane_dead: bool,
    pub label: String,
    pub started: String,
    pub log: String,
}

impl Row {
    pub fn parse(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 8 || !f[0].starts_with('$') {
            return None;
        }
        Some(Row {
            session_id: f[0].to_string(),
            name: f[1].to_string(),
            created: f[2].parse().ok()?,
            pane_pid: f[3].parse().ok()?,
            pane_dead: match f[4] {
                "0" => false,
                "1" => true,
                _ => return None,
            },
            label: f[5].to_string(),
            started: f[6].to_string(),
            log: f[7].to_string(),
        })
    }

    pub fn location(&self) -> String {
        format!("tmux session {} ({})", self.name, self.session_id)
    }
}

/// Whether a failed call only means that no server runs on the socket (so no session exists).
/// Anything else, a permission problem say, is an error: an unreachable server may well have
/// workers on it.
pub(super) fn no_server(out: &Output) -> bool {
    let e = &out.stderr;
    e.contains("no server running")
        || (e.contains("error connecting to")
            && (e.contains("No such file or directory") || e.contains("Connection refused")))
}

/// The directory under which tmux keeps its `tmux-<uid>` socket directory, given
/// `$TMUX_TMPDIR`: that directory when it is set and resolves (tmux takes its real path), and
/// `/tmp` otherwise, as tmux's own `"$TMUX_TMPDIR:/tmp/"` search does.
pub(super) fn socket_dir(tmux_tmpdir: Option<OsString>) -> PathBuf {
    tmux_tmpdir
        .filter(|d| !d.is_empty())
        .and_then(|d| std::fs::canonicalize(d).ok())
        .unwrap_or_else(|| std::fs::canonicalize("/tmp").unwrap_or_else(|_| "/tmp".into()))
}

/// Whether a tmux server may be listening on `socket`, found out with one non-blocking
/// `connect` instead of a tmux process. False only for a certain "no server": no such file, or
/// nothing listening (tmux leaves its socket behind when the server exits, so a socket file
/// alone proves nothing). Anything else (a server that answers, a full backlog, a permission
/// problem, a path too long to connect to) may hide a server, so tmux is asked.
pub(super) fn server_may_listen(socket: &Path) -> bool {
    use nix::errno::Errno;
    use nix::sys::socket::{connect, socket as open_socket, AddressFamily, SockFlag, SockType};
    use std::os::fd::AsRawFd;
    let Ok(addr) = nix::sys::socket::UnixAddr::new(socket) else {
        return true;
    };
    let Ok(fd) = open_socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    ) else {
        return true;
    };
    // The connection, if made, is closed at once with `fd`; the server drops the client.
    !matches!(
        connect(fd.as_raw_fd(), &addr),
        Err(Errno::ENOENT | Errno::ECONNREFUSED | Errno::ENOTDIR)
    )
}

/// `$n/pid:starttime`.
pub(super) fn parse_id(id: &str) -> Option<(String, u32, u64)> {
    let (sid, rest) = id.split_once('/')?;
    let (pid, start) = rest.split_once(':')?;
    if !sid.starts_with('$') {
        return None;
    }
    Some((sid.to_string(), pid.parse().ok()?, start.parse().ok()?))
}

/// Protects an argument from tmux's own argv parsing, which takes any argument ending in `;`
/// as a command separator (and `\;` at the end as a literal `;`): a final `;` becomes `\;`.
/// Nothing else in an argument is interpreted.
pub fn escape_arg(arg: &OsStr) -> OsString {
    let b = arg.as_bytes();
    if b.last() == Some(&b';') {
        let mut v = b[..b.len() - 1].to_vec();
        v.extend_from_slice(b"\\;");
        OsString::from_vec(v)
    } else {
        arg.to_os_string()
    }
}

/// `%XX` for control bytes, non-ASCII bytes and `%`, so any path fits one tab-separated field.
pub(super) fn encode_path(p: &Path) -> String {
    let mut s = String::new();
    for &b in p.as_os_str().as_bytes() {
        if !(0x20..0x7f).contains(&b) || b == b'%' {
            s.push_str(&format!("%{b:02X}"));
        } else {
            s.push(b as char);
        }
    }
    s
}

/// The inverse of [`encode_path`]; `None` for a malformed escape.
pub(super) fn decode_path(s: &str) -> Option<PathBuf> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

/// The `new-session` command sequence that starts a worker under [`WRAPPER`] and labels its
/// session, in one tmux call so no unlabelled worker can be observed. `files` are the message
/// file, the log and the working directory, absolute.
pub(super) fn new_session_args(
    name: &str,
    spec: &SpawnSpec,
    files: [&Path; 3],
    started: &str,
) -> Vec<OsString> {
    let label = spec.label.to_string();
    let target = format!("={name}:");
    let mut args: Vec<OsString> = ["new-session", "-d", "-s", name, "-P", "-F"]
        .into_iter()
        .map(OsString::from)
        .collect();
    args.push("#{session_id}\t#{pane_pid}".into());
    for (k, v) in &spec.env {
        let mut kv = k.clone();
        kv.push("=");
        kv.push(v);
        args.extend(["-e".into(), escape_arg(&kv)]);
    }
    args.extend(["--", "/bin/sh", "-c", WRAPPER, "braids-worker"].map(OsString::from));
    for f in files {
        args.push(escape_arg(f.as_os_str()));
    }
    args.extend(spec.argv.iter().map(|a| escape_arg(a)));
    for option in [
        vec!["set-option", "-w", "-t", &target, "remain-on-exit", "on"],
        vec!["set-option", "-t", &target, "@braids_label", &label],
        vec!["set-option", "-t", &target, "@braids_started", started],
    ] {
        args.push(";".into());
        args.extend(option.into_iter().map(|a| escape_arg(OsStr::new(a))));
    }
    args.push(";".into());
    args.extend(["set-option", "-t", &target, "@braids_log"].map(OsString::from));
    args.push(escape_arg(OsStr::new(&encode_path(files[1]))));
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_undoes_tmux_separator_parsing() {
        // What tmux's cmd_parse_from_arguments does to one argument.
        fn tmux_reads(arg: &[u8]) -> Option<Vec<u8>> {
            let mut v = arg.to_vec();
            if v.last() == Some(&b';') {
                v.pop();
                match v.last_mut() {
                    Some(b) if *b == b'\\' => *b = b';',
                    _ => return None, // a separator
                }
            }
            Some(v)
        }
        for arg in [
            ";", "a;", "a\\;", "a\\\\;", ";;", "\\", "plain", "", "a;b", "#{x}", "\\;\\;",
        ] {
            let escaped = escape_arg(OsStr::new(arg));
            assert_eq!(
                tmux_reads(escaped.as_bytes()).as_deref(),
                Some(arg.as_bytes()),
                "{arg:?}"
            );
        }
    }

    #[test]
    fn log_paths_survive_the_list_format() {
        for p in ["/tmp/a b/log", "/x/%41\t\n/é", "/plain"] {
            let enc = encode_path(Path::new(p));
            assert!(
                !enc.contains('\t') && !enc.contains('\n') && enc.is_ascii(),
                "{enc}"
            );
            assert_eq!(decode_path(&enc), Some(PathBuf::from(p)));
        }
        assert_eq!(decode_path("%4"), None);
    }

    #[test]
    fn the_socket_directory_is_where_tmux_looks() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let tmp = std::fs::canonicalize("/tmp").unwrap();
        assert_eq!(socket_dir(Some(dir.path().into())), real);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(
            socket_dir(Some(link.into())),
            real,
            "resolved, as tmux does"
        );
        assert_eq!(socket_dir(None), tmp);
        assert_eq!(socket_dir(Some("".into())), tmp);
        assert_eq!(socket_dir(Some(dir.path().join("missing").into())), tmp);
    }

    #[test]
    fn a_server_is_seen_listening_without_starting_tmux() {
        use std::os::unix::net::UnixListener;
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("braids");
        assert!(!server_may_listen(&socket), "no such file");
        assert!(!server_may_listen(&dir.path().join("file/braids")));
        let listener = UnixListener::bind(&socket).unwrap();
        assert!(server_may_listen(&socket), "a server listens");
        drop(listener);
        assert!(socket.exists());
        assert!(!server_may_listen(&socket), "a socket left behind");
        std::fs::remove_file(&socket).unwrap();
        std::fs::write(&socket, "").unwrap();
        assert!(!server_may_listen(&socket), "not a socket");
    }

    #[test]
    fn rows_and_ids() {
        let row = Row::parse("$3\ta_b\t1700000000\t4242\t0\tproject:a:b\t2026-01-01T00:00:00Z\t/l")
            .unwrap();
        assert_eq!(
            (row.pane_pid, row.pane_dead, row.label.as_str()),
            (4242, false, "project:a:b")
        );
        assert!(Row::parse("$3\ta_b\t1\t4242\t0\tproject:a:b").is_none());
        assert!(Row::parse("$3\ta_b\t1\tx\t0\tl\ts\tlog").is_none());
        assert_eq!(parse_id("$3/4242:99"), Some(("$3".into(), 4242, 99)));
        assert_eq!(parse_id("4242:99"), None);
    }

    #[test]
    fn new_session_is_one_labelled_command_sequence() {
        use crate::model::{BeadId, SessionLabel, SpawnMessage};
        let bead = BeadId::new("a-1").unwrap();
        let spec = SpawnSpec {
            label: SessionLabel::new("a", bead.clone()).unwrap(),
            message: SpawnMessage::new("/p".into(), bead, 1, "").unwrap(),
            argv: vec!["w".into(), "x;".into()],
            cwd: "/c".into(),
            env: vec![("K".into(), "v;".into())],
            log: "/l".into(),
            placement: Default::default(),
        };
        let files = [Path::new("/m"), Path::new("/l%"), Path::new("/c")];
        let args = new_session_args("a_a-1", &spec, files, "T");
        let t = "=a_a-1:";
        #[rustfmt::skip]
        let expected = [
            "new-session", "-d", "-s", "a_a-1", "-P", "-F", "#{session_id}\t#{pane_pid}",
            "-e", "K=v\\;", "--", "/bin/sh", "-c", WRAPPER, "braids-worker", "/m", "/l%", "/c",
            "w", "x\\;",
            ";", "set-option", "-w", "-t", t, "remain-on-exit", "on",
            ";", "set-option", "-t", t, "@braids_label", "project:a:a-1",
            ";", "set-option", "-t", t, "@braids_started", "T",
            ";", "set-option", "-t", t, "@braids_log", "/l%25",
        ];
        assert_eq!(args, expected.map(OsString::from));
    }
}
