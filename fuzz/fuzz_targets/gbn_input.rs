//! Arbitrary bytes drive a `Gbn` (command stream); nothing panics, every emitted datagram decodes.
//! The body, its input layout and its invariants: `phalanx_fuzzing::gbn_input`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| phalanx_fuzzing::gbn_input(data));
