//! `index.html`: the report as one page.
//!
//! The page has a table of facts about the run, the steps that failed, a table of
//! headline numbers (for each test, rank count and runtime: the value at the smallest and
//! at the largest size), then one section per test with its plots as `<img>` of the SVG,
//! each a link to the PNG. It refers to files by their names in the same directory, and
//! escapes every piece of text it did not write itself.

use super::plan::Spec;
use super::results::{runtime_name, Row, RUNTIME_ORDER};
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
         the smallest and at the largest message size measured. Every figure is in \
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
    for section in page.sections {
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
            },
            Row {
                test: "latency".into(),
                p: 2,
                size: 4096,
                value: 3.25,
                unit: "us".into(),
                runtime: "phalanx".into(),
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
        });
        assert!(html.contains("<img src=\"latency.svg\""));
        assert!(html.contains("href=\"latency.png\""));
        assert!(html.contains("a &lt;b&gt; &amp; c"));
        assert!(html.contains("bcast p=2: timed out"));
        assert!(html.contains("<td class=\"num\">1 B</td><td class=\"num\">0.50</td>"));
        assert!(html.contains("<td class=\"num\">4 KiB</td><td class=\"num\">3.25</td>"));
    }
}
