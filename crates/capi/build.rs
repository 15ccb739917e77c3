//! Gives the C library its soname, `libmpi_abi.so.1` (MPI-5.0 ABI major version 1).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
