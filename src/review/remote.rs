//! The host and repository a git remote's URL names, for a project without a `Forge:` line:
//! `git@github.com:me/app.git`, `https://gitlab.com/group/sub/app`, `ssh://git@host:2222/me/app`.

/// Where a remote lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// Lowercase, without a user or port.
    pub host: String,
    /// `owner/name` or `group/sub/name`, without `.git`.
    pub repository: String,
}

/// The remote `url` names, or `None` for a local path or a URL naming no repository.
pub fn parse(url: &str) -> Option<Remote> {
    let url = url.trim();
    let (authority, path) = if let Some((scheme, rest)) = url.split_once("://") {
        if !matches!(scheme, "https" | "http" | "ssh" | "git") {
            return None;
        }
        rest.split_once('/')?
    } else {
        // scp-like: `[user@]host:path`, where the host has no `/` before the colon.
        let (host, path) = url.split_once(':')?;
        if host.contains('/') || path.starts_with("//") {
            return None;
        }
        (host, path)
    };
    let host = authority.rsplit('@').next()?;
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    };
    let repository = path.trim_matches('/').trim_end_matches(".git");
    let parts: Vec<&str> = repository.split('/').collect();
    if host.is_empty() || parts.len() < 2 || parts.iter().any(|p| p.is_empty() || *p == "..") {
        return None;
    }
    Some(Remote {
        host: host.to_ascii_lowercase(),
        repository: repository.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_remote_url_names_its_host_and_repository() {
        let r = |host: &str, repo: &str| {
            Some(Remote {
                host: host.into(),
                repository: repo.into(),
            })
        };
        assert_eq!(
            parse("git@github.com:me/app.git"),
            r("github.com", "me/app")
        );
        assert_eq!(
            parse("https://github.com/me/app"),
            r("github.com", "me/app")
        );
        assert_eq!(
            parse("https://oauth2:tok@GitLab.com/group/sub/app.git/"),
            r("gitlab.com", "group/sub/app")
        );
        assert_eq!(
            parse("ssh://git@git.example.com:2222/me/app.git"),
            r("git.example.com", "me/app")
        );
        assert_eq!(
            parse("git.example.com:team/app"),
            r("git.example.com", "team/app")
        );
        for local in [
            "/srv/git/app.git",
            "../app.git",
            "file:///srv/app.git",
            "https://github.com/app",
            "git@github.com:app.git",
            "https://github.com/me/../app",
            "",
        ] {
            assert_eq!(parse(local), None, "{local}");
        }
    }
}
