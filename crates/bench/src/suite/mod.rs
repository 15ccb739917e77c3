//! `phalanx-bench report`: runs a benchmark suite as a user would and writes a report.
//!
//! ```text
//! phalanx-bench report [--peer openmpi] [--out DIR] [--quick] [--np 2,4,8]
//!                      [--tests latency,bcast,...] [--pairs N] [--step-timeout S] [--no-plots]
//! ```
//!
//! Contract: every figure comes from a real job, `phalanx run -n P --timeout S
//! <phalanx-bench> TEST ARGS` (the launcher next to this executable, else on `$PATH`),
//! whose OSU-shaped table is parsed ([`table`]); the suite is [`plan::SPECS`] expanded
//! over `--np` ([`plan::steps`]). Two tests differ: `allgather_k` runs `phalanx-bench
//! allgather` with `PHALANX_COLL_ALLGATHER=mcast2 PHALANX_COLL_ALLGATHER_K=k` set for the
//! job (and both removed for its default-algorithm run), and `applications` runs the
//! example programs `<launcher dir>/examples/{matmul,spmv,jacobi}` (built by `cargo build
//! --release -p phalanx --examples`; when one is missing its runs are listed as failed
//! at the start and the suite goes on), reading the speed-up line each prints. With `--peer openmpi` `bench/compare.sh` (found above
//! this executable, or in `$PHALANX_REPO`) also runs the OSU tests as the same C source on
//! phalanx and on Open MPI ([`peer`]). Every child runs under a time limit and is stopped,
//! with what it started, on that limit or on SIGINT/SIGTERM/SIGHUP ([`runner`]); a failed
//! step is reported by name and the suite goes on (a signal stops it). DIR then holds
//! `results.csv` and `results.json` ([`results`]), `<test>.svg`/`.png` (`applications`:
//! speed-up against p with the ideal; `allgather_k`: time against k with the default
//! algorithm's level) and, with a peer,
//! `<test>-ratio.svg`/`.png` ([`plot`]), `index.html` ([`html`]) and every job's raw
//! output under `raw/` (compare.sh's under `peer/`). The exit status is 0 when every step
//! gave figures, 1 when some failed, 2 when the report could not start (no launcher, no
//! font, bad arguments), 130 when stopped by a signal. The progress bar (steps done of
//! all, elapsed time) is drawn only when stderr is a terminal.

mod html;
mod peer;
mod plan;
mod plot;
mod results;
mod runner;
mod table;

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use plan::{Job, Step};
use results::{Row, PHALANX, SPEEDUP};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The launcher's own `--timeout` is the step limit; the report stops the job this much
/// later, leaving the launcher time to say what the ranks wait on and end them.
const LAUNCHER_GRACE: Duration = Duration::from_secs(30);

/// Which other MPI to measure beside phalanx.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Peer {
    /// Open MPI, through bench/compare.sh (installs it when mpirun is missing).
    Openmpi,
}

/// Runs a benchmark suite through the launcher and writes results, plots and a page.
#[derive(Debug, Parser)]
#[command(
    name = "phalanx-bench report",
    bin_name = "phalanx-bench report",
    version
)]
pub struct ReportArgs {
    /// Also measure the OSU tests on this MPI: the same C source on both runtimes, through
    /// bench/compare.sh, over shared memory on both sides (PEER_BTL=tcp,self: phalanx's
    /// UDP against Open MPI's TCP; compare.sh's other variables pass through too).
    #[arg(long, value_enum)]
    pub peer: Option<Peer>,
    /// Output directory (default: REPO/bench/results/report-YYYYMMDD-HHMMSS in UTC, or
    /// ./phalanx-report outside the repository).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A tiny suite: sizes to 4 KiB, a few iterations, p = 2 unless --np says otherwise.
    #[arg(long)]
    pub quick: bool,
    /// Rank counts of the collectives and seed-003 tests, comma-separated (default 2,4,8;
    /// 2 with --quick). The point-to-point tests always run at 2.
    #[arg(long, value_name = "P,P,...")]
    pub np: Option<String>,
    /// Only these tests, comma-separated (latency bw mbw_mr bcast allgather gather scatter
    /// reduce allreduce alltoall barrier ring chain flood allgather_k applications;
    /// applications needs the examples built and is not in --quick unless named here).
    #[arg(long, value_name = "TEST,TEST,...")]
    pub tests: Option<String>,
    /// --peer: alternating (phalanx, peer) runs per test, of which the medians are shown.
    #[arg(long, default_value_t = 3)]
    pub pairs: usize,
    /// Seconds before one job is stopped (default 600; 120 with --quick).
    #[arg(long, value_name = "SECONDS")]
    pub step_timeout: Option<u64>,
    /// Write the figures and the page without plots (no font needed).
    #[arg(long)]
    pub no_plots: bool,
}

