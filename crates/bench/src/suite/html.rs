//! `index.html`: the report as one page.
//!
//! The page has a table of facts about the run, the steps that failed, a table of
//! headline numbers (for each test, rank count and runtime: the value at the smallest and
//! at the largest size), then one section per test with its plots as `<img>` of the SVG,
//! each a link to the PNG. The sections of `applications` (speed-up and time per example
//! and p) and `allgather_k` (time per k and of the default algorithm) hold their own
//! tables instead of headline rows. It refers to files by their names in the same directory, and
//! escapes every piece of text it did not write itself.

use super::plan::{variant_k, Kind, Spec, APPS, DEFAULT_VARIANT};
use super::results::{runtime_name, Row, PHALANX, RUNTIME_ORDER, SPEEDUP};
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// One test's section.
pub struct Section {
    /// The test.
    pub spec: &'static Spec,
    /// `(title, svg file, png file)` of each of its plots.
    pub plots: Vec<(String, String, String)>,
}

/// Everything the page shows.
pub struct Page<'a> {
    /// `(what, value)` facts about the run.
    pub facts: &'a [(String, String)],
    /// Failed steps, one sentence each.
    pub failures: &'a [String],
    /// Every figure.
    pub rows: &'a [Row],
    /// Sections in order.
    pub sections: &'a [Section],
    /// The rows come from the quick suite (the applications' problems are smaller).
    pub quick: bool,
}

/// Writes `index.html` into `dir`.
pub fn write(dir: &Path, page: &Page<'_>) -> io::Result<()> {
    std::fs::write(dir.join("index.html"), render(page))
}

fn render(page: &Page<'_>) -> String {
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>phalanx benchmark report</title>\n<style>\n\
         body { font-family: sans-serif; margin: 2em; max-width: 1200px; }\n\
         table { border-collapse: collapse; margin: 1em 0; }\n\
         th, td { border: 1px solid #bbb; padding: 0.2em 0.6em; }\n\
         td.num { text-align: right; font-variant-numeric: tabular-nums; }\n\
         img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }\n\
         .failed { color: #a00; }\n</style>\n</head>\n<body>\n\
         <h1>phalanx benchmark report</h1>\n",
    );
    h.push_str("<table>\n");
    for (what, value) in page.facts {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(what), esc(value));
    }
    h.push_str("</table>\n");
    if !page.failures.is_empty() {
        h.push_str("<h2 class=\"failed\">Failed steps</h2>\n<ul class=\"failed\">\n");
        for f in page.failures {
            let _ = writeln!(h, "<li>{}</li>", esc(f));
        }
        h.push_str("</ul>\n");
    }
    h.push_str(
        "<h2>Headline numbers</h2>\n<p>Per test, rank count and runtime: the value at \
         the smallest and at the largest message size measured (applications and \
         allgather_k: in their sections). Every figure is in \
         <a href=\"results.csv\">results.csv</a> and \
         <a href=\"results.json\">results.json</a>.</p>\n",
    );
    headline_table(&mut h, page);
    for section in page.sections {
        let spec = section.spec;
        let _ = writeln!(
            h,
            "<h2 id=\"{}\">{} <small>({})</small></h2>",
            esc(spec.name),
            esc(spec.title),
            esc(spec.name)
        );
        match spec.kind {
            Kind::Speedup => speedup_table(&mut h, page),
            Kind::AgainstK => k_table(&mut h, page),
            _ => {}
        }
        if section.plots.is_empty() {
            h.push_str("<p>No plot: no figures.</p>\n");
        }
        for (title, svg, png) in &section.plots {
            let _ = writeln!(
                h,
                "<p><a href=\"{png}\"><img src=\"{svg}\" alt=\"{title}\"></a><br>\
                 <a href=\"{svg}\">SVG</a> · <a href=\"{png}\">PNG</a></p>",
                png = esc(png),
                svg = esc(svg),
                title = esc(title)
            );
        }
    }
    h.push_str("</body>\n</html>\n");
    h
}

