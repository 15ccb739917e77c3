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

/// Installs the figures read at initialization (the first installation wins).
pub(crate) fn install(m: CostModel) {
    let _ = MODEL.set(m);
}

/// The figures installed at initialization (the defaults if none were).
pub(crate) fn model() -> &'static CostModel {
    MODEL.get_or_init(|| CostModel::DEFAULT)
}
