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
    let root = sb.new_project("app").create().root;
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

/// A stand-in Claude Code for `tools ask`: keeps each prompt it is given (standard input) in
/// `asked`, and answers.
fn fake_claude(sb: &Sandbox, asked: &Path) {
    let program = sb.script(
        "bin/fake-claude",
        &format!(
            "cat >> {:?}\nprintf '%s\\n' '{}'\n",
            asked.display().to_string(),
            r#"{"type":"result","subtype":"success","is_error":false,"result":"It is fine.","session_id":"s","usage":{"input_tokens":10,"output_tokens":2}}"#
        ),
    );
    sb.config(&format!(
        "[ask]\nexecutor = \"claude-code\"\nmodel = \"m\"\n\n[executors.claude-code]\nprogram = {:?}\n",
        program.display().to_string()
    ));
}

/// `braids tools ask` sends files to a model, so it reads only inside the registered projects
/// (and the worktrees braids made for them), a file only inside `--dir` and through no link;
/// an agent asks only about its own workspace.
#[test]
fn c11_8_tools_ask_reads_only_inside_registered_projects() {
    let sb = crate::support::Install::new().build();
    let app = sb.new_project("app").create().root;
    let other = sb.new_project("other").create().root;
    std::fs::create_dir_all(app.join("src")).unwrap();
    std::fs::write(app.join("src/a.rs"), "fn answer() -> u8 { 42 }\n").unwrap();
    std::fs::write(other.join("notes.md"), "OTHER PROJECT NOTES\n").unwrap();
    let secret = sb.home().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    std::os::unix::fs::symlink(&secret, app.join("src/leak.txt")).unwrap();
    std::os::unix::fs::symlink("/", app.join("root")).unwrap();
    let asked = sb.home().join("asked");
    fake_claude(&sb, &asked);
    let app_dir = app.display().to_string();
    let ask = |dir: &str, file: &str| {
        let _ = std::fs::remove_file(&asked);
        sb.command(&[
            "tools",
            "ask",
            "What is here?",
            "--dir",
            dir,
            "--files",
            file,
        ])
        .env_remove("BRAIDS_WORKSPACE")
        .output()
        .unwrap()
    };
    let refused = |out: &std::process::Output, says: &str| {
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{says:?} not in {err}");
        assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
        assert!(!asked.exists(), "no model was asked: {out:?}");
    };

    // The normal case: a file of a registered project reaches the model.
    let out = ask(&app_dir, "src/a.rs");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("It is fine."));
    assert!(std::fs::read_to_string(&asked)
        .unwrap()
        .contains("fn answer() -> u8"));

    refused(
        &ask("/", "etc/passwd"),
        "is outside every registered project",
    );
    refused(
        &ask(&format!("{app_dir}/root"), "etc/passwd"),
        "is outside every registered project",
    );
    refused(&ask(&app_dir, "/etc/passwd"), "is outside");
    refused(&ask(&app_dir, "src/leak.txt"), "reached through no link");
    refused(&ask(&app_dir, "../secret.txt"), "climbs out with `..`");
    refused(
        &ask(&app_dir, "src/../../secret.txt"),
        "climbs out with `..`",
    );

    // An agent's own ask, from its workspace (a real worker's worktree): its workspace, and
    // never another project.
    let braids = env!("CARGO_BIN_EXE_braids");
    let agent = sb.script(
        "bin/agent",
        &format!(
            r#"cd "$BRAIDS_WORKSPACE"
mkdir -p src && printf 'fn mine() {{}}\n' > src/mine.rs
{braids:?} tools ask "What is mine?" --files src/mine.rs > "$HOME/ask-own" 2>&1; echo "exit $?" >> "$HOME/ask-own"
{braids:?} tools ask "What is theirs?" --dir {other:?} --files notes.md > "$HOME/ask-other" 2>&1; echo "exit $?" >> "$HOME/ask-other"
rm -f src/mine.rs
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid it.\n' "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#,
            other = other.display().to_string()
        ),
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 0\n",
        agent.display().to_string()
    ));
    sb.new_project("work").br().beads(1).create();
    let _ = std::fs::remove_file(&asked);
    sb.tick().force().run();
    crate::day_two::workers_end(&sb);
    let own = sb.read("ask-own");
    assert!(
        own.contains("It is fine.") && own.ends_with("exit 0\n"),
        "{own}"
    );
    let theirs = sb.read("ask-other");
    assert!(
        theirs.contains("is outside this bead's workspace") && theirs.ends_with("exit 2\n"),
        "{theirs}"
    );
    let prompts = std::fs::read_to_string(&asked).unwrap();
    assert!(prompts.contains("fn mine()"), "{prompts}");
    assert!(!prompts.contains("OTHER PROJECT NOTES"), "{prompts}");
}