/// A failure before any measurement: bad arguments or a missing tool.
struct Setup(String);

/// Entry point of the subcommand: `args` starts with the subcommand's own name.
/// Returns the process's exit status.
pub fn main<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    let args = ReportArgs::parse_from(args);
    match report(&args) {
        Ok(status) => status,
        Err(Setup(e)) => {
            eprintln!("phalanx-bench report: {e}");
            2
        }
    }
}

/// What the run found out, for the page.
struct Outcome {
    rows: Vec<Row>,
    failures: Vec<String>,
    interrupted: bool,
}

fn report(args: &ReportArgs) -> Result<i32, Setup> {
    let started = Instant::now();
    let tests = plan::select(args.tests.as_deref(), args.quick).map_err(Setup)?;
    let default_np = if args.quick { "2" } else { "2,4,8" };
    let np = plan::parse_np(args.np.as_deref().unwrap_or(default_np)).map_err(Setup)?;
    let limit = Duration::from_secs(
        args.step_timeout
            .unwrap_or(if args.quick { 120 } else { 600 })
            .max(1),
    );
    let font = if args.no_plots {
        None
    } else {
        Some(plot::load_font().map_err(Setup)?)
    };
    let launcher = runner::launcher().map_err(Setup)?;
    let bench = runner::bench().map_err(Setup)?;
    let examples = runner::examples(&launcher);
    let repo = runner::repo();
    if args.peer.is_some() && repo.is_none() {
        return Err(Setup(
            "--peer needs bench/compare.sh: run the phalanx-bench of a phalanx checkout, \
             or set PHALANX_REPO to the checkout"
                .into(),
        ));
    }
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => match &repo {
            Some(r) => r
                .join("bench/results")
                .join(format!("report-{}", utc_stamp(SystemTime::now()))),
            None => PathBuf::from("phalanx-report"),
        },
    };
    std::fs::create_dir_all(out.join("raw"))
        .map_err(|e| Setup(format!("cannot create {}: {e}", out.display())))?;
    let out = out.canonicalize().unwrap_or(out);
    runner::install_signal_handlers();

    let mut steps = plan::steps(&tests, &np, args.quick);
    // Examples that were not built: their runs fail now, by name, and are not started.
    let mut missing = Vec::new();
    steps.retain(|step| match step.job {
        Job::Example(name) if !examples.join(name).is_file() => {
            if !missing.contains(&name) {
                missing.push(name);
            }
            false
        }
        _ => true,
    });
    let invocations = match (&args.peer, &repo) {
        (Some(Peer::Openmpi), Some(_)) => peer::invocations(&tests, &np, &out),
        _ => Vec::new(),
    };
    let pairs = args.pairs.max(1);
    // Against a peer, phalanx-bench's own jobs use the medium of the comparison.
    let transport = args.peer.map(|_| peer::Transport::from_env());
    let total = steps.len() + invocations.iter().map(|i| i.runs(pairs)).sum::<usize>();
    let bar = progress_bar(total as u64);
    let mut outcome = Outcome {
        rows: Vec::new(),
        failures: Vec::new(),
        interrupted: false,
    };
    let release = examples
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "release");
    for name in missing {
        let failure = format!(
            "applications {name}: no program {} (build the examples: cargo build{} -p \
             phalanx --examples); its runs were skipped",
            examples.join(name).display(),
            if release { " --release" } else { "" }
        );
        say(&bar, &failure);
        outcome.failures.push(failure);
    }
    let jobs = Jobs {
        launcher: &launcher,
        bench: &bench,
        examples: &examples,
        transport: transport.as_ref().map(|t| t.phalanx.as_str()),
        limit,
        out: &out,
    };
    for step in &steps {
        bar.set_message(step.label());
        run_step(step, &jobs, &bar, &mut outcome);
        bar.inc(1);
        if outcome.interrupted {
            break;
        }
    }
    if let (false, Some(repo), Some(transport)) = (outcome.interrupted, &repo, &transport) {
        for (n, inv) in invocations.iter().enumerate() {
            let peer = PeerRun {
                repo,
                transport,
                quick: args.quick,
                pairs,
                limit,
                built: n > 0,
            };
            run_peer(inv, &peer, &bar, &mut outcome);
            if outcome.interrupted {
                break;
            }
        }
    }
    bar.finish_and_clear();

    let facts = facts(
        args,
        &np,
        transport.as_ref(),
        (&launcher, &bench),
        font.as_deref(),
        started,
        &outcome,
    );
    let mut sections = Vec::new();
    for &spec in &tests {
        let mut plots = Vec::new();
        if font.is_some() {
            for chart in plot::charts(spec, &outcome.rows, args.quick)
                .iter()
                .filter(|c| c.has_points())
            {
                match plot::render(chart, &out) {
                    Ok([svg, png]) => plots.push((chart.title.clone(), svg, png)),
                    Err(e) => outcome.failures.push(format!("plot {}: {e}", chart.stem)),
                }
            }
        }
        sections.push(html::Section { spec, plots });
    }
    let written = results::write(&out, &outcome.rows).and_then(|()| {
        html::write(
            &out,
            &html::Page {
                facts: &facts,
                failures: &outcome.failures,
                rows: &outcome.rows,
                sections: &sections,
                quick: args.quick,
            },
        )
    });
    if let Err(e) = written {
        eprintln!(
            "phalanx-bench report: cannot write into {}: {e}",
            out.display()
        );
        return Ok(1);
    }
    let plots: usize = sections.iter().map(|s| s.plots.len()).sum();
    eprintln!(
        "phalanx-bench report: {} figures, {} plots, {} failed, in {:.0} s",
        outcome.rows.len(),
        plots,
        outcome.failures.len(),
        started.elapsed().as_secs_f64()
    );
    println!("{}", out.join("index.html").display());
    Ok(if outcome.interrupted {
        130
    } else if outcome.failures.is_empty() {
        0
    } else {
        1
    })
}

