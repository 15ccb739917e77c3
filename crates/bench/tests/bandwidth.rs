//! The windowed bandwidth tests (bw, bibw, mbw_mr) complete at tiny sizes and print one
//! row per size with the expected columns; mbw_mr also with two pairs and with an odd
//! rank count (the last rank idle, as in osu_mbw_mr). Only completion and the table's
//! shape are asserted, never the figures beyond being numbers (positive at the largest
//! size: a loaded machine may print 0.00 MB/s for one byte).

mod common;

use common::launcher;
use std::process::Command;

/// Runs `phalanx-bench test` on `n` ranks at 1 … 64 bytes and checks that every size has
/// a row of `columns` positive values.
fn table(n: u32, test: &str, columns: usize) {
    let out = Command::new(launcher())
        .args(["run", "-n", &n.to_string(), "--timeout", "120"])
        .arg(env!("CARGO_BIN_EXE_phalanx-bench"))
        .args([test, "-m", "1:64", "-i", "5", "-x", "1", "-W", "8"])
        .env_remove("PHALANX_FAULTS")
        .env_remove("PHALANX_BOOT")
        .output()
        .expect("run the launcher");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{test} -n {n}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let sizes: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(
        sizes,
        ["1", "2", "4", "8", "16", "32", "64"],
        "{test} -n {n}\n{stdout}"
    );
    for row in &rows {
        assert_eq!(row.len(), 1 + columns, "{test} -n {n}\n{stdout}");
        for value in &row[1..] {
            let v: f64 = value.parse().expect("a number");
            // Two decimals of MB/s: a loaded machine can print 0.00 for a few bytes.
            assert!(v >= 0.0, "{test} -n {n}\n{stdout}");
        }
    }
    // The largest size moves some bytes whatever the load.
    let last = rows.last().expect("rows");
    assert!(
        last[1..]
            .iter()
            .all(|v| v.parse::<f64>().is_ok_and(|v| v > 0.0)),
        "{test} -n {n}\n{stdout}"
    );
}

#[test]
fn bw_and_bibw_print_one_column() {
    table(2, "bw", 1);
    table(2, "bibw", 1);
}

#[test]
fn mbw_mr_prints_bandwidth_and_message_rate() {
    table(2, "mbw_mr", 2);
    table(4, "mbw_mr", 2);
    table(3, "mbw_mr", 2);
}
