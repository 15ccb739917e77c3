//! Property runs with shrinking: [`check`] draws scenarios from a proptest strategy,
//! and a failing one is shrunk to a minimal scenario before it is reported.
//!
//! Contract: a run is a pure function of its seed — the proptest runner's RNG is seeded
//! from `PHALANX_SIM_SEED` (default 0), never from the clock — so CI sees the same
//! cases every time, and the report of a failure (the minimal scenario, its reason and
//! the seed) ends with a command that replays exactly that run, shrinking included.
//! `PHALANX_SIM_SEEDS=N` sets the number of cases (default: per test).

use crate::Partition;
use proptest::prelude::*;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::fmt::Debug;
use std::ops::Range;

/// The runner seed: `PHALANX_SIM_SEED`, else 0.
pub fn seed() -> u64 {
    std::env::var("PHALANX_SIM_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Runs `property` on `default_cases` scenarios of `strategy` (or `PHALANX_SIM_SEEDS`);
/// panics with the minimal failing scenario, its error and a replay command naming
/// `test` (the test binary) and `name` (the test function).
pub fn check<S>(
    test: &str,
    name: &str,
    default_cases: u32,
    strategy: S,
    property: impl Fn(&S::Value) -> Result<(), String>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let cases = std::env::var("PHALANX_SIM_SEEDS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default_cases);
    let seed = seed();
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        // Shrinking reruns whole simulations: bound it.
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let outcome = runner.run(&strategy, |v| property(&v).map_err(TestCaseError::fail));
    match outcome {
        Ok(()) => {}
        Err(TestError::Fail(why, minimal)) => panic!(
            "[{name}] property failed; minimal scenario:\n  {minimal:?}\n  {why}\n  \
             replay: PHALANX_SIM_SEED={seed} cargo test -p phalanx-sim --test {test} {name} \
             -- --nocapture"
        ),
        Err(TestError::Abort(why)) => panic!("[{name}] aborted (seed {seed}): {why}"),
    }
}

/// A link (or a whole rank) down for a while, drawn before the rank count is known;
/// [`PartitionDraw::for_ranks`] places it among `n` ranks.
#[derive(Clone, Debug)]
pub struct PartitionDraw {
    a: u32,
    b: Option<u32>,
    from_ns: u64,
    len_ns: u64,
}

impl PartitionDraw {
    /// The partition among `n` ranks: rank `a` cut from `b` (from everyone if none).
    pub fn for_ranks(&self, n: u32) -> Partition {
        Partition {
            a: Some(self.a % n),
            b: self.b.map(|b| b % n),
            from_ns: self.from_ns,
            until_ns: self.from_ns + self.len_ns,
        }
    }
}

/// Partitions starting within `starts` and lasting within `lens` (virtual ns); shrinking
/// moves them earlier and shortens them.
pub fn arb_partition(starts: Range<u64>, lens: Range<u64>) -> impl Strategy<Value = PartitionDraw> {
    (0u32..32, prop::option::of(0u32..32), starts, lens).prop_map(|(a, b, from_ns, len_ns)| {
        PartitionDraw {
            a,
            b,
            from_ns,
            len_ns,
        }
    })
}