fn progress_bar(total: u64) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) = ProgressStyle::with_template(
        "[{elapsed_precise}] {bar:30} {pos}/{len} steps ({eta} left) {wide_msg}",
    ) {
        bar.set_style(style);
    }
    if !bar.is_hidden() {
        bar.enable_steady_tick(Duration::from_millis(500));
    }
    bar
}

/// Says something on stderr without tearing the bar.
fn say(bar: &ProgressBar, message: &str) {
    bar.suspend(|| eprintln!("phalanx-bench report: {message}"));
}

/// What every step's job shares.
struct Jobs<'a> {
    launcher: &'a Path,
    bench: &'a Path,
    /// Where the example programs are.
    examples: &'a Path,
    /// `PHALANX_TRANSPORT` of the jobs, when a peer decides it.
    transport: Option<&'a str>,
    /// The launcher's `--timeout`.
    limit: Duration,
    /// The report's directory.
    out: &'a Path,
}

fn run_step(step: &Step, jobs: &Jobs<'_>, bar: &ProgressBar, outcome: &mut Outcome) {
    let Jobs {
        launcher,
        bench,
        examples,
        transport,
        limit,
        out,
    } = *jobs;
    let stdout = out.join("raw").join(format!("{}.txt", step.stem()));
    let stderr = out.join("raw").join(format!("{}.err", step.stem()));
    let mut cmd = Command::new(launcher);
    cmd.args(["run", "-n", &step.p.to_string(), "--timeout"])
        .arg(limit.as_secs().to_string());
    match step.job {
        Job::Bench(test) => cmd.arg(bench).arg(test),
        Job::Example(name) => cmd.arg(examples.join(name)),
    };
    cmd.args(&step.args);
    if let Some(transport) = transport {
        cmd.env("PHALANX_TRANSPORT", transport);
    }
    for (key, value) in &step.env {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let ran = runner::run(
        cmd,
        limit + LAUNCHER_GRACE,
        &runner::Outputs {
            stdout: &stdout,
            stderr: &stderr,
        },
        &mut |_| {},
    );
    // The launcher's own --timeout ended the job (its exit status 124).
    let ran = ran.map_err(|e| match e {
        runner::StepError::Failed(s) if s.code() == Some(124) => runner::StepError::Timeout(limit),
        e => e,
    });
    let parsed = ran.and_then(|()| {
        let text = std::fs::read_to_string(&stdout).map_err(runner::StepError::Io)?;
        rows_of(step, &text).ok_or(runner::StepError::NoTable)
    });
    match parsed {
        Ok(rows) => outcome.rows.extend(rows),
        Err(e) => {
            outcome.interrupted = matches!(e, runner::StepError::Interrupted(_));
            let failure = format!(
                "{} {e} (its output: {})",
                step.label(),
                relative(&stderr, out)
            );
            say(bar, &failure);
            outcome.failures.push(failure);
        }
    }
}

/// The figures in a step's output: its table's rows, or an example's speed-up and time.
fn rows_of(step: &Step, text: &str) -> Option<Vec<Row>> {
    let row = |size, value, unit: &str| Row {
        test: step.spec.name.to_string(),
        p: step.p,
        size,
        value,
        unit: unit.to_string(),
        runtime: PHALANX.to_string(),
        variant: step.variant.clone(),
    };
    match step.job {
        Job::Bench(_) => {
            let t = table::parse(text, step.spec.column)?;
            Some(
                t.rows
                    .into_iter()
                    .map(|(size, value)| row(size, value, &t.unit))
                    .collect(),
            )
        }
        Job::Example(name) => {
            let line = table::parse_app(text, name)?;
            Some(vec![row(0, line.speedup, SPEEDUP), row(0, line.time, "s")])
        }
    }
}

/// What every compare.sh invocation shares.
struct PeerRun<'a> {
    repo: &'a Path,
    transport: &'a peer::Transport,
    quick: bool,
    pairs: usize,
    /// One run's limit.
    limit: Duration,
    /// An earlier invocation has built the programs.
    built: bool,
}

