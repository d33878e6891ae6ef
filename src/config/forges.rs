//! `[forges.<name>]`: the forges pull requests are opened on. `github` and `gitlab` are built
//! in and work with nothing but a token; an entry of either name changes only what it sets, and
//! any other name is a forge of its own (a GitHub Enterprise or self-hosted GitLab) that says
//! its `kind`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// Which API a forge speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// GitHub's REST API v3.
    Github,
    /// GitLab's REST API v4.
    Gitlab,
}

impl ForgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::Github => "github",
            ForgeKind::Gitlab => "gitlab",
        }
    }
}

/// One `[forges.<name>]` table as written: every key may be left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ForgeEntry {
    pub kind: Option<ForgeKind>,
    /// The API's root URL.
    pub api: Option<String>,
    /// The environment variable holding the token.
    pub token_env: Option<String>,
    /// A file holding the token (`~/…` or absolute), read before `token_env`.
    pub token_file: Option<String>,
    pub merge_method: Option<MergeMethod>,
    /// The host of remote URLs this forge serves, for projects without a `Forge:` line.
    pub host: Option<String>,
}

/// A forge with every setting resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forge {
    pub name: String,
    pub kind: ForgeKind,
    pub api: String,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    pub merge_method: MergeMethod,
    pub host: Option<String>,
}

/// The built-in forge called `name`, if there is one.
fn builtin(name: &str) -> Option<Forge> {
    let (kind, api, env, host) = match name {
        "github" => (
            ForgeKind::Github,
            "https://api.github.com",
            "GITHUB_TOKEN",
            "github.com",
        ),
        "gitlab" => (
            ForgeKind::Gitlab,
            "https://gitlab.com/api/v4",
            "GITLAB_TOKEN",
            "gitlab.com",
        ),
        _ => return None,
    };
    Some(Forge {
        name: name.into(),
        kind,
        api: api.into(),
        token_env: Some(env.into()),
        token_file: None,
        merge_method: MergeMethod::Squash,
        host: Some(host.into()),
    })
}

/// The forge `name` as `entries` (config.toml's `[forges]`) and the built-ins make it, or one
/// sentence saying what is wrong and how to fix it.
pub fn resolve(entries: &BTreeMap<String, ForgeEntry>, name: &str) -> Result<Forge, String> {
    let entry = entries.get(name);
    let mut forge = match (builtin(name), entry) {
        (Some(b), _) => b,
        (None, None) => {
            return Err(format!(
                "no forge is called `{name}`: add [forges.{name}] to config.toml with its kind and api, or name `github` or `gitlab`"
            ))
        }
        (None, Some(e)) => {
            let Some(kind) = e.kind else {
                return Err(format!(
                    "[forges.{name}] in config.toml says no kind: add kind = \"github\" or kind = \"gitlab\""
                ));
            };
            let Some(api) = e.api.clone() else {
                return Err(format!(
                    "[forges.{name}] in config.toml says no api: add its API's URL, such as api = \"https://github.example.com/api/v3\""
                ));
            };
            Forge {
                name: name.into(),
                kind,
                api,
                token_env: None,
                token_file: None,
                merge_method: MergeMethod::Squash,
                host: None,
            }
        }
    };
    if let Some(e) = entry {
        if let Some(k) = e.kind.filter(|k| *k != forge.kind) {
            return Err(format!(
                "[forges.{name}] in config.toml says kind = \"{}\", but `{name}` is the built-in {} forge: give the entry another name",
                kind_name(k),
                kind_name(forge.kind)
            ));
        }
        forge.api = e.api.clone().unwrap_or(forge.api);
        forge.token_env = e.token_env.clone().or(forge.token_env);
        forge.token_file = e.token_file.clone().or(forge.token_file);
        forge.merge_method = e.merge_method.unwrap_or(forge.merge_method);
        forge.host = e.host.clone().or(forge.host);
    }
    let api = forge.api.trim_end_matches('/').to_string();
    if !(api.starts_with("https://") || api.starts_with("http://")) {
        return Err(format!(
            "the api of forge `{name}` is `{api}`, not an http(s) URL: set api under [forges.{name}] in config.toml"
        ));
    }
    forge.api = api;
    Ok(forge)
}

/// The forge serving remote URLs of `host`: an entry's `host`, else a built-in's.
pub fn for_host(entries: &BTreeMap<String, ForgeEntry>, host: &str) -> Option<String> {
    let host = host.to_ascii_lowercase();
    entries
        .iter()
        .find(|(_, e)| e.host.as_deref().map(str::to_ascii_lowercase) == Some(host.clone()))
        .map(|(n, _)| n.clone())
        .or_else(|| {
            ["github", "gitlab"]
                .into_iter()
                .find(|b| builtin(b).and_then(|f| f.host).as_deref() == Some(host.as_str()))
                .map(String::from)
        })
}

fn kind_name(k: ForgeKind) -> &'static str {
    match k {
        ForgeKind::Github => "github",
        ForgeKind::Gitlab => "gitlab",
    }
}

