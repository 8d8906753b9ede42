//! Repository checks, run as ordinary tests by the `test` lane.

use std::path::{Path, PathBuf};

use crate::project_root;

/// Workspace members: the root facade and the crate folders.
const MEMBERS: &[&str] = &[
    ".",
    "dinah-core",
    "dinah-std",
    "dinah-launch",
    "dinah-tcp",
    "dinah-mpi",
    "dinah-macros",
    "xtask",
];

/// Library crates whose public items must all be documented.
const LIBRARIES: &[&str] = &[
    "src/lib.rs",
    "dinah-core/src/lib.rs",
    "dinah-std/src/lib.rs",
    "dinah-launch/src/lib.rs",
    "dinah-tcp/src/lib.rs",
    "dinah-mpi/src/lib.rs",
    "dinah-macros/src/lib.rs",
];

fn read(path: impl AsRef<Path>) -> String {
    let path = project_root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every `*.rs` file in the repository outside build output.
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&project_root(), &mut files);
    files
}

#[test]
fn every_crate_inherits_workspace_settings() {
    for member in MEMBERS {
        let manifest = read(Path::new(member).join("Cargo.toml"));
        for key in [
            "[lints]\nworkspace = true",
            "edition.workspace = true",
            "rust-version.workspace = true",
        ] {
            assert!(
                manifest.contains(key),
                "{member}/Cargo.toml must contain `{key}`"
            );
        }
    }
}

#[test]
fn workspace_pins_edition_msrv_and_resolver() {
    let root = read("Cargo.toml");
    for key in [
        "edition = \"2024\"",
        "rust-version = \"1.85\"",
        "resolver = \"3\"",
    ] {
        assert!(root.contains(key), "root Cargo.toml must set {key}");
    }
}

#[test]
fn no_ignored_tests() {
    let needle = concat!("#[", "ignore");
    let offenders: Vec<_> = rust_files()
        .into_iter()
        .filter(|path| read(path).contains(needle))
        .collect();
    assert!(
        offenders.is_empty(),
        "ignored tests hide failures; found in {offenders:?}"
    );
}

#[test]
fn should_panic_names_the_expected_message() {
    let bare = concat!("#[", "should_panic]");
    let offenders: Vec<_> = rust_files()
        .into_iter()
        .filter(|path| read(path).contains(bare))
        .collect();
    assert!(
        offenders.is_empty(),
        "use should_panic(expected = ...); bare in {offenders:?}"
    );
}

#[test]
fn readme_names_the_commands() {
    let readme = read("README.md");
    assert!(
        readme.contains("cargo xtask ci"),
        "README.md must name the test command"
    );
    assert!(
        readme.contains("cargo xtask demo"),
        "README.md must name the demo command"
    );
}

#[test]
fn ci_script_calls_the_test_command() {
    let script = read(".ci/run");
    assert!(
        script
            .lines()
            .any(|line| !line.trim_start().starts_with('#') && line.contains("cargo xtask ci"))
    );
}

#[test]
fn core_is_no_std_and_forbids_unsafe() {
    let lib = read("dinah-core/src/lib.rs");
    assert!(lib.contains("#![no_std]"), "dinah-core must be #![no_std]");
    assert!(
        lib.contains("#![forbid(unsafe_code)]"),
        "dinah-core must forbid unsafe code"
    );
    assert!(
        !lib.contains("extern crate alloc"),
        "dinah-core must not use alloc"
    );
    assert!(
        !lib.contains("extern crate std"),
        "dinah-core must not use std"
    );
}

#[test]
fn libraries_deny_missing_docs() {
    for lib in LIBRARIES {
        assert!(
            read(lib).contains("#![deny(missing_docs)]"),
            "{lib} must deny missing_docs"
        );
    }
}

#[test]
fn core_depends_only_on_the_allowed_crates() {
    let manifest = read("dinah-core/Cargo.toml");
    let allowed = ["heapless", "spin", "portable-atomic", "critical-section"];
    let mut section = "";
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line;
            continue;
        }
        if section != "[dependencies]" || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
        assert!(
            allowed.contains(&name),
            "dinah-core may depend only on {allowed:?}, found `{name}`"
        );
    }
}

#[test]
fn getting_started_shows_the_tcp_hello_example() {
    // The guide shows the example's code without its `//!` docs and its
    // `#![expect(...)]`, which only this workspace's lints need.
    let example = read("examples/tcp_hello.rs");
    let code: Vec<&str> = example
        .lines()
        .filter(|line| !line.starts_with("//!") && !line.starts_with("#![expect("))
        .collect();
    let code = code.join("\n");
    let block = format!("```rust\n{}\n```", code.trim());
    assert!(
        read("docs/getting-started.md").contains(&block),
        "docs/getting-started.md must show examples/tcp_hello.rs as one ```rust block"
    );
}
