//! `phalanx run --stats`: the job's counters, gathered from every rank at Finalize
//! ([`phalanx_boot::RankStats`]) and printed at exit as one summary — a table per rank
//! with a total row, drops by reason, and how often each collective ran with each
//! algorithm — or written as one JSON document (`--stats=json` on stderr,
//! `--stats=json:FILE` to a file).
//!
//! Contract: the summary covers the ranks that reached Finalize and sent their counters;
//! the others are listed as missing (a rank that crashed sends nothing). Totals are sums
//! over the ranks that reported, except `window` and `mac` (per-rank settings, not
//! summed). The summary goes to stderr, never into the program's stdout; nothing here
//! fails the job — a file that cannot be written is reported and the job's exit code
//! stays what it was.

use phalanx_boot::RankStats;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How `--stats` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsOut {
    /// A table on stderr (`--stats`, `--stats=table`).
    Table,
    /// JSON on stderr (`--stats=json`) or to a file (`--stats=json:FILE`).
    Json(Option<PathBuf>),
}

/// Parses the value of `--stats`.
pub fn parse_stats_out(v: &str) -> Result<StatsOut, String> {
    match v {
        "" | "table" => Ok(StatsOut::Table),
        "json" => Ok(StatsOut::Json(None)),
        _ => match v.strip_prefix("json:") {
            Some(f) if !f.is_empty() => Ok(StatsOut::Json(Some(PathBuf::from(f)))),
            _ => Err(format!("{v:?}: expected table, json or json:FILE")),
        },
    }
}

/// Counters that are settings of a rank rather than events: reported, never summed.
const NOT_SUMMED: [&str; 2] = ["window", "mac"];

/// The drop counters, by reason.
const DROPS: [&str; 9] = [
    "drop_malformed",
    "drop_foreign",
    "drop_duplicate",
    "drop_out_of_window",
    "drop_invalid",
    "drop_no_buffer",
    "kernel_drops",
    "bad_mac",
    "drop_not_target",
];

/// The whole job's summary (also its JSON form).
#[derive(Serialize, Debug, PartialEq)]
pub struct JobStats {
    /// Ranks in the job.
    pub ranks: usize,
    /// Ranks that sent no counters (they did not reach Finalize).
    pub missing: Vec<usize>,
    /// Every counter per reporting rank.
    pub per_rank: BTreeMap<usize, BTreeMap<String, u64>>,
    /// Sums over the reporting ranks.
    pub total: BTreeMap<String, u64>,
    /// Collective calls per kind and algorithm, summed over the reporting ranks (each
    /// member of a call counts it once).
    pub collectives: BTreeMap<String, BTreeMap<String, u64>>,
}

impl JobStats {
    /// The summary of `ranks` (index = rank; `None` = did not report).
    pub fn new(ranks: &[Option<RankStats>]) -> JobStats {
        let mut s = JobStats {
            ranks: ranks.len(),
            missing: Vec::new(),
            per_rank: BTreeMap::new(),
            total: BTreeMap::new(),
            collectives: BTreeMap::new(),
        };
        for (r, st) in ranks.iter().enumerate() {
            let Some(st) = st else {
                s.missing.push(r);
                continue;
            };
            let mut mine = BTreeMap::new();
            for (name, v) in &st.counters {
                mine.insert(name.clone(), *v);
                if !NOT_SUMMED.contains(&name.as_str()) {
                    let t = s.total.entry(name.clone()).or_insert(0);
                    *t = t.saturating_add(*v);
                }
            }
            s.per_rank.insert(r, mine);
            for (kind, alg, n) in &st.collectives {
                let t = s
                    .collectives
                    .entry(kind.clone())
                    .or_default()
                    .entry(alg.clone())
                    .or_insert(0);
                *t = t.saturating_add(*n);
            }
        }
        s
    }

