#!/usr/bin/env python3
"""Generates the MPI-5.0 ABI stubs of phalanx-capi.

Reads gen/prototypes.txt (the standard ABI's C prototypes, one per line) and writes:
  include/mpi_stubs.h  -- declarations (MPI_ and PMPI_) of every function that
                          include/mpi.h does not declare, plus the typedefs they need;
  src/stubs_gen.rs     -- `MPI_X`/`PMPI_X` exports raising MPI_ERR_OTHER through the
                          error handler (via `guard`, i.e. under catch_unwind), after
                          storing the null handle through every output handle
                          argument (`MPI_Datatype *newtype` -> MPI_DATATYPE_NULL, ...).

Functions already declared in include/mpi.h or exported by hand in src/*.rs are skipped.
Run from anywhere:  python3 crates/capi/gen/gen_stubs.py
"""

import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTOS = ROOT / "gen" / "prototypes.txt"
MPI_H = ROOT / "include" / "mpi.h"
OUT_H = ROOT / "include" / "mpi_stubs.h"
OUT_RS = ROOT / "src" / "stubs_gen.rs"

# Types of the standard ABI the stub declarations need (name, C definition).
TYPEDEFS = [
    ("MPI_User_function", "typedef void (MPI_User_function)(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);"),
    ("MPI_User_function_c", "typedef void (MPI_User_function_c)(void *invec, void *inoutvec, MPI_Count *len, MPI_Datatype *datatype);"),
    ("MPI_Grequest_query_function", "typedef int (MPI_Grequest_query_function)(void *extra_state, MPI_Status *status);"),
    ("MPI_Grequest_free_function", "typedef int (MPI_Grequest_free_function)(void *extra_state);"),
    ("MPI_Grequest_cancel_function", "typedef int (MPI_Grequest_cancel_function)(void *extra_state, int complete);"),
    ("MPI_Copy_function", "typedef int (MPI_Copy_function)(MPI_Comm comm, int keyval, void *extra_state, void *attribute_val_in, void *attribute_val_out, int *flag);"),
    ("MPI_Delete_function", "typedef int (MPI_Delete_function)(MPI_Comm comm, int keyval, void *attribute_val, void *extra_state);"),
    ("MPI_Comm_copy_attr_function", "typedef int (MPI_Comm_copy_attr_function)(MPI_Comm comm, int keyval, void *extra_state, void *attribute_val_in, void *attribute_val_out, int *flag);"),
    ("MPI_Comm_delete_attr_function", "typedef int (MPI_Comm_delete_attr_function)(MPI_Comm comm, int keyval, void *attribute_val, void *extra_state);"),
    ("MPI_Type_copy_attr_function", "typedef int (MPI_Type_copy_attr_function)(MPI_Datatype datatype, int keyval, void *extra_state, void *attribute_val_in, void *attribute_val_out, int *flag);"),
    ("MPI_Type_delete_attr_function", "typedef int (MPI_Type_delete_attr_function)(MPI_Datatype datatype, int keyval, void *attribute_val, void *extra_state);"),
    ("MPI_Win_copy_attr_function", "typedef int (MPI_Win_copy_attr_function)(MPI_Win win, int keyval, void *extra_state, void *attribute_val_in, void *attribute_val_out, int *flag);"),
    ("MPI_Win_delete_attr_function", "typedef int (MPI_Win_delete_attr_function)(MPI_Win win, int keyval, void *attribute_val, void *extra_state);"),
    ("MPI_Datarep_extent_function", "typedef int (MPI_Datarep_extent_function)(MPI_Datatype datatype, MPI_Aint *extent, void *extra_state);"),
    ("MPI_Datarep_conversion_function", "typedef int (MPI_Datarep_conversion_function)(void *userbuf, MPI_Datatype datatype, int count, void *filebuf, MPI_Offset position, void *extra_state);"),
    ("MPI_Datarep_conversion_function_c", "typedef int (MPI_Datarep_conversion_function_c)(void *userbuf, MPI_Datatype datatype, MPI_Count count, void *filebuf, MPI_Offset position, void *extra_state);"),
    ("MPI_Comm_errhandler_function", "typedef void (MPI_Comm_errhandler_function)(MPI_Comm *comm, int *error_code, ...);"),
    ("MPI_File_errhandler_function", "typedef void (MPI_File_errhandler_function)(MPI_File *file, int *error_code, ...);"),
    ("MPI_Win_errhandler_function", "typedef void (MPI_Win_errhandler_function)(MPI_Win *win, int *error_code, ...);"),
    ("MPI_Session_errhandler_function", "typedef void (MPI_Session_errhandler_function)(MPI_Session *session, int *error_code, ...);"),
    ("MPI_Comm_errhandler_fn", "typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn;"),
    ("MPI_File_errhandler_fn", "typedef MPI_File_errhandler_function MPI_File_errhandler_fn;"),
    ("MPI_Win_errhandler_fn", "typedef MPI_Win_errhandler_function MPI_Win_errhandler_fn;"),
    ("MPI_Session_errhandler_fn", "typedef MPI_Session_errhandler_function MPI_Session_errhandler_fn;"),
    ("MPI_T_enum", "typedef struct MPI_T_enum_t *MPI_T_enum;"),
    ("MPI_T_cvar_handle", "typedef struct MPI_T_cvar_handle_t *MPI_T_cvar_handle;"),
    ("MPI_T_pvar_handle", "typedef struct MPI_T_pvar_handle_t *MPI_T_pvar_handle;"),
    ("MPI_T_pvar_session", "typedef struct MPI_T_pvar_session_t *MPI_T_pvar_session;"),
    ("MPI_T_event_registration", "typedef struct MPI_T_event_registration_t *MPI_T_event_registration;"),
    ("MPI_T_event_instance", "typedef struct MPI_T_event_instance_t *MPI_T_event_instance;"),
    ("MPI_T_cb_safety", "typedef enum MPI_T_cb_safety {\n"
     "    MPI_T_CB_REQUIRE_NONE = 0x00,\n"
     "    MPI_T_CB_REQUIRE_MPI_RESTRICTED = 0x03,\n"
     "    MPI_T_CB_REQUIRE_THREAD_SAFE = 0x0F,\n"
     "    MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE = 0x3F\n"
     "} MPI_T_cb_safety;"),
    ("MPI_T_source_order", "typedef enum MPI_T_source_order {\n"
     "    MPI_T_SOURCE_ORDERED = 1,\n"
     "    MPI_T_SOURCE_UNORDERED = 2\n"
     "} MPI_T_source_order;"),
    ("MPI_T_event_cb_function", "typedef void (MPI_T_event_cb_function)(MPI_T_event_instance event_instance, MPI_T_event_registration event_registration, MPI_T_cb_safety cb_safety, void *user_data);"),
    ("MPI_T_event_free_cb_function", "typedef void (MPI_T_event_free_cb_function)(MPI_T_event_registration event_registration, MPI_T_cb_safety cb_safety, void *user_data);"),
    ("MPI_T_event_dropped_cb_function", "typedef void (MPI_T_event_dropped_cb_function)(MPI_Count count, MPI_T_event_registration event_registration, int source_index, MPI_T_cb_safety cb_safety, void *user_data);"),
]

