//! `braids tools`: the claw-builder exploration tools over a small TypeScript tree with three
//! slices, a store with a docblock, an alias import and an ignored `node_modules`.

use std::path::Path;

use crate::support::Sandbox;

fn tree(root: &Path) {
    let files: &[(&str, &str)] = &[
        (".gitignore", "node_modules\n"),
        ("node_modules/x/a.js", "snapWindow\n"),
        ("src/slices/windows/slice.md", "# windows\n"),
        ("src/slices/taskbar/slice.md", "# taskbar\n"),
        ("src/slices/shell/slice.md", "# shell\n"),
        ("src/store/windowStore.ts", "/**\n * Window store: owns z-order.\n *\n * Never mutate from a component.\n */\nexport const windowStore = {};\nexport function snapWindow() {}\n"),
        ("src/shared/types.ts", "export type T = number;\n"),
        ("src/slices/windows/hooks/useSnap.ts", "import { windowStore, snapWindow } from '../../../store/windowStore';\nimport type { T } from '@/shared/types';\nimport React from 'react';\nexport const useSnap = () => snapWindow();\nconst notSnapWindowish = 1;\n"),
        ("src/slices/windows/index.ts", "export * from './hooks/useSnap';\n"),
        ("src/slices/taskbar/Taskbar.tsx", "import { useSnap } from '../windows';\n"),
        ("src/slices/shell/Shell.tsx", "import { useSnap } from '@/slices/windows/hooks/useSnap';\n"),
        ("src/plain.ts", "export const nothing = 0;\n"),
    ];
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

#[test]
fn c8_7_the_exploration_tools_answer_from_the_tree() {
    let sb = Sandbox::new();
    let root = sb.home().join("app");
    tree(&root);
    let dir = root.display().to_string();
    let tools = |args: &[&str]| {
        let mut all = vec!["tools", "--dir", &dir];
        all.extend(args);
        sb.run(&all)
    };
    let out = |args: &[&str]| String::from_utf8(tools(args).stdout).unwrap();

    assert_eq!(
        out(&["list-slices"]),
        "shell  src/slices/shell\ntaskbar  src/slices/taskbar\nwindows  src/slices/windows\n"
    );
    assert_eq!(
        out(&["show-contract", "src/store/windowStore.ts"]),
        "Window store: owns z-order.\n\nNever mutate from a component.\n"
    );
    let none = tools(&["show-contract", "src/plain.ts"]);
    assert_eq!(none.status.code(), Some(1));
    assert_eq!(
        out(&["slice-deps", "windows"]),
        "imports from: react, src/shared/types, src/store/windowStore\nimported by: shell, taskbar\n"
    );
    let hits = out(&["find-symbol", "snapWindow"]);
    assert_eq!(
        hits.lines()
            .map(|l| l.split(": ").next().unwrap())
            .collect::<Vec<_>>(),
        [
            "src/slices/windows/hooks/useSnap.ts:1",
            "src/slices/windows/hooks/useSnap.ts:4",
            "src/store/windowStore.ts:7"
        ],
        "whole words only, node_modules ignored: {hits}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&out(&["find-symbol", "useSnap", "--json"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 4, "{json:#}");
    assert_eq!(json[0]["file"], "src/slices/shell/Shell.tsx");
    assert_eq!(
        tools(&["find-symbol", "noSuchThing"]).status.code(),
        Some(1)
    );
    let bad = tools(&["slice-deps", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("no slice named nope") && err.contains("shell, taskbar, windows"),
        "{err}"
    );
    // A pattern-looking name is a literal, never a regex.
    assert_eq!(tools(&["find-symbol", ".*"]).status.code(), Some(1));
}

/// `braids tools ask`: off until `[ask]` names a preset; then the real Claude Code CLI answers
/// over the question and the named files, cut to `max_bytes`, with the cheap model asked for.
#[test]
fn c8_7_tools_ask_puts_a_bounded_question_to_the_cheap_agent() {
    use crate::support::agent_cli::Cli;
    use crate::support::agent_model::{AgentModel, Script};
    let Some(cli) = Cli::Claude.installed() else {
        return;
    };
    let sb = crate::support::Install::new().build();
    let root = sb.home().join("app");
    tree(&root);
    std::fs::write(root.join("src/big.ts"), "// filler\n".repeat(2_000)).unwrap();
    let dir = root.display().to_string();
    let question = "How does the taskbar reach snapWindow?";
    let ask = |more: &[&str]| {
        let mut all = vec!["tools", "ask", question, "--dir", &dir];
        all.extend(more);
        sb.run(&all)
    };

    let off = ask(&["--files", "src/store/windowStore.ts"]);
    assert_eq!(off.status.code(), Some(2), "{off:?}");
    assert!(
        String::from_utf8_lossy(&off.stderr).contains("tools ask is off"),
        "{off:?}"
    );

    let model = AgentModel::start(Script::Write {
        files: vec![],
        final_text: "Taskbar imports useSnap, which calls snapWindow in windowStore.ts.".into(),
    });
    sb.config(&cli.config(sb.home(), &model.url(), &sb.path_var()));
    sb.config(
        "[ask]\nexecutor = \"claude-code\"\nmodel = \"claude-haiku-4-5\"\nmax_bytes = 4000\n",
    );
    let out = ask(&[
        "--json",
        "--files",
        "src/slices/taskbar/Taskbar.tsx",
        "src/slices/windows/hooks/useSnap.ts",
        "src/big.ts",
        "src/store/windowStore.ts",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["answer"],
        "Taskbar imports useSnap, which calls snapWindow in windowStore.ts."
    );
    assert_eq!(
        (v["tokens_in"].as_u64(), v["tokens_out"].as_u64()),
        (Some(100), Some(20))
    );
    assert!(v["packet_bytes"].as_u64().unwrap() <= 4000, "{v}");
    let seen = model.seen();
    assert_eq!(seen.len(), 1, "one model call: {seen:?}");
    assert_eq!(seen[0].model, "claude-haiku-4-5");
    let prompt = &seen[0].first_user;
    assert!(prompt.contains(question), "{prompt}");
    assert!(
        prompt.contains("import { useSnap } from '../windows';"),
        "the files reach the agent: {prompt}"
    );
    assert!(
        prompt.contains("more bytes of src/big.ts left out]"),
        "{prompt}"
    );
    assert!(
        prompt.contains("=== src/store/windowStore.ts === (left out"),
        "{prompt}"
    );
    // The agent ran in a directory of its own: nothing of the tree changed.
    assert_eq!(
        std::fs::read_to_string(root.join("src/plain.ts")).unwrap(),
        "export const nothing = 0;\n"
    );

    // A file outside the tree, or through a link, is refused before any agent runs.
    let bad = ask(&["--files", "/etc/passwd"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("is outside"),
        "{bad:?}"
    );
    assert_eq!(model.seen().len(), 1);
}
