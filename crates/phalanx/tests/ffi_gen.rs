//! `src/ffi/gen.rs` (the body of `phalanx::ffi`) is what `gen_ffi.py` makes from the C
//! interface's exports and `mpi.h`: a function added to the C ABI is in `ffi` too.

#[test]
fn ffi_lists_every_c_function_and_constant() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("gen_ffi.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg("--check")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
