//! The sealed launcher ↔ node-agent channel: opening arbitrary lines, and sealing,
//! replaying and changing the input. The body, its input layout and its invariants:
//! `phalanx_fuzzing::seal_open`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| phalanx_fuzzing::seal_open(data));
