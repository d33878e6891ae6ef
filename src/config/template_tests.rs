//! `braids init`'s config.toml against the settings braids reads: every key of every table is
//! in the template with its default, and the template has no key braids does not read.

use std::cell::RefCell;

use serde::de::{self, Deserialize, Visitor};

use super::*;

/// Why the probe stops: it only wants the names.
#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("probed")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

thread_local! {
    static SEEN: RefCell<&'static [&'static str]> = const { RefCell::new(&[]) };
}

/// A deserializer that records the field names a struct asks for, then stops.
struct Probe;

impl<'de> de::Deserializer<'de> for Probe {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        SEEN.with(|s| *s.borrow_mut() = fields);
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The keys of the table `T` reads.
fn keys<'de, T: Deserialize<'de>>() -> Vec<&'static str> {
    SEEN.with(|s| *s.borrow_mut() = &[]);
    let _ = T::deserialize(Probe);
    SEEN.with(|s| s.borrow().to_vec())
}

/// The template's text from `[table]` to the next table.
fn section<'a>(text: &'a str, table: &str) -> &'a str {
    let head = format!("\n[{table}]\n");
    let Some(at) = text.find(&head) else {
        return "";
    };
    let rest = &text[at + head.len()..];
    &rest[..rest.find("\n[").unwrap_or(rest.len())]
}

#[test]
fn c1_2_the_init_template_lists_every_key_braids_reads_with_its_default() {
    let text = crate::system::templates::CONFIG;
    let template: toml::Table = toml::from_str(text).expect("the template parses");
    let tables: Vec<(&str, Vec<&str>)> = vec![
        ("tick", keys::<TickConfig>()),
        ("tracker", keys::<TrackerConfig>()),
        ("sessions", keys::<SessionsConfig>()),
        ("worker", keys::<WorkerConfig>()),
        ("notify", keys::<NotifyConfig>()),
        ("checkin", keys::<CheckinConfig>()),
        ("breaker", keys::<BreakerConfig>()),
        ("retention", keys::<RetentionConfig>()),
        ("workspace", keys::<WorkspaceConfig>()),
        ("serve", keys::<ServeConfig>()),
        ("slurm", keys::<crate::session::slurm::SlurmSettings>()),
        (
            "openclaw",
            keys::<crate::session::openclaw::OpenClawSettings>(),
        ),
        ("ask", keys::<AskConfig>()),
    ];
    // Maps keyed by a preset, a model or a forge's name: examples, commented, not defaults.
    let maps = ["executors", "prices", "forges"];
    let top = keys::<Config>();
    assert_eq!(
        top.len(),
        tables.len() + maps.len(),
        "a table of Config is neither probed nor a map: {top:?}"
    );
    let mut missing = Vec::new();
    for (table, fields) in &tables {
        assert!(!fields.is_empty(), "[{table}] was not probed");
        let Some(written) = template.get(*table).and_then(|t| t.as_table()) else {
            missing.push(format!("[{table}]"));
            continue;
        };
        // A key with no default value to write (unset means "derived") is shown commented.
        let section = section(text, table);
        let commented = |k: &str| {
            section.lines().any(|l| {
                l.trim_start_matches(['#', ' '])
                    .starts_with(&format!("{k} = "))
            })
        };
        missing.extend(
            fields
                .iter()
                .filter(|k| !written.contains_key(**k) && !commented(k))
                .map(|k| format!("[{table}] {k}")),
        );
        for k in written.keys() {
            assert!(
                fields.contains(&k.as_str()),
                "the template's [{table}] {k} is not read"
            );
        }
    }
    assert!(
        missing.is_empty(),
        "config.toml from `braids init` lacks: {missing:#?}"
    );
    // Each written value is the default: the template parses to `Config::default()`.
    let loaded = Config::parse(text, std::path::Path::new("config.toml")).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(
        loaded.config,
        Config::default(),
        "a value in the template is not the default"
    );
}
