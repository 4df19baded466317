//! Embeds the web UI's production bundle (`ui/dist`, committed; see docs/decisions.md)
//! in the binary: writes `$OUT_DIR/ui_bundle.rs`, a table of every file with its
//! precompressed `.gz` copy when the UI build wrote one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/dist");
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut files = Vec::new();
    collect(&dist, &mut files);
    files.sort();

    let mut out = String::from("&[\n");
    for file in files
        .iter()
        .filter(|f| f.extension().is_none_or(|e| e != "gz"))
    {
        let rel = file
            .strip_prefix(&dist)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let gz = PathBuf::from(format!("{}.gz", file.display()));
        let gz = if files.contains(&gz) {
            format!("Some(include_bytes!({:?}))", gz.display().to_string())
        } else {
            "None".into()
        };
        writeln!(
            out,
            "    ({rel:?}, include_bytes!({:?}), {gz}),",
            file.display().to_string()
        )
        .unwrap();
    }
    out.push(']');
    let target = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("ui_bundle.rs");
    std::fs::write(target, out).unwrap();
}

/// Every file under `dir`; a missing `ui/dist` gives an empty bundle (the UI routes then
/// answer 404 with how to build it).
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