fn run_peer(inv: &peer::Invocation, run: &PeerRun<'_>, bar: &ProgressBar, outcome: &mut Outcome) {
    let start = bar.position();
    let pairs = run.pairs;
    bar.set_message(format!(
        "bench/compare.sh, p={}: building and starting (Open MPI comparison)",
        inv.p
    ));
    let _ = std::fs::create_dir_all(&inv.dir);
    let cmd = peer::command(
        run.repo,
        inv,
        run.transport,
        run.quick,
        pairs,
        run.limit,
        run.built,
    );
    let (stdout, stderr) = (inv.dir.join("compare.out"), inv.dir.join("compare.err"));
    let mut started = 0u64;
    let ran = runner::run(
        cmd,
        peer::limit(inv, pairs, run.limit),
        &runner::Outputs {
            stdout: &stdout,
            stderr: &stderr,
        },
        &mut |line| {
            if peer::is_run_start(line) {
                bar.set_position(start + started);
                started += 1;
                bar.set_message(format!("{} (Open MPI comparison, p={})", &line[3..], inv.p));
            } else if line.starts_with("compare.sh:") {
                say(bar, line);
            }
        },
    );
    bar.set_position(start + inv.runs(pairs) as u64);
    let label = format!("bench/compare.sh at p={}", inv.p);
    if let Err(e) = ran {
        outcome.interrupted = matches!(e, runner::StepError::Interrupted(_));
        let failure = format!("{label} {e} (its output: {})", relative(&stderr, &inv.dir));
        say(bar, &failure);
        outcome.failures.push(failure);
    }
    match peer::import(inv) {
        Ok(rows) => outcome.rows.extend(rows),
        Err(e) => {
            let failure = format!("{label}: no medians: {e}");
            say(bar, &failure);
            outcome.failures.push(failure);
        }
    }
}

