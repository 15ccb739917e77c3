//! The cost model of seed 002 §2 as a job uses it: the send, transmit and receive lines
//! of [`phalanx_transport::cost`] (re-exported here), and from them λ, the postal
//! model's ratio, that shapes the broadcast, reduction and gather trees.
//!
//! Contract:
//! * A rank's figures are `PHALANX_COST` (`send=A+B,xmit=A+B,recv=A+B`), else
//!   [`CostModel::DEFAULT`] (measured on a 2-core VM over loopback UDP): never its own
//!   host's cache, which another host's ranks would not share. A malformed variable is
//!   an error naming it. `PHALANX_COST=measure` is for the launcher; a rank that sees
//!   it is told so.
//! * `phalanx run` sets `PHALANX_COST` for every rank to the figures of the launcher's
//!   host (its cache, [`cache_path`], written by `phalanx-bench calibrate --save`; or
//!   its measurement when asked), so the ranks of a job on several hosts agree. Ranks
//!   started otherwise (`srun` directly) use the defaults unless `PHALANX_COST` is
//!   exported to all of them.
//! * λ decides the trees, so every rank of a job must use the same figures: the
//!   signature of a tree collective carries its λ, and ranks whose figures differ get a
//!   mismatch error (set `PHALANX_COST` or `PHALANX_COLL_LAMBDA` for the job).
//! * Ranks that share CPUs wait for each other to be scheduled, which the lines (timed
//!   by one process) do not see: a message's latency grows, its sender's cost does not.
//!   So the job's λ ([`lambda`]) is the model's times the job's ranks per CPU
//!   (`PHALANX_RANKS_PER_CPU`, which `phalanx run` sets for every rank when it starts
//!   more ranks on its own machine, test hosts included, than the CPUs it may use — it
//!   does not know other machines' CPUs; 1 when unset, as under `srun`), rounded and
//!   clamped to [`MAX_LAMBDA`]. One number for the whole job, so its ranks still agree.
//!   A λ forced by `PHALANX_COLL_LAMBDA` is used as given. Measured on a 2-core machine over UDP
//!   (2026-11-28, `bench/thresholds.py`, medians of 3 alternating runs, µs): a reduction
//!   at p = 4 (2 ranks per CPU, λ 3 → 6) took 20–65 on the tree against 36–126 on the
//!   binomial tree (4 B – 64 KiB, one host), 30–107 against 42–200 across 4 test hosts;
//!   p = 8 (4 per CPU, λ 12 against 3) 30–90 against 53–146 on one host, 37–130 against
//!   69–226 across 4 test hosts of two ranks; p = 16 (λ 15) 44–166 against 121–296; a
//!   gather at p = 8 of 16 KiB – 1 MiB blocks 43–1770 against 98–3031.

pub use phalanx_transport::cost::{cache_path, CostModel, Line, MAX_LAMBDA};

/// The figures this process uses, from `PHALANX_COST` as given (module docs; at most
/// [`phalanx_transport::cost::MAX_COST_LEN`] bytes, each figure at most
/// [`phalanx_transport::cost::MAX_FIGURE`]); `Err` names a malformed variable.
pub fn from_value(v: Option<&str>) -> Result<CostModel, String> {
    if let Some(v) = v {
        if v.trim() == "measure" {
            return Err(
                "PHALANX_COST=measure: the launcher measures (`phalanx run`); \
                        ranks started otherwise need figures (`phalanx-bench calibrate`)"
                    .into(),
            );
        }
        // The caller (the configuration) names the variable and shows the value.
        return CostModel::parse(v).map_err(|e| e.to_string());
    }
    Ok(CostModel::DEFAULT)
}

static MODEL: std::sync::OnceLock<CostModel> = std::sync::OnceLock::new();
static RANKS_PER_CPU: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

/// Installs the figures and the job's ranks per CPU read at initialization (the first
/// installation wins).
pub(crate) fn install(m: CostModel, ranks_per_cpu: f64) {
    let _ = MODEL.set(m);
    let _ = RANKS_PER_CPU.set(ranks_per_cpu);
}

/// λ of the job's trees for `len`-byte messages in `packet`-byte packets: the model's,
/// scaled by the ranks per CPU (module docs).
pub(crate) fn lambda(len: usize, packet: usize) -> u32 {
    scaled(
        model().lambda(len, packet),
        RANKS_PER_CPU.get().copied().unwrap_or(1.0),
    )
}

/// Do the job's ranks share CPUs (`PHALANX_RANKS_PER_CPU` above 1)?
pub(crate) fn cpus_shared() -> bool {
    RANKS_PER_CPU.get().is_some_and(|&r| r > 1.0)
}

/// `lambda` times `ranks_per_cpu` where that is above 1, rounded, in `1..=MAX_LAMBDA`.
fn scaled(lambda: u32, ranks_per_cpu: f64) -> u32 {
    if ranks_per_cpu.is_nan() || ranks_per_cpu <= 1.0 {
        return lambda;
    }
    // `as` saturates: a huge product clamps like any other.
    ((f64::from(lambda) * ranks_per_cpu).round() as u32).clamp(1, MAX_LAMBDA)
}

/// The figures installed at initialization (the defaults if none were).
pub(crate) fn model() -> &'static CostModel {
    MODEL.get_or_init(|| CostModel::DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_sharing_cpus_scale_lambda_within_its_bounds() {
        assert_eq!(scaled(3, 1.0), 3);
        assert_eq!(scaled(3, 0.5), 3, "fewer ranks than CPUs: the model's");
        assert_eq!(scaled(3, f64::NAN), 3);
        assert_eq!(scaled(3, 2.0), 6);
        assert_eq!(scaled(3, 1.5), 5, "4.5 rounds up");
        assert_eq!(scaled(3, 4.0), 12);
        assert_eq!(scaled(3, 8.0), MAX_LAMBDA);
        assert_eq!(scaled(1, 1e300), MAX_LAMBDA);
        assert_eq!(scaled(3, f64::INFINITY), MAX_LAMBDA);
    }
}