HANDLES = {
    "MPI_Comm", "MPI_Group", "MPI_Win", "MPI_File", "MPI_Session", "MPI_Message",
    "MPI_Info", "MPI_Errhandler", "MPI_Request", "MPI_Datatype", "MPI_Op",
    "MPI_T_enum", "MPI_T_cvar_handle", "MPI_T_pvar_handle", "MPI_T_pvar_session",
    "MPI_T_event_registration", "MPI_T_event_instance",
}
# Scalars passed by value.
SCALARS = {
    "int": "c_int", "MPI_Fint": "c_int", "MPI_T_cb_safety": "c_int",
    "MPI_Aint": "isize", "MPI_Count": "i64", "MPI_Offset": "i64",
}
# Function types passed by value decay to function pointers.
FN_TYPES = {"MPI_T_event_cb_function", "MPI_T_event_free_cb_function",
            "MPI_T_event_dropped_cb_function"}
# The null handle a stub stores through an output handle argument (`MPI_X *name`), so a
# caller that goes on under MPI_ERRORS_RETURN never sees an uninitialised handle.
# (name of the generated constant, its value: the standard ABI's MPI_X_NULL).
NULL_HANDLES = {
    "MPI_Comm": ("NULL_COMM", 0x100), "MPI_Group": ("NULL_GROUP", 0x108),
    "MPI_Win": ("NULL_WIN", 0x110), "MPI_File": ("NULL_FILE", 0x118),
    "MPI_Session": ("NULL_SESSION", 0x120), "MPI_Message": ("NULL_MESSAGE", 0x128),
    "MPI_Info": ("NULL_INFO", 0x130), "MPI_Errhandler": ("NULL_ERRHANDLER", 0x140),
    "MPI_Request": ("NULL_REQUEST", 0x180), "MPI_Datatype": ("NULL_DATATYPE", 0x200),
    "MPI_Op": ("NULL_OP", 0x20),
}
# Handle pointers that are input (or input and output) arguments: a stub leaves them.
INOUT_HANDLES = {
    ("MPI_Comm_disconnect", "comm"), ("MPI_File_close", "fh"), ("MPI_Win_free", "win"),
    ("MPI_Session_finalize", "session"), ("MPI_Mrecv", "message"),
    ("MPI_Mrecv_c", "message"), ("MPI_Imrecv", "message"), ("MPI_Imrecv_c", "message"),
}
RUST_KEYWORDS = {"as", "box", "break", "const", "continue", "crate", "dyn", "else", "enum",
                 "extern", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod",
                 "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super",
                 "trait", "type", "unsafe", "use", "where", "while", "async", "await", "try"}