fn relative(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn facts(
    args: &ReportArgs,
    np: &[usize],
    transport: Option<&peer::Transport>,
    (launcher, bench): (&Path, &Path),
    font: Option<&Path>,
    started: Instant,
    outcome: &Outcome,
) -> Vec<(String, String)> {
    let command: Vec<String> = std::env::args().collect();
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let env: Vec<String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("PHALANX_"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut facts = vec![
        ("command".to_string(), command.join(" ")),
        ("date".into(), utc_text(SystemTime::now())),
        (
            "host".into(),
            format!(
                "{}, Linux {}, {cpus} CPUs, load {}",
                read("/proc/sys/kernel/hostname"),
                read("/proc/sys/kernel/osrelease"),
                read("/proc/loadavg")
            ),
        ),
        (
            "suite".into(),
            format!(
                "{}; rank counts {np:?} (point-to-point at 2, applications also at 1, \
                 allgather_k at {})",
                if args.quick { "quick" } else { "full" },
                plan::rank_counts(plan::Ranks::Near(4), np)[0]
            ),
        ),
        ("launcher".into(), launcher.display().to_string()),
        ("benchmark".into(), bench.display().to_string()),
        (
            "peer".into(),
            match (args.peer, transport) {
                (Some(Peer::Openmpi), Some(t)) => format!(
                    "Open MPI through bench/compare.sh, {} pairs (phalanx (C) and Open MPI: \
                     medians; raw runs and meta.txt under peer/); media: phalanx {}, \
                     Open MPI's BTLs {}",
                    args.pairs.max(1),
                    t.phalanx,
                    t.btl
                ),
                _ => "none".into(),
            },
        ),
        (
            "font".into(),
            font.map_or("none (--no-plots)".into(), |f| f.display().to_string()),
        ),
        (
            "took".into(),
            format!(
                "{:.0} s{}",
                started.elapsed().as_secs_f64(),
                if outcome.interrupted {
                    " (stopped by a signal)"
                } else {
                    ""
                }
            ),
        ),
    ];
    if !env.is_empty() {
        facts.push(("environment".into(), env.join(" ")));
    }
    facts
}

/// `[year, month, day, hour, minute, second]` of `t` in UTC.
fn utc(t: SystemTime) -> [i64; 6] {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, (secs % 86_400) as i64);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    [year, month, day, rem / 3600, rem / 60 % 60, rem % 60]
}

/// `YYYYMMDD-HHMMSS` of `t` in UTC (a directory name).
fn utc_stamp(t: SystemTime) -> String {
    let [y, mo, d, h, mi, s] = utc(t);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

/// `YYYY-MM-DD HH:MM:SS UTC` of `t`.
fn utc_text(t: SystemTime) -> String {
    let [y, mo, d, h, mi, s] = utc(t);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(UNIX_EPOCH), "19700101-000000");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_210_096); // 2024-02-29 12:34:56
        assert_eq!(utc_stamp(t), "20240229-123456");
        assert_eq!(utc_text(t), "2024-02-29 12:34:56 UTC");
    }

    #[test]
    fn arguments() {
        let a = ReportArgs::parse_from(["report", "--quick", "--np", "2,4", "--out", "/x"]);
        assert!(a.quick && a.peer.is_none());
        assert_eq!(a.np.as_deref(), Some("2,4"));
        let a = ReportArgs::parse_from(["report", "--peer", "openmpi", "--tests", "latency"]);
        assert_eq!(a.peer, Some(Peer::Openmpi));
    }
}
