//! Reading the OSU-shaped tables rank 0 prints (see `report.rs` and `bench/compare.py`).
//!
//! A table is `#` comment lines, a column header, then rows. The header is `# Size` or
//! `# Words` followed by value columns (names separated by two or more spaces, such as
//! `Latency (us)` or `MB/s  Messages/s`), or, for a one-value test (barrier), `# Avg
//! Latency(us)` followed by the value alone, which is read as size 0. Sizes under
//! `# Words` are 8-byte words and come out in bytes. The unit is the text in the chosen
//! column's parentheses, else its whole name. Lines that are not numbers are skipped:
//! [`parse`] never fails, it returns `None` when no row was read.
//!
//! The example applications print no table but one line from rank 0 (see
//! `crates/phalanx/examples/{matmul,spmv,jacobi}.rs`): `<name>: ..., time T s ...,
//! speed-up over 1 rank S (...)`, ending in ` MISMATCH` when the result was wrong.
//! [`parse_app`] reads T and S from the first such line.

use crate::options::WORD;

/// One table: its unit and `(size in bytes, value)` rows in the order printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Unit of the values, e.g. `us`, `MB/s`, `Messages/s`, `ms`.
    pub unit: String,
    /// `(size in bytes, value)`.
    pub rows: Vec<(usize, f64)>,
}

/// Parses the first table in `text`, taking the values from the column named `column`
/// when the header has it, else from the first value column.
pub fn parse(text: &str, column: Option<&str>) -> Option<Table> {
    let mut unit = None;
    let mut index = 0;
    let mut scale = 1;
    let mut rows = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            let (first, rest) = comment
                .split_once(char::is_whitespace)
                .unwrap_or((comment, ""));
            if first == "Size" || first == "Words" {
                let names = split_columns(rest);
                index = column
                    .and_then(|c| names.iter().position(|n| *n == c))
                    .unwrap_or(0);
                unit = names.get(index).map(|n| unit_of(n));
                scale = if first == "Words" { WORD } else { 1 };
            } else if comment.starts_with("Avg Latency") && unit.is_none() {
                unit = Some(unit_of(comment));
                index = 0;
            }
            continue;
        }
        if unit.is_none() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [value] => {
                if let Ok(v) = value.parse::<f64>() {
                    rows.push((0, v));
                }
            }
            [size, values @ ..] => {
                if let (Ok(size), Some(Ok(v))) = (
                    size.parse::<usize>(),
                    values.get(index).map(|v| v.parse::<f64>()),
                ) {
                    rows.push((size * scale, v));
                }
            }
            [] => {}
        }
    }
    let unit = unit?;
    (!rows.is_empty()).then_some(Table { unit, rows })
}

/// What an example application's line says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppLine {
    /// The parallel phase's time, seconds.
    pub time: f64,
    /// Sequential time / parallel time, both measured in the job.
    pub speedup: f64,
}

/// The first line of `text` that starts with `<name>: ` and has both `, time T s` and
/// `speed-up over 1 rank S` (finite, non-negative), unless it reports a mismatch.
pub fn parse_app(text: &str, name: &str) -> Option<AppLine> {
    let prefix = format!("{name}: ");
    let number_after = |line: &str, key: &str| -> Option<f64> {
        let rest = &line[line.find(key)? + key.len()..];
        let token = rest.split(|c: char| c.is_whitespace() || c == ',').next()?;
        token
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with(&prefix) && !l.ends_with("MISMATCH"))
        .find_map(|line| {
            Some(AppLine {
                time: number_after(line, ", time ")?,
                speedup: number_after(line, "speed-up over 1 rank ")?,
            })
        })
}

/// Column names separated by runs of two or more spaces.
fn split_columns(s: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let end = rest.find("  ").unwrap_or(rest.len());
        names.push(rest[..end].trim());
        rest = rest[end..].trim_start();
    }
    names
}