PROTO_RE = re.compile(r"^(?P<ret>[A-Za-z_][\w ]*?)\s+(?P<name>P?MPI_\w+)\((?P<args>.*)\);$")


def parse_protos():
    out = []
    for line in PROTOS.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = PROTO_RE.match(line)
        if not m:
            sys.exit(f"cannot parse prototype: {line}")
        out.append((m["ret"].strip(), m["name"], m["args"].strip()))
    return out


def declared_in_header():
    names = set()
    for line in MPI_H.read_text().splitlines():
        m = PROTO_RE.match(line.strip())
        if m and not line.startswith("typedef"):
            names.add(m["name"])
    return names


def exported_by_hand():
    names = set()
    for f in (ROOT / "src").glob("*.rs"):
        if f.name == OUT_RS.name:
            continue
        for m in re.finditer(r"(?:export|stub)!\(\s*(MPI_\w+)", f.read_text()):
            names.add(m.group(1))
    return names


def out_handle(arg, fname):
    """The null constant to store through `arg` if it is an output handle, else None."""
    m = re.match(r"^(?P<ty>\w+)\s*\*\s*(?P<name>\w+)$", arg.strip())
    if not m or m["ty"] not in NULL_HANDLES or (fname, m["name"]) in INOUT_HANDLES:
        return None
    return m["ty"]


def rust_param(arg, fname):
    """(name, rust type, is_comm) of one C parameter."""
    arg = arg.strip()
    m = re.match(r"^(?P<ty>.*?)(?P<name>[A-Za-z_]\w*)\s*(?P<arr>(\[\w*\])*)$", arg)
    if not m:
        sys.exit(f"{fname}: cannot parse parameter {arg!r}")
    ty, name, arr = m["ty"].strip(), m["name"], m["arr"]
    if name in RUST_KEYWORDS:
        name += "_"
    is_ptr = "*" in ty or bool(arr)
    base = ty.replace("*", " ").split()
    const = "const" in base
    base = [b for b in base if b != "const"]
    if len(base) != 1:
        sys.exit(f"{fname}: cannot parse type of {arg!r}")
    base = base[0]
    if is_ptr:
        return name, ("*const c_void" if const else "*mut c_void"), False
    if base in HANDLES:
        return name, "Handle", base == "MPI_Comm"
    if base in FN_TYPES:
        return name, "*mut c_void", False
    if base in SCALARS:
        return name, SCALARS[base], False
    sys.exit(f"{fname}: unknown type {base!r}")


def rust_ret(ret, fname):
    if ret == "int":
        return "c_int", None
    if ret == "double":
        return "f64", "0.0"
    if ret == "MPI_Aint":
        return "isize", "0"
    if ret in HANDLES:
        return "Handle", "std::ptr::null_mut()"
    sys.exit(f"{fname}: unknown return type {ret!r}")


def split_args(args):
    if args == "void":
        return []
    return [a.strip() for a in args.split(",") if a.strip() != "..."]


