//! `phalanx-bench report --quick` end to end: it starts real jobs through the launcher
//! (two ranks each, every test of the quick suite: all but `applications`, whose examples
//! are built apart; `allgather_k` at each k and with the default algorithm, through the
//! environment the report sets per job), then writes `results.csv`, `results.json`,
//! an SVG and a PNG per test and `index.html`. Asserted: the files parse and agree, every
//! quick test has rows, every SVG is well-formed XML holding a plotted line and its axis
//! labels, every PNG is a PNG of the plot's size, and the page references every plot.
//! Nothing about the measured figures beyond being finite and non-negative, never a time.
//! Needs a TrueType font for the plots (CI installs fonts-dejavu-core; the report says
//! how to get one when there is none).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every test of the quick suite (all at p = 2).
const QUICK_TESTS: [&str; 15] = [
    "latency",
    "bw",
    "mbw_mr",
    "bcast",
    "allgather",
    "gather",
    "scatter",
    "reduce",
    "allreduce",
    "alltoall",
    "barrier",
    "ring",
    "chain",
    "flood",
    "allgather_k",
];

/// allgather_k's variants: the k of the multicast all-gather, then the default algorithm.
const K_VARIANTS: [&str; 5] = ["k=1", "k=2", "k=4", "k=8", "default"];

fn bench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_phalanx-bench"));
    // The jobs must not inherit a test harness's fault injection or bootstrap.
    cmd.env_remove("PHALANX_FAULTS").env_remove("PHALANX_BOOT");
    cmd
}