fn headline_table(h: &mut String, page: &Page<'_>) {
    h.push_str(
        "<table>\n<tr><th>test</th><th>p</th><th>runtime</th><th>smallest size</th>\
         <th>value</th><th>largest size</th><th>value</th><th>unit</th></tr>\n",
    );
    for section in page
        .sections
        .iter()
        .filter(|s| !matches!(s.spec.kind, Kind::Speedup | Kind::AgainstK))
    {
        let test = section.spec.name;
        let mut keys: Vec<(usize, usize, &str)> = page
            .rows
            .iter()
            .filter(|r| r.test == test)
            .map(|r| (r.p, runtime_rank(&r.runtime), r.runtime.as_str()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for (p, _, runtime) in keys {
            let mut rows: Vec<&Row> = page
                .rows
                .iter()
                .filter(|r| r.test == test && r.p == p && r.runtime == runtime)
                .collect();
            rows.sort_by_key(|r| r.size);
            let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
                continue;
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"num\">{p}</td><td>{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td>{}</td></tr>",
                esc(test),
                esc(runtime_name(runtime)),
                size_text(first.size),
                value_text(first.value),
                size_text(last.size),
                value_text(last.value),
                esc(&first.unit)
            );
        }
    }
    h.push_str("</table>\n");
}

/// Speed-up over 1 rank and parallel time of each example (rows) at each p (columns).
fn speedup_table(h: &mut String, page: &Page<'_>) {
    let rows: Vec<&Row> = page
        .rows
        .iter()
        .filter(|r| r.test == "applications" && r.runtime == PHALANX)
        .collect();
    let mut ps: Vec<usize> = rows.iter().map(|r| r.p).collect();
    ps.sort_unstable();
    ps.dedup();
    if ps.is_empty() {
        return;
    }
    h.push_str(
        "<p>Each example's rank 0 runs the sequential code in the same job and prints \
         sequential time / parallel time; one job per example and p.</p>\n\
         <table>\n<tr><th>application</th>",
    );
    for p in &ps {
        let _ = write!(h, "<th>p = {p}</th>");
    }
    h.push_str("</tr>\n");
    for app in &APPS {
        if !rows.iter().any(|r| r.variant == app.name) {
            continue;
        }
        let _ = write!(
            h,
            "<tr><td>{} ({})</td>",
            esc(app.name),
            esc(app.problem(page.quick))
        );
        for &p in &ps {
            let value = |unit: &str| {
                rows.iter()
                    .find(|r| r.variant == app.name && r.p == p && r.unit == unit)
                    .map(|r| r.value)
            };
            match (value(SPEEDUP), value("s")) {
                (Some(s), Some(t)) => {
                    let _ = write!(h, "<td class=\"num\">{s:.2}× ({})</td>", seconds_text(t));
                }
                _ => h.push_str("<td class=\"num\">–</td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n<p>Cells: speed-up (parallel time).</p>\n");
}

/// Time per k of the multicast all-gather and of the default algorithm.
fn k_table(h: &mut String, page: &Page<'_>) {
    let mut rows: Vec<&Row> = page
        .rows
        .iter()
        .filter(|r| r.test == "allgather_k" && r.runtime == PHALANX)
        .collect();
    let Some(first) = rows.first() else {
        return;
    };
    let _ = writeln!(
        h,
        "<p>phalanx-bench allgather of {} per rank at p = {}, one job per k with \
         PHALANX_COLL_ALLGATHER=mcast2 PHALANX_COLL_ALLGATHER_K=k, and one with both \
         variables unset (the default algorithm).</p>",
        size_text(first.size),
        first.p
    );
    // k ascending, the default last.
    rows.sort_by_key(|r| variant_k(&r.variant).map_or(u32::MAX, u32::from));
    h.push_str("<table>\n<tr><th>algorithm</th><th>time per call</th><th>unit</th></tr>\n");
    for r in rows {
        let what = if r.variant == DEFAULT_VARIANT {
            "default".to_string()
        } else {
            format!("mcast2, {}", r.variant)
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            esc(&what),
            value_text(r.value),
            esc(&r.unit)
        );
    }
    h.push_str("</table>\n");
}

/// 0.0123 s, 1.50 s.
fn seconds_text(t: f64) -> String {
    if t < 1.0 {
        format!("{t:.4} s")
    } else {
        format!("{t:.2} s")
    }
}

fn runtime_rank(runtime: &str) -> usize {
    RUNTIME_ORDER
        .iter()
        .position(|r| *r == runtime)
        .unwrap_or(RUNTIME_ORDER.len())
}

fn size_text(size: usize) -> String {
    match size {
        0 => "–".into(),
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

fn value_text(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Escapes `&`, `<`, `>` and `"`.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::plan::spec;
    use super::*;

    #[test]
    fn page_shows_plots_headlines_and_failures() {
        let rows = vec![
            Row {
                test: "latency".into(),
                p: 2,
                size: 1,
                value: 0.5,
                unit: "us".into(),
                runtime: "phalanx".into(),
                variant: String::new(),
            },
            Row {
                test: "latency".into(),
                p: 2,
                size: 4096,
                value: 3.25,
                unit: "us".into(),
                runtime: "phalanx".into(),
                variant: String::new(),
            },
        ];
        let sections = [Section {
            spec: spec("latency").unwrap(),
            plots: vec![("t".into(), "latency.svg".into(), "latency.png".into())],
        }];
        let html = render(&Page {
            facts: &[("command".into(), "a <b> & c".into())],
            failures: &["bcast p=2: timed out".into()],
            rows: &rows,
            sections: &sections,
            quick: false,
        });
        assert!(html.contains("<img src=\"latency.svg\""));
        assert!(html.contains("href=\"latency.png\""));
        assert!(html.contains("a &lt;b&gt; &amp; c"));
        assert!(html.contains("bcast p=2: timed out"));
        assert!(html.contains("<td class=\"num\">1 B</td><td class=\"num\">0.50</td>"));
        assert!(html.contains("<td class=\"num\">4 KiB</td><td class=\"num\">3.25</td>"));
    }

    #[test]
    fn applications_and_allgather_k_have_their_tables() {
        let row = |test: &str, p, size, value, unit: &str, variant: &str| Row {
            test: test.into(),
            p,
            size,
            value,
            unit: unit.into(),
            runtime: "phalanx".into(),
            variant: variant.into(),
        };
        let rows = vec![
            row("applications", 1, 0, 1.0, SPEEDUP, "spmv"),
            row("applications", 1, 0, 0.25, "s", "spmv"),
            row("applications", 2, 0, 1.5, SPEEDUP, "spmv"),
            row("applications", 2, 0, 0.125, "s", "spmv"),
            row("allgather_k", 4, 65536, 20.5, "us", "default"),
            row("allgather_k", 4, 65536, 80.25, "us", "k=1"),
        ];
        let sections = [
            Section {
                spec: spec("allgather_k").unwrap(),
                plots: Vec::new(),
            },
            Section {
                spec: spec("applications").unwrap(),
                plots: Vec::new(),
            },
        ];
        let html = render(&Page {
            facts: &[],
            failures: &[],
            rows: &rows,
            sections: &sections,
            quick: false,
        });
        assert!(html.contains("<th>p = 1</th><th>p = 2</th>"), "{html}");
        assert!(
            html.contains("<td>spmv (n = 20000, 100 iterations)</td>"),
            "{html}"
        );
        assert!(html.contains("1.50× (0.1250 s)"), "{html}");
        assert!(!html.contains("matmul ("), "no row without figures");
        let k1 = html.find("mcast2, k=1").expect("k=1 row");
        let default = html.find("<td>default</td>").expect("default row");
        assert!(k1 < default, "k ascending, the default last");
        assert!(html.contains("64 KiB per rank at p = 4"));
        assert!(
            !html.contains("<td>applications</td>") && !html.contains("<td>allgather_k</td>"),
            "no headline rows for them"
        );
    }
}
