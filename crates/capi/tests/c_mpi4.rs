//! Tests of the MPI-4.1 parts of the C ABI (issue #18), each a C program in `tests/c`
//! under `phalanx run`: persistent collectives (started many times, in any order, on
//! intercommunicators), neighbourhood collectives, MPI_Isendrecv and the request-status
//! sets, communicator hints and MPI_Comm_create_group, intercommunicator splits and
//! nonblocking collectives, cancellation of sends and receives in flight, long double
//! reductions, MPI_BOTTOM, darray/subarray, generalized requests and the large-count
//! `_c` functions (a real transfer past 2 GiB).

mod common;

use common::*;

#[test]
fn persistent_collectives_and_neighbor_collectives_started_many_times() {
    let exe = c_test("pcoll");
    for n in [1, 2, 3, 4] {
        run_ok(n, &exe, &[], "pcoll ok");
    }
    let o = run_env(3, &exe, &[("PHALANX_TRANSPORT", "udp")]);
    assert!(o.status.success(), "udp: {}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("pcoll ok"));
}

#[test]
fn isendrecv_request_status_sets_comm_info_create_group_and_buffer_flush() {
    let exe = c_test("mpi4");
    for n in [1, 2, 3, 4, 5] {
        run_ok(n, &exe, &[], "mpi4 ok");
    }
    let o = run_env(3, &exe, &[("PHALANX_TRANSPORT", "udp")]);
    assert!(o.status.success(), "udp: {}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("mpi4 ok"));
}

#[test]
fn intercommunicator_split_create_alltoallw_and_overlapping_allgatherv() {
    let exe = c_test("intersplit");
    for n in [2, 3, 4, 5, 8] {
        run_ok(n, &exe, &[], "intersplit ok");
    }
    let o = run_env(5, &exe, &[("PHALANX_TRANSPORT", "udp")]);
    assert!(o.status.success(), "udp: {}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("intersplit ok"));
}

#[test]
fn nonblocking_and_persistent_collectives_on_intercommunicators() {
    let exe = c_test("internbc");
    for n in [2, 3, 4, 5, 8] {
        run_ok(n, &exe, &[], "internbc ok");
    }
    let o = run_env(5, &exe, &[("PHALANX_TRANSPORT", "udp")]);
    assert!(o.status.success(), "udp: {}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("internbc ok"));
}

/// Issue #18: long double reductions compare and compute in 80-bit extended precision
/// (values differing beyond double precision), complex long double takes SUM/PROD only.
#[test]
fn long_double_reductions_keep_extended_precision() {
    let exe = c_test("ldouble");
    for n in [1, 2, 4] {
        run_ok(n, &exe, &[], "ldouble ok");
    }
}

/// Issue #18: `MPI_BOTTOM` with datatypes of absolute addresses through point-to-point
/// and collectives; a null buffer the type does not lift off address 0 is
/// `MPI_ERR_BUFFER` on the caller, and its peers go on.
#[test]
fn bottom_with_absolute_address_datatypes() {
    let exe = c_test("bottom");
    for n in [1, 2, 3] {
        run_ok(n, &exe, &[], "bottom ok");
    }
}

/// Issue #18: subarrays sent and received between ranks, and `MPI_Type_create_darray`
/// (block, cyclic, cyclic(k), none; C and Fortran order; 2x2 and 1x4 grids) against a
/// model of the distribution MPI defines.
#[test]
fn subarray_and_darray_transfers() {
    let exe = c_test("darray");
    for n in [1, 2, 4] {
        run_ok(n, &exe, &[], "darray ok");
    }
}

#[test]
fn cancel_of_unmatched_rendezvous_sends_and_receives_from_c() {
    let exe = c_test("cancel");
    for n in [1, 2, 3, 4] {
        run_ok(n, &exe, &[], "cancel ok");
    }
    // Over UDP with go-back-n, and with the careful protocol (the unmatched
    // request-to-send is held by the link there).
    for reliable_net in ["0", "1"] {
        let env = [
            ("PHALANX_TRANSPORT", "udp"),
            ("PHALANX_RELIABLE_NET", reliable_net),
        ];
        let o = run_env(2, &exe, &env);
        assert!(o.status.success(), "{reliable_net}: {}", show(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("cancel ok"));
    }
}

/// Issue #18: generalized requests at `MPI_THREAD_MULTIPLE`, completed by another
/// thread: query_fn's status, free_fn once, cancel_fn's flag, mixed with point-to-point
/// requests in `Waitall`/`Waitany`/`Testall`, callback errors.
#[test]
fn generalized_requests_complete_query_and_free() {
    let exe = threaded_test("grequest");
    for n in [1, 2] {
        every_rank_ok(&exe, n, &[], "grequest");
    }
}

#[test]
fn large_count_point_to_point_from_c() {
    let exe = c_test("large_p2p");
    for n in [2, 3] {
        run_ok(n, &exe, &[], "large p2p ok");
    }
}

/// A real transfer of 2^31 + 4096 bytes each way and a broadcast of it (about 2 GiB
/// per rank; the broadcast peaks near 4 GiB in one).
#[test]
fn large_count_transfer_past_2_gib_from_c() {
    run_ok(2, &c_test("large_big"), &[], "large big ok");
}

#[test]
fn large_count_datatypes_and_packing_from_c() {
    run_ok(1, &c_test("large_types"), &[], "large types ok");
}

#[test]
fn large_count_collectives_from_c() {
    let exe = c_test("large_coll");
    for n in [1, 2, 3, 4] {
        run_ok(n, &exe, &[], "large coll ok");
    }
}

#[test]
fn pcontrol_info_env_abi_info_type_match_size_user_error_classes_and_type_attributes() {
    let exe = c_test("envmore");
    for n in [1, 3] {
        run_ok(n, &exe, &[], "envmore ok");
    }
}

#[test]
fn large_count_v_reduce_scatter_scan_and_nonblocking_collectives_from_c() {
    let exe = c_test("large_more");
    for n in [1, 2, 3, 4] {
        run_ok(n, &exe, &[], "large more ok");
    }
}

#[test]
fn large_count_persistent_and_neighbor_collectives_and_darray_from_c() {
    let exe = c_test("large_pers");
    for n in [1, 2, 3, 4] {
        run_ok(n, &exe, &[], "large pers ok");
    }
}