/// A fresh directory under cargo's scratch space for tests.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn mr_report_quick_suite_writes_results_plots_and_page() {
    // The report finds the launcher next to itself, else on PATH: built here if this
    // profile has none yet (a failed build fails the test), and put on PATH in case the
    // benchmark lives elsewhere.
    let launcher = common::launcher();
    assert!(launcher.is_file(), "no launcher at {}", launcher.display());
    let launcher_dir = launcher.parent().expect("launcher has a directory");
    let path = std::env::join_paths(std::iter::once(launcher_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let out = scratch("report-quick");
    let run = bench()
        .args(["report", "--quick", "--step-timeout", "60", "--out"])
        .arg(&out)
        .env("PATH", path)
        .output()
        .expect("run phalanx-bench report");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    let dump = format!(
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        run.status
    );
    assert!(run.status.success(), "report failed\n{dump}");
    assert!(!stderr.contains("panicked"), "{dump}");
    assert_eq!(
        stdout.lines().last().map(PathBuf::from),
        Some(out.canonicalize().expect("out dir").join("index.html")),
        "{dump}"
    );

    // results.csv: the header, then seven fields per row.
    let csv = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("test,p,size,value,unit,runtime,variant"));
    let mut csv_rows = Vec::new();
    let mut k_variants = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 7, "{line}");
        let p: usize = f[1].parse().expect("p");
        let size: usize = f[2].parse().expect("size");
        let value: f64 = f[3].parse().expect("value");
        assert_eq!(p, 2, "the quick suite runs at p = 2: {line}");
        assert!(value.is_finite() && value >= 0.0, "{line}");
        assert!(size <= 4096, "the quick suite stops at 4 KiB: {line}");
        assert!(!f[4].is_empty(), "a unit: {line}");
        assert_eq!(f[5], "phalanx", "{line}");
        if f[0] == "allgather_k" {
            assert_eq!(size, 4096, "{line}");
            k_variants.push(f[6].to_string());
        } else {
            assert_eq!(f[6], "", "no variant: {line}");
        }
        csv_rows.push((f[0].to_string(), size, value));
    }
    let tests: BTreeSet<&str> = csv_rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        tests,
        BTreeSet::from(QUICK_TESTS),
        "a row for every quick test"
    );
    for test in QUICK_TESTS {
        let sizes: Vec<usize> = csv_rows
            .iter()
            .filter(|r| r.0 == test)
            .map(|r| r.1)
            .collect();
        if test == "barrier" {
            assert_eq!(sizes, [0], "barrier has one figure, size 0");
        } else {
            assert!(sizes.len() >= 2 && !sizes.contains(&0), "{test}: {sizes:?}");
        }
    }

    assert_eq!(
        k_variants, K_VARIANTS,
        "allgather_k: a row per k, then the default"
    );

    // results.json: the same rows as objects.
    let json = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).expect("results.json parses");
    assert_eq!(rows.len(), csv_rows.len());
    for (row, (test, size, value)) in rows.iter().zip(&csv_rows) {
        assert_eq!(row["test"].as_str(), Some(test.as_str()), "{row}");
        assert_eq!(row["size"].as_u64(), Some(*size as u64), "{row}");
        assert_eq!(row["value"].as_f64(), Some(*value), "{row}");
        assert_eq!(row["p"].as_u64(), Some(2), "{row}");
        assert!(
            row["unit"].is_string() && row["runtime"] == "phalanx",
            "{row}"
        );
        assert!(row["variant"].is_string(), "{row}");
    }

    // One SVG and one PNG per test, no ratio plot without a peer, nothing else.
    let mut svgs = BTreeSet::new();
    let mut pngs = BTreeSet::new();
    for entry in std::fs::read_dir(&out).expect("read out dir") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if let Some(stem) = name.strip_suffix(".svg") {
            svgs.insert(stem.to_string());
        } else if let Some(stem) = name.strip_suffix(".png") {
            pngs.insert(stem.to_string());
        }
    }
    let expected: BTreeSet<String> = QUICK_TESTS.iter().map(|t| t.to_string()).collect();
    assert_eq!(svgs, expected);
    assert_eq!(pngs, expected);

    for test in QUICK_TESTS {
        let svg = std::fs::read_to_string(out.join(format!("{test}.svg"))).expect("svg");
        let doc = roxmltree::Document::parse(&svg)
            .unwrap_or_else(|e| panic!("{test}.svg is not well-formed XML: {e}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg", "{test}.svg");
        let texts: Vec<&str> = root
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        let x_axis = match test {
            "barrier" => "Processes",
            "allgather_k" => "PHALANX_COLL_ALLGATHER_K",
            _ => "bytes",
        };
        assert!(
            texts.iter().any(|t| t.contains(x_axis)),
            "{test}.svg: no x-axis label in {texts:?}"
        );
        assert!(
            texts.iter().any(|t| t.contains(test)),
            "{test}.svg: no title naming the test in {texts:?}"
        );
        // A plotted line (polyline) except for barrier's single point; markers always.
        let has = |tag: &str| root.descendants().any(|n| n.has_tag_name(tag));
        assert!(has("circle"), "{test}.svg: no data points");
        if test != "barrier" {
            assert!(has("polyline"), "{test}.svg: no line");
        }
        if test == "allgather_k" {
            assert!(
                texts.iter().any(|t| t.contains("default algorithm")),
                "allgather_k.svg: no default-algorithm line in the legend: {texts:?}"
            );
        }

        let png = std::fs::read(out.join(format!("{test}.png"))).expect("png");
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{test}.png: no PNG signature"
        );
        assert!(png.len() > 10_000, "{test}.png: only {} bytes", png.len());
        // IHDR: width and height, big-endian, at bytes 16..24.
        let dim = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().expect("4 bytes"));
        assert_eq!((dim(16), dim(20)), (1100, 650), "{test}.png size");
    }

    // The page shows every plot and links its PNG, and has the headline table.
    let html = std::fs::read_to_string(out.join("index.html")).expect("index.html");
    for test in QUICK_TESTS {
        assert!(
            html.contains(&format!("src=\"{test}.svg\"")),
            "index.html lacks {test}.svg"
        );
        assert!(
            html.contains(&format!("href=\"{test}.png\"")),
            "index.html lacks {test}.png"
        );
    }
    assert!(html.contains("Headline numbers") && html.contains("results.csv"));
    assert!(
        !html.contains("Failed steps"),
        "no step failed, so none listed"
    );
    std::fs::remove_dir_all(&out).expect("remove the report");
}

#[test]
fn report_without_a_font_says_so_before_measuring() {
    let out = scratch("report-nofont");
    let run = bench()
        .args(["report", "--quick", "--out"])
        .arg(&out)
        .env("PHALANX_REPORT_FONT", "/nonexistent/font.ttf")
        .output()
        .expect("run phalanx-bench report");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("font") && stderr.contains("/nonexistent/font.ttf"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.exists(), "nothing written before the font is found");
}