def main():
    protos = parse_protos()
    have = declared_in_header() | exported_by_hand()
    todo = [p for p in protos if p[1] not in have]
    header_text = MPI_H.read_text()
    typedefs = [t for n, t in TYPEDEFS
                if not re.search(r"typedef[^;]*\b" + re.escape(n) + r"\b", header_text)]

    h = [
        "/* Generated by gen/gen_stubs.py from gen/prototypes.txt: do not edit. */",
        "/* The rest of the MPI-5.0 standard ABI. phalanx does not implement these yet:",
        " * each raises MPI_ERR_OTHER through the error handler. Included by mpi.h. */",
        "#ifndef PHALANX_MPI_STUBS_H",
        "#define PHALANX_MPI_STUBS_H",
        "",
        "#if defined(__cplusplus)",
        'extern "C" {',
        "#endif",
        "",
    ]
    h += typedefs
    h += ["", "/* ---- Functions (declared; phalanx returns MPI_ERR_OTHER for now) ---- */"]
    for ret, name, args in todo:
        h.append(f"{ret} {name}({args});")
    h += ["", "/* ---- Profiling interface ---- */"]
    for ret, name, args in todo:
        h.append(f"{ret} P{name}({args});")
    h += ["", "#if defined(__cplusplus)", "}", "#endif", "", "#endif /* PHALANX_MPI_STUBS_H */", ""]
    OUT_H.write_text("\n".join(h))

    rs = [
        "//! Generated by `gen/gen_stubs.py` from `gen/prototypes.txt`: do not edit.",
        "//!",
        "//! The rest of the MPI-5.0 standard ABI (declared in `include/mpi_stubs.h`): each",
        "//! function raises `MPI_ERR_OTHER` (\"not implemented\") through the error handler of",
        "//! its communicator argument (`MPI_COMM_WORLD` when it has none), under `catch_unwind`",
        "//! ([`guard`]). Functions not returning `int` return 0 / a null handle after that.",
        "//! Every output handle argument gets the null handle of its kind first (`*newtype =",
        "//! MPI_DATATYPE_NULL`, `*newcomm = MPI_COMM_NULL`, `*request = MPI_REQUEST_NULL`…),",
        "//! so a caller going on under `MPI_ERRORS_RETURN` never uses a garbage handle.",
        "",
        "use crate::consts::*;",
        "use crate::{err, export, guard};",
        "use std::ffi::{c_int, c_void};",
        "",
        "const WORLD: Handle = COMM_WORLD as Handle;",
        "",
        "/// Raises `MPI_ERR_OTHER` for the unimplemented `name` on `comm`'s error handler.",
        "fn not_implemented(name: &str, comm: Handle) -> c_int {",
        "    guard(name, comm, || {",
        "        Err(err(MPI_ERR_OTHER, \"not implemented by phalanx yet\"))",
        "    })",
        "}",
        "",
        "/// Stores null handle `null` through output argument `p` (unless `p` is null).",
        "///",
        "/// # Safety",
        "/// `p` is null or points to a writable handle (the MPI contract on outputs).",
        "unsafe fn null_out(p: *mut Handle, null: usize) {",
        "    if !p.is_null() {",
        "        // SAFETY: non-null and writable (caller).",
        "        unsafe { p.write(null as Handle) }",
        "    }",
        "}",
        "",
    ]
    used = set()
    for ret, name, args in todo:
        cargs = split_args(args)
        params = [rust_param(a, name) for a in cargs]
        nulls = [(p[0], out_handle(a, name)) for a, p in zip(cargs, params)]
        nulls = [(n, c) for n, c in nulls if c]
        # Output handles are typed (`*mut Handle`): the stub stores a null handle there.
        params = [(n, "*mut Handle" if any(n == o for o, _ in nulls) else t, c)
                  for n, t, c in params]
        comm = next((p[0] for p in params if p[2]), "WORLD")
        rty, default = rust_ret(ret, name)
        plist = ", ".join(f"{n}: {t}" for n, t, _ in params)
        rs.append(f"export!({name}, P{name}, ({plist}) -> {rty} {{")
        if nulls:
            rs.append("    // SAFETY: output handles are null or writable (MPI contract).")
            rs.append("    unsafe {")
            for n, c in nulls:
                used.add(c)
                rs.append(f"        null_out({n}, {NULL_HANDLES[c][0]});")
            rs.append("    }")
        if params:
            names = ", ".join(n for n, _, _ in params)
            rs.append(f"    let _ = ({names},);" if len(params) == 1 else f"    let _ = ({names});")
        if default is None:
            rs.append(f'    not_implemented("{name}", {comm})')
        else:
            rs.append(f'    not_implemented("{name}", {comm});')
            rs.append(f"    {default}")
        rs.append("});")
        rs.append("")
    at = rs.index("/// Raises `MPI_ERR_OTHER` for the unimplemented `name` on `comm`'s error handler.")
    consts = [f"/// `{ty.upper()}_NULL`.\nconst {NULL_HANDLES[ty][0]}: usize = {NULL_HANDLES[ty][1]:#x};"
              for ty in NULL_HANDLES if ty in used]
    rs[at:at] = consts + [""]
    OUT_RS.write_text("\n".join(rs))
    if shutil.which("rustfmt"):
        subprocess.run(["rustfmt", "--edition", "2021", str(OUT_RS)], check=True)
    print(f"{len(todo)} functions stubbed ({2 * len(todo)} symbols); "
          f"{len(protos) - len(todo)} already provided")


if __name__ == "__main__":
    main()
