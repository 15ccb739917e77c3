//! `Seal::open` on arbitrary bytes, and sealing/opening/tampering with the input.
//! The body, its input layout and its invariants: `phalanx_fuzzing::mac_open`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| phalanx_fuzzing::mac_open(data));
