//! `Packet::new_checked` plus every accessor and a `Header` round trip never panic.
//! The body, its input layout and its invariants: `phalanx_fuzzing::decode`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| phalanx_fuzzing::decode(data));