    /// The table form (module docs).
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let reported = self.per_rank.len();
        let _ = writeln!(
            out,
            "phalanx: job statistics: {reported} of {} ranks reported{}",
            self.ranks,
            if self.missing.is_empty() {
                String::new()
            } else {
                format!(" (missing: {:?})", self.missing)
            }
        );
        let cols: [(&str, &Cell); 12] = [
            ("eager msgs", &|m| num(m, "eager_sent")),
            ("eager bytes", &|m| bytes(get(m, "eager_bytes"))),
            ("rndv msgs", &|m| num(m, "rndv_sent")),
            ("rndv bytes", &|m| bytes(get(m, "rndv_bytes"))),
            ("coll calls", &|m| num(m, "coll_calls")),
            ("coll bytes", &|m| bytes(get(m, "coll_bytes"))),
            ("datagrams", &|m| num(m, "sent")),
            ("shm frames", &|m| num(m, "shm_sent")),
            ("retrans", &|m| num(m, "retransmits")),
            ("dups", &|m| num(m, "drop_duplicate")),
            ("drops", &|m| {
                let drops = DROPS.iter().filter(|&&d| d != "drop_duplicate");
                drops.map(|d| get(m, d)).sum::<u64>().to_string()
            }),
            ("waiting", &|m| millis(get(m, "wait_ns"))),
        ];
        let mut rows: Vec<(String, Vec<String>)> = self
            .per_rank
            .iter()
            .map(|(r, m)| (r.to_string(), cols.iter().map(|(_, f)| f(m)).collect()))
            .collect();
        rows.push((
            "total".into(),
            cols.iter().map(|(_, f)| f(&self.total)).collect(),
        ));
        let mut widths: Vec<usize> = cols.iter().map(|(h, _)| h.len()).collect();
        for (_, cells) in &rows {
            for (w, c) in widths.iter_mut().zip(cells) {
                *w = (*w).max(c.len());
            }
        }
        let _ = write!(out, "{:<6}", "rank");
        for ((h, _), w) in cols.iter().zip(&widths) {
            let _ = write!(out, "  {h:>w$}");
        }
        out.push('\n');
        for (name, cells) in &rows {
            let _ = write!(out, "{name:<6}");
            for (c, w) in cells.iter().zip(&widths) {
                let _ = write!(out, "  {c:>w$}");
            }
            out.push('\n');
        }
        let drops: Vec<String> = DROPS
            .iter()
            .filter(|d| get(&self.total, d) > 0)
            .map(|d| format!("{d}={}", get(&self.total, d)))
            .collect();
        let _ = writeln!(
            out,
            "drops by reason: {}",
            if drops.is_empty() {
                "none".to_string()
            } else {
                drops.join(" ")
            }
        );
        let _ = writeln!(
            out,
            "go-back-n: timeouts={} fast_retransmits={} spurious_timeouts={} pure_acks={}; \
             URTP: multicasts={} re-sent={} REQs={}; waits={}",
            get(&self.total, "timeouts"),
            get(&self.total, "fast_retransmits"),
            get(&self.total, "spurious_timeouts"),
            get(&self.total, "pure_acks"),
            get(&self.total, "urtp_multicasts"),
            get(&self.total, "urtp_resent"),
            get(&self.total, "urtp_reqs"),
            get(&self.total, "waits"),
        );
        if self.collectives.is_empty() {
            out.push_str("collectives: none\n");
        } else {
            out.push_str("collectives (calls summed over the ranks, by algorithm):\n");
            for (kind, algs) in &self.collectives {
                let list: Vec<String> = algs.iter().map(|(a, n)| format!("{a} {n}")).collect();
                let _ = writeln!(out, "  {kind:<22} {}", list.join(", "));
            }
        }
        out
    }
}

/// One column's cell from a rank's (or the total's) counters.
type Cell = dyn Fn(&BTreeMap<String, u64>) -> String;

fn get(m: &BTreeMap<String, u64>, k: &str) -> u64 {
    m.get(k).copied().unwrap_or(0)
}

fn num(m: &BTreeMap<String, u64>, k: &str) -> String {
    get(m, k).to_string()
}

/// Bytes with a binary unit (B, KiB, MiB, GiB).
fn bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Nanoseconds as milliseconds with one decimal.
fn millis(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// Prints or writes the summary of `ranks` as `out` asks (module docs).
pub fn report(out: &StatsOut, ranks: &[Option<RankStats>]) {
    let s = JobStats::new(ranks);
    match out {
        StatsOut::Table => eprint!("{}", s.table()),
        StatsOut::Json(dest) => {
            let json = serde_json::to_string_pretty(&s)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
            match dest {
                None => eprintln!("{json}"),
                Some(path) => {
                    if let Err(e) = std::fs::write(path, json + "\n") {
                        eprintln!("phalanx: --stats: cannot write {}: {e}", path.display());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(sent: u64, alg: &str) -> RankStats {
        RankStats {
            counters: vec![
                ("sent".into(), sent),
                ("eager_bytes".into(), 3 << 20),
                ("drop_foreign".into(), 2),
                ("window".into(), 128),
                ("wait_ns".into(), 2_500_000),
            ],
            collectives: vec![("all_reduce".into(), alg.into(), 10)],
        }
    }

    #[test]
    fn the_summary_sums_what_is_summed_and_names_the_missing() {
        let s = JobStats::new(&[Some(rank(5, "shm")), None, Some(rank(7, "rd"))]);
        assert_eq!(s.missing, vec![1]);
        assert_eq!(s.total["sent"], 12);
        assert_eq!(s.total.get("window"), None);
        assert_eq!(s.per_rank[&2]["window"], 128);
        assert_eq!(s.collectives["all_reduce"]["shm"], 10);
        assert_eq!(s.collectives["all_reduce"]["rd"], 10);
        let t = s.table();
        assert!(t.contains("2 of 3 ranks reported (missing: [1])"), "{t}");
        assert!(t.contains("drops by reason: drop_foreign=4"), "{t}");
        assert!(
            t.contains("all_reduce") && t.contains("rd 10, shm 10"),
            "{t}"
        );
        assert!(t.contains("6.0 MiB") && t.contains("5.0 ms"), "{t}");
        let total = t
            .lines()
            .find(|l| l.starts_with("total"))
            .expect("a total row");
        assert!(total.contains(" 12 "), "{total}");
        let j: serde_json::Value = serde_json::to_value(&s).expect("json");
        assert_eq!(j["total"]["sent"], 12);
        assert_eq!(j["collectives"]["all_reduce"]["rd"], 10);
    }

    #[test]
    fn the_option_parses() {
        assert_eq!(parse_stats_out(""), Ok(StatsOut::Table));
        assert_eq!(parse_stats_out("table"), Ok(StatsOut::Table));
        assert_eq!(parse_stats_out("json"), Ok(StatsOut::Json(None)));
        assert_eq!(
            parse_stats_out("json:/tmp/x.json"),
            Ok(StatsOut::Json(Some("/tmp/x.json".into())))
        );
        assert!(parse_stats_out("json:").is_err());
        assert!(parse_stats_out("yaml").is_err());
    }
}
