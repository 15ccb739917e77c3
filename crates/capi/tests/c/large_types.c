/* The large-count datatype and packing calls, results checked against their int forms,
 * and a type of more than 2^31 elements (2^31 + 8 bytes): Type_contiguous_c,
 * Type_size_c/_x past 2^31 (Type_size gives MPI_UNDEFINED), Type_get_extent_c/_x,
 * Type_get_true_extent_c/_x, Status_set_elements_x/Get_elements_x with it; every
 * constructor's _c form, Pack_c/Unpack_c/Pack_size_c; count errors. One rank is
 * enough; every rank runs it. */
#include "check.h"
#include <string.h>

static void same(MPI_Datatype a, MPI_Datatype b) {
    MPI_Count sa, sb, la, lb, ea, eb;
    OK(MPI_Type_size_c(a, &sa));
    OK(MPI_Type_size_x(b, &sb));
    CHECK(sa == sb);
    OK(MPI_Type_get_extent_c(a, &la, &ea));
    OK(MPI_Type_get_extent_x(b, &lb, &eb));
    CHECK(la == lb && ea == eb);
    OK(MPI_Type_get_true_extent_c(a, &la, &ea));
    OK(MPI_Type_get_true_extent_x(b, &lb, &eb));
    CHECK(la == lb && ea == eb);
    /* Same type map: pack both from the same buffer. */
    int src[256], pa[256], pb[256];
    for (int i = 0; i < 256; i++) src[i] = i;
    MPI_Count posa = 0;
    int posb = 0;
    OK(MPI_Type_commit(&a));
    OK(MPI_Type_commit(&b));
    OK(MPI_Pack_c(src, 1, a, pa, sizeof pa, &posa, MPI_COMM_WORLD));
    OK(MPI_Pack(src, 1, b, pb, sizeof pb, &posb, MPI_COMM_WORLD));
    CHECK(posa == posb && memcmp(pa, pb, (size_t)posb) == 0);
    OK(MPI_Type_free(&a));
    OK(MPI_Type_free(&b));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    MPI_Datatype a, b;

    /* More than 2^31 elements. */
    const MPI_Count big = ((MPI_Count)1 << 31) + 8;
    OK(MPI_Type_contiguous_c(big, MPI_BYTE, &a));
    MPI_Count s, lb, ext;
    OK(MPI_Type_size_c(a, &s));
    CHECK(s == big);
    OK(MPI_Type_size_x(a, &s));
    CHECK(s == big);
    int si;
    OK(MPI_Type_size(a, &si));
    CHECK(si == MPI_UNDEFINED);
    OK(MPI_Type_get_extent_c(a, &lb, &ext));
    CHECK(lb == 0 && ext == big);
    OK(MPI_Type_get_true_extent_x(a, &lb, &ext));
    CHECK(lb == 0 && ext == big);
    OK(MPI_Type_contiguous_c(4, a, &b)); /* 2^33 + 32 bytes */
    OK(MPI_Type_size_x(b, &s));
    CHECK(s == 4 * big);
    MPI_Status st;
    OK(MPI_Status_set_elements_x(&st, MPI_INT, big)); /* 4 × big bytes */
    MPI_Count n;
    OK(MPI_Get_elements_x(&st, MPI_BYTE, &n));
    CHECK(n == 4 * big);
    OK(MPI_Get_elements_c(&st, b, &n));
    CHECK(n == 4 * big); /* basic elements of b: bytes */
    OK(MPI_Get_count_c(&st, b, &n));
    CHECK(n == 1);
    OK(MPI_Get_count_c(&st, a, &n));
    CHECK(n == 4);
    OK(MPI_Pack_size_c(2, b, MPI_COMM_WORLD, &s));
    CHECK(s == 8 * big);
    int ps;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int e = MPI_Pack_size(1, b, MPI_COMM_WORLD, &ps), cls;
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);
    OK(MPI_Type_free(&b));
    OK(MPI_Type_free(&a));

    /* Each constructor's _c form against its int form. */
    OK(MPI_Type_contiguous_c(5, MPI_INT, &a));
    OK(MPI_Type_contiguous(5, MPI_INT, &b));
    same(a, b);
    OK(MPI_Type_vector_c(3, 2, 5, MPI_INT, &a));
    OK(MPI_Type_vector(3, 2, 5, MPI_INT, &b));
    same(a, b);
    OK(MPI_Type_create_hvector_c(3, 2, 28, MPI_INT, &a));
    OK(MPI_Type_create_hvector(3, 2, 28, MPI_INT, &b));
    same(a, b);
    MPI_Count cbl[3] = {2, 1, 3}, cds[3] = {9, 0, 4};
    int ibl[3] = {2, 1, 3}, ids[3] = {9, 0, 4};
    MPI_Aint ads[3] = {36, 0, 16};
    MPI_Count hds[3] = {36, 0, 16};
    OK(MPI_Type_indexed_c(3, cbl, cds, MPI_INT, &a));
    OK(MPI_Type_indexed(3, ibl, ids, MPI_INT, &b));
    same(a, b);
    OK(MPI_Type_create_hindexed_c(3, cbl, hds, MPI_INT, &a));
    OK(MPI_Type_create_hindexed(3, ibl, ads, MPI_INT, &b));
    same(a, b);
    OK(MPI_Type_create_indexed_block_c(3, 2, cds, MPI_INT, &a));
    OK(MPI_Type_create_indexed_block(3, 2, ids, MPI_INT, &b));
    same(a, b);
    OK(MPI_Type_create_hindexed_block_c(3, 2, hds, MPI_INT, &a));
    OK(MPI_Type_create_hindexed_block(3, 2, ads, MPI_INT, &b));
    same(a, b);
    MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Count sds[3] = {0, 8, 24};
    MPI_Aint sda[3] = {0, 8, 24};
    OK(MPI_Type_create_struct_c(3, cbl, sds, ts, &a));
    OK(MPI_Type_create_struct(3, ibl, sda, ts, &b));
    same(a, b);
    OK(MPI_Type_create_resized_c(MPI_INT, -4, 12, &a));
    OK(MPI_Type_create_resized(MPI_INT, -4, 12, &b));
    same(a, b);
    MPI_Count csz[2] = {6, 8}, csub[2] = {2, 3}, cst[2] = {1, 4};
    int isz[2] = {6, 8}, isub[2] = {2, 3}, ist[2] = {1, 4};
    OK(MPI_Type_create_subarray_c(2, csz, csub, cst, MPI_ORDER_C, MPI_INT, &a));
    OK(MPI_Type_create_subarray(2, isz, isub, ist, MPI_ORDER_C, MPI_INT, &b));
    same(a, b);

    /* Pack_c / Unpack_c round trip of a vector. */
    OK(MPI_Type_vector_c(4, 1, 3, MPI_INT, &a));
    OK(MPI_Type_commit(&a));
    int src[32], dst[32], buf[64];
    for (int i = 0; i < 32; i++) src[i] = 100 + i;
    memset(dst, 0, sizeof dst);
    MPI_Count pos = 0;
    OK(MPI_Pack_c(src, 2, a, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK(pos == 8 * 4);
    MPI_Count ups = 0;
    OK(MPI_Unpack_c(buf, pos, &ups, dst, 2, a, MPI_COMM_WORLD));
    CHECK(ups == pos);
    for (int i = 0; i < 20; i++) CHECK(dst[i] == ((i % 10) % 3 == 0 ? 100 + i : 0));
    e = MPI_Pack_c(src, 2, a, buf, 8, &pos, MPI_COMM_WORLD); /* pos 32 > size 8 */
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_ARG);
    OK(MPI_Type_free(&a));

    /* Count errors. */
    e = MPI_Type_contiguous_c(-1, MPI_INT, &a);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);
    e = MPI_Type_contiguous_c((MPI_Count)1 << 62, MPI_DOUBLE, &a);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);
    e = MPI_Pack_size_c(-2, MPI_INT, MPI_COMM_WORLD, &s);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);

    printf("large types ok\n");
    OK(MPI_Finalize());
    return 0;
}