/// `Latency (us)` → `us`; `Avg Latency(us)` → `us`; `Messages/s` → `Messages/s`.
pub fn unit_of(name: &str) -> String {
    match (name.rfind('('), name.rfind(')')) {
        (Some(open), Some(close)) if open < close => name[open + 1..close].trim().to_string(),
        _ => name.trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_column() {
        let text = "# OSU-style phalanx Latency Test\n# Size          Latency (us)\n\
                    1                         0.50\n4096                      2.25\n";
        let t = parse(text, None).unwrap();
        assert_eq!(t.unit, "us");
        assert_eq!(t.rows, vec![(1, 0.5), (4096, 2.25)]);
    }

    #[test]
    fn chosen_column_and_words() {
        let text = "# OSU-style phalanx Multiple Bandwidth / Message Rate Test\n\
                    # [ pairs: 1 ] [ window size: 64 ]\n\
                    # Size                  MB/s        Messages/s\n\
                    1                       2.00       2000000.00\n";
        let t = parse(text, Some("Messages/s")).unwrap();
        assert_eq!((t.unit.as_str(), t.rows[0]), ("Messages/s", (1, 2e6)));
        let t = parse(text, None).unwrap();
        assert_eq!((t.unit.as_str(), t.rows[0]), ("MB/s", (1, 2.0)));
        let text = "# OSU-style phalanx Ring Latency (p = 2) Test\n\
                    # Words       Hop latency (us)\n1   0.30\n100   1.50\n";
        let t = parse(text, None).unwrap();
        assert_eq!(t.unit, "us");
        assert_eq!(t.rows, vec![(8, 0.3), (800, 1.5)]);
        let text = "# OSU-style phalanx Chain Throughput (p = 2) Test\n\
                    # Size     Throughput (MB/s)\n8     12.50\n";
        assert_eq!(parse(text, None).unwrap().unit, "MB/s");
    }

    #[test]
    fn barrier_and_garbage() {
        let text = "# OSU-style phalanx Barrier Latency Test\n# Avg Latency(us)\n   1.25\n";
        let t = parse(text, None).unwrap();
        assert_eq!(
            (t.unit.as_str(), t.rows.as_slice()),
            ("us", &[(0, 1.25)][..])
        );
        assert_eq!(parse("", None), None);
        assert_eq!(parse("hello\n# Size  Latency (us)\nx y\n", None), None);
        assert_eq!(
            parse("1 2\n3 4\n", None),
            None,
            "rows before a header are not a table"
        );
    }

    #[test]
    fn application_lines() {
        let matmul = "matmul: n=512, p=4, time 0.091446 s, speed-up over 1 rank 1.01 \
                      (Allgather 0.000024 s; sequential 0.011433 s on rank 0; mean of 3 runs; \
                      max abs error 0.000e0)\n";
        assert_eq!(
            parse_app(matmul, "matmul"),
            Some(AppLine {
                time: 0.091446,
                speedup: 1.01
            })
        );
        let spmv = "spmv: n=20000, nnz=80000 (density 0.0200 %), p=2, 100 iterations, \
                    time 0.101617 s (1016.2 us/iteration), speed-up over 1 rank 0.85 \
                    (sequential 0.086 s on rank 0; max relative error 0.000e0)";
        assert_eq!(parse_app(spmv, "spmv").map(|a| a.speedup), Some(0.85));
        let jacobi = "log line\njacobi: n=64, p=8, 1000 iterations (last change 2.342e-4, \
                      tolerance 0e0), time 0.654915 s (654.9 us/iteration), speed-up over 1 \
                      rank 0.10 (sequential 0.06 s on rank 0, 1000 iterations; bit-identical)\n";
        assert_eq!(
            parse_app(jacobi, "jacobi"),
            Some(AppLine {
                time: 0.654915,
                speedup: 0.10
            })
        );
        assert_eq!(parse_app(jacobi, "spmv"), None, "another example's line");
        let wrong = "matmul: n=8, p=2, time 0.1 s, speed-up over 1 rank 1.00 (...) MISMATCH";
        assert_eq!(parse_app(wrong, "matmul"), None);
        assert_eq!(parse_app("matmul: n=8, p=2, time x s", "matmul"), None);
    }
}
