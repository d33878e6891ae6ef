//! `cargo bench --bench tools`: the exploration tools (`braids tools …`, the real binary) on a
//! generated TypeScript repository of `BRAIDS_BENCH_FILES` files (default 10,000): 100 slices,
//! each with a `slice.md` and files importing a store and a neighbouring slice. Wall time,
//! median and minimum of five runs each, and the machine's load.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let files: usize = std::env::var("BRAIDS_BENCH_FILES")
        .ok()
        .and_then(|v| v.replace(',', "").parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let slices = 100;
    let per = (files / slices).max(2) - 1;
    for s in 0..slices {
        let d = root.join(format!("src/slices/s{s}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("slice.md"), format!("# s{s}\n")).unwrap();
        for f in 0..per {
            let next = (s + 1) % slices;
            let text = format!(
                "/**\n * File {f} of slice {s}.\n */\nimport {{ store }} from '../../store/store{}';\nimport {{ thing{f} }} from '../s{next}/f{f}';\nexport const thing{f} = () => store(\"s{s}f{f}\");\n",
                s % 10
            );
            std::fs::write(d.join(format!("f{f}.ts")), text).unwrap();
        }
    }
    std::fs::create_dir_all(root.join("src/store")).unwrap();
    for i in 0..10 {
        std::fs::write(
            root.join(format!("src/store/store{i}.ts")),
            "/** The store. */\nexport const store = (k: string) => k;\n",
        )
        .unwrap();
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_braids"));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{} files; load average {}",
        slices * (per + 1) + 10,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for args in [
        vec!["list-slices"],
        vec!["find-symbol", "thing7"],
        vec!["slice-deps", "s42"],
        vec!["show-contract", "src/slices/s3/f3.ts"],
    ] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let out = Command::new(bin)
                .args(["tools", "--dir"])
                .arg(root)
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(out.success(), "{args:?}");
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "tools {:<28} {:>7.1} ms (min {:.1} ms)",
            args.join(" "),
            ms(times[2]),
            ms(times[0])
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