impl Forge {
    /// The token, from `token_file` (under `home` for `~/…`), else from `token_env` as `env`
    /// gives it; or one sentence saying why there is none and how to give one.
    pub fn token(
        &self,
        home: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<String, String> {
        let name = &self.name;
        if let Some(file) = &self.token_file {
            let path = match file.strip_prefix("~/") {
                Some(rest) => home.join(rest),
                None => file.into(),
            };
            let text = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "the token file {} of forge `{name}` cannot be read ({e}): write the token there, or fix token_file under [forges.{name}] in config.toml",
                    path.display()
                )
            })?;
            let token = text.trim();
            if token.is_empty() {
                return Err(format!(
                    "the token file {} of forge `{name}` is empty: write the token there",
                    path.display()
                ));
            }
            return Ok(token.to_string());
        }
        let Some(var) = &self.token_env else {
            return Err(format!(
                "forge `{name}` has no token: set token_env or token_file under [forges.{name}] in config.toml"
            ));
        };
        match env(var).map(|t| t.trim().to_string()) {
            Some(t) if !t.is_empty() => Ok(t),
            Some(_) => Err(format!(
                "{var}, the token of forge `{name}`, is empty: set it in the environment braids runs in, or set token_file under [forges.{name}] in config.toml"
            )),
            None => Err(format!(
                "{var}, the token of forge `{name}`, is not set: set it in the environment braids runs in (a cron line or systemd unit has its own), or set token_file under [forges.{name}] in config.toml"
            )),
        }
    }
}

/// How a pull request braids may merge is merged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeMethod {
    /// One commit on the base with the whole change.
    #[default]
    Squash,
    /// A merge commit.
    Merge,
    /// Each commit replayed on the base.
    Rebase,
}

impl MergeMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            MergeMethod::Squash => "squash",
            MergeMethod::Merge => "merge",
            MergeMethod::Rebase => "rebase",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(toml_text: &str) -> BTreeMap<String, ForgeEntry> {
        #[derive(Deserialize)]
        struct Wrap {
            forges: BTreeMap<String, ForgeEntry>,
        }
        toml::from_str::<Wrap>(toml_text).unwrap().forges
    }

    #[test]
    fn the_builtins_need_nothing_and_an_entry_changes_only_what_it_sets() {
        let none = BTreeMap::new();
        let gh = resolve(&none, "github").unwrap();
        assert_eq!(
            (gh.kind, gh.api.as_str(), gh.merge_method),
            (
                ForgeKind::Github,
                "https://api.github.com",
                MergeMethod::Squash
            )
        );
        let gl = resolve(&none, "gitlab").unwrap();
        assert_eq!(gl.api, "https://gitlab.com/api/v4");
        let e =
            entries("[forges.github]\nmerge_method = \"rebase\"\napi = \"http://127.0.0.1:9/\"\n");
        let gh = resolve(&e, "github").unwrap();
        assert_eq!(
            (gh.merge_method, gh.api.as_str(), gh.token_env.as_deref()),
            (
                MergeMethod::Rebase,
                "http://127.0.0.1:9",
                Some("GITHUB_TOKEN")
            )
        );
    }

    #[test]
    fn a_forge_of_its_own_says_its_kind_and_api_and_each_mistake_is_one_sentence() {
        let e = entries(
            "[forges.work]\nkind = \"gitlab\"\napi = \"https://git.work.example/api/v4\"\nhost = \"git.work.example\"\ntoken_file = \"~/.config/work-token\"\n",
        );
        let w = resolve(&e, "work").unwrap();
        assert_eq!(
            (w.kind, w.host.as_deref()),
            (ForgeKind::Gitlab, Some("git.work.example"))
        );
        assert_eq!(for_host(&e, "GIT.work.example").as_deref(), Some("work"));
        assert_eq!(for_host(&e, "github.com").as_deref(), Some("github"));
        assert_eq!(for_host(&e, "example.org"), None);
        let missing = resolve(&e, "nowhere").unwrap_err();
        assert!(missing.contains("[forges.nowhere]"), "{missing}");
        let e = entries("[forges.work]\napi = \"https://x\"\n");
        assert!(resolve(&e, "work")
            .unwrap_err()
            .contains("kind = \"github\""));
        let e = entries("[forges.work]\nkind = \"github\"\n");
        assert!(resolve(&e, "work").unwrap_err().contains("no api"));
        let e = entries("[forges.github]\nkind = \"gitlab\"\n");
        assert!(resolve(&e, "github").unwrap_err().contains("another name"));
        let e = entries("[forges.work]\nkind = \"github\"\napi = \"ftp://x\"\n");
        assert!(resolve(&e, "work")
            .unwrap_err()
            .contains("not an http(s) URL"));
        // A kind or merge method braids does not know is a TOML error naming the value.
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Wrap {
            forges: BTreeMap<String, ForgeEntry>,
        }
        let err = toml::from_str::<Wrap>("[forges.x]\nkind = \"gitea\"\n").unwrap_err();
        assert!(err.to_string().contains("gitea"), "{err}");
    }

    #[test]
    fn the_token_comes_from_its_file_else_its_variable_and_its_absence_says_how_to_give_one() {
        let home = tempfile::tempdir().unwrap();
        let gh = resolve(&BTreeMap::new(), "github").unwrap();
        let env = |v: &str| (v == "GITHUB_TOKEN").then(|| " ghp_x \n".to_string());
        assert_eq!(gh.token(home.path(), env).unwrap(), "ghp_x");
        let unset = gh.token(home.path(), |_| None).unwrap_err();
        assert!(
            unset.contains("GITHUB_TOKEN") && unset.contains("not set"),
            "{unset}"
        );
        let empty = gh.token(home.path(), |_| Some(String::new())).unwrap_err();
        assert!(empty.contains("is empty"), "{empty}");
        let e = entries("[forges.github]\ntoken_file = \"~/tok\"\n");
        let gh = resolve(&e, "github").unwrap();
        let missing = gh.token(home.path(), env).unwrap_err();
        assert!(missing.contains("cannot be read"), "{missing}");
        std::fs::write(home.path().join("tok"), "\n").unwrap();
        assert!(gh.token(home.path(), env).unwrap_err().contains("is empty"));
        std::fs::write(home.path().join("tok"), "glpat-y\n").unwrap();
        assert_eq!(gh.token(home.path(), env).unwrap(), "glpat-y");
    }
}
