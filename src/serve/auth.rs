//! Who may act: scripts and the CLI carry the server's token (`Authorization: Bearer`, or the
//! older `X-Braids-Token` header), compared in constant time; a browser carries the session a
//! one-time login link gave it (`login.rs`). The token is made on first start, 32 random bytes
//! as hex in a file only its owner can read, and no page ever carries it.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// The older header API clients send the token in (`Authorization: Bearer` is the other).
pub const HEADER: &str = "x-braids-token";
/// The header the dashboard's own script sets on its actions: a page of another site cannot
/// send it without a CORS preflight, which braids never allows.
pub const REQUEST_HEADER: &str = "x-braids-request";

/// Reads the token at `path`; when `create` and the file is missing, makes one (mode 0600).
pub fn load(path: &Path, create: bool) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_string()),
        Ok(_) => bail!(
            "{} is empty; put a long random token in it (or delete it and let `braids serve` make one)",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read the token file {}", path.display())),
    }
    let token = random_hex(32)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(token)
}

/// `n` random bytes as hex.
pub fn random_hex(n: usize) -> Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for a token")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The token a request carries: `Authorization: Bearer <token>` or `X-Braids-Token`.
pub fn given(headers: &axum::http::HeaderMap) -> Option<&str> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    text(axum::http::header::AUTHORIZATION)
        .and_then(|a| a.strip_prefix("Bearer "))
        .or_else(|| text(axum::http::HeaderName::from_static(HEADER)))
        .map(str::trim)
}

/// Whether `given` is the token, in time that does not depend on where they differ.
pub fn matches(token: &str, given: &str) -> bool {
    let (a, b) = (token.as_bytes(), given.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a `Host` header names this machine's loopback (`localhost`, `127.0.0.1`, `[::1]`,
/// with any port).
pub fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The user owning the connection from `peer` on this machine, from the kernel's socket
/// tables (`/proc/net/tcp` and `tcp6`: the client's socket is the one whose local address is
/// `peer`); `None` when it cannot be found.
pub fn peer_uid(peer: SocketAddr) -> Option<u32> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .find_map(|table| {
            let text = std::fs::read_to_string(table).ok()?;
            text.lines().skip(1).find_map(|line| {
                let cols: Vec<&str> = line.split_whitespace().collect();
                // Established only: a closed connection lingering in TIME_WAIT may have had
                // the same address, and belongs to nobody.
                (socket_addr(cols.get(1)?)? == peer && cols.get(3) == Some(&"01"))
                    .then(|| cols.get(7)?.parse().ok())
                    .flatten()
            })
        })
}

/// An address as `/proc/net/tcp*` prints it: the address's bytes as native-endian 32-bit hex
/// words, then `:` and the port in hex.
fn socket_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for word in ip.as_bytes().chunks(8) {
        let w = u32::from_str_radix(std::str::from_utf8(word).ok()?, 16).ok()?;
        bytes.extend(w.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => {
            let v6 = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether the connection from `peer` is this server's own user's: on loopback, anyone else
/// on the machine could otherwise read the dashboard and take the token from a page.
pub fn owner_connects(peer: SocketAddr) -> bool {
    let peer = match peer.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(peer, |v4| SocketAddr::new(IpAddr::V4(v4), peer.port())),
        IpAddr::V4(_) => peer,
    };
    peer_uid(peer) == Some(nix::unistd::getuid().as_raw())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_of_a_loopback_connection_is_found_in_the_socket_table() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_conn, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(peer_uid(peer), Some(nix::unistd::getuid().as_raw()));
        assert!(owner_connects(peer));
        assert_eq!(
            socket_addr("0100007F:1F90"),
            Some("127.0.0.1:8080".parse().unwrap())
        );
    }

    #[test]
    fn c9_5_tokens_are_made_private_and_compared_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("serve.token");
        assert!(load(&p, false).is_err(), "not made unless asked");
        let t = load(&p, true).unwrap();
        assert_eq!(t.len(), 64);
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load(&p, true).unwrap(), t, "kept");
        assert!(matches(&t, &t));
        assert!(!matches(&t, &t[..63]));
        assert!(!matches(&t, ""));
        std::fs::write(&p, "\n").unwrap();
        assert!(load(&p, true).unwrap_err().to_string().contains("is empty"));
    }

    #[test]
    fn c9_5_only_loopback_names_are_loopback() {
        for h in [
            "localhost",
            "localhost:7878",
            "127.0.0.1:80",
            "[::1]:7878",
            "127.0.0.2",
        ] {
            assert!(loopback_host(h), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:7878",
            "10.0.0.1:7878",
            "localhost.evil.example",
            "",
        ] {
            assert!(!loopback_host(h), "{h}");
        }
    }
}
