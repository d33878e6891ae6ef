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
