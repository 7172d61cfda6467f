//! The docs and the code's comments cite only files the repository has: a
//! Markdown link, or a path under `crates/`, `docs/`, `deploy/` or
//! `scripts/` in README.md, docs/*.md, the crates' Markdown files and the
//! `//` comments of their Rust files, must name a file or directory that
//! exists. A file the reader makes (an `.env` kept out of git) is in
//! [`MADE_BY_THE_READER`].

use std::path::{Path, PathBuf};

/// Paths the docs tell the reader to create.
const MADE_BY_THE_READER: &[&str] = &["deploy/.env"];

/// The roots a cited path starts from.
const ROOTS: &[&str] = &["crates/", "docs/", "deploy/", "scripts/"];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file under `dir` (not `target`) whose name ends with `suffix`.
fn files(dir: &Path, suffix: &str, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                files(&path, suffix, found);
            }
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
}

/// The text of `path` that cites: all of a Markdown file, the `//` comment
/// lines of a Rust file.
fn citing_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "rs") {
        text.lines()
            .filter(|line| line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        text
    }
}

/// The repository paths `text` cites: words starting with one of
/// [`ROOTS`], without trailing punctuation.
fn cited_paths(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut cited = Vec::new();
    let mut starts: Vec<usize> = ROOTS
        .iter()
        .flat_map(|root| text.match_indices(root).map(|(at, _)| at))
        .collect();
    starts.sort_unstable();
    for start in starts {
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| is_path_char(c) || c == ':') {
            continue; // inside a longer path or a URL
        }
        let end = text[start..]
            .find(|c: char| !is_path_char(c))
            .map_or(text.len(), |len| start + len);
        let path = text[start..end].trim_end_matches(['.', '-']);
        if ROOTS.iter().all(|root| path != root.trim_end_matches('/')) {
            cited.push(path.trim_end_matches('/').to_owned());
        }
    }
    cited
}

/// The relative targets of the Markdown links in `text`, anchors dropped.
fn link_targets(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find([')', ' '])?];
            let target = target.split('#').next().unwrap_or_default();
            let external = target.is_empty() || target.contains(':');
            (!external).then(|| target.to_owned())
        })
        .collect()
}

/// Every citation of a missing file, as `FILE: path`.
fn missing_citations() -> Vec<String> {
    let root = repository();
    let mut sources = vec![root.join("README.md")];
    files(&root.join("docs"), ".md", &mut sources);
    files(&root.join("crates"), ".md", &mut sources);
    files(&root.join("crates"), ".rs", &mut sources);
    let mut missing = Vec::new();
    for source in sources {
        let text = citing_text(&source);
        let name = source.strip_prefix(&root).unwrap().display().to_string();
        for path in cited_paths(&text) {
            if !root.join(&path).exists() && !MADE_BY_THE_READER.contains(&path.as_str()) {
                missing.push(format!("{name}: {path}"));
            }
        }
        if source.extension().is_some_and(|e| e == "md") {
            for target in link_targets(&text) {
                if !source.parent().unwrap().join(&target).exists() {
                    missing.push(format!("{name}: link to {target}"));
                }
            }
        }
        // The old name of the design, spelled in two parts so that this
        // check does not cite it itself.
        let old_design = concat!("DESIGN", ".md");
        if text.contains(old_design) {
            missing.push(format!(
                "{name}: {old_design} (the design is docs/design.md)"
            ));
        }
    }
    missing
}

#[test]
fn docs_and_comments_cite_only_files_in_the_repository() {
    let missing = missing_citations();
    assert!(
        missing.is_empty(),
        "{} citations of files the repository does not have:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn citations_are_found_in_prose_and_links() {
    let text = "see `crates/stockade/src/main.rs`, docs/design.md. And [x](../docs/api.md#errors), [y](https://a.b/docs/z)";
    assert_eq!(
        cited_paths(text),
        ["crates/stockade/src/main.rs", "docs/design.md"],
        "a path inside a link or a URL is the link's to check"
    );
    assert_eq!(link_targets(text), ["../docs/api.md"]);
}
