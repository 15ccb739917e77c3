/* MPI_Pcontrol, MPI_Info_create_env, MPI_Abi_get_info, MPI_Get_hw_resource_info,
 * MPI_Type_match_size, and user error classes, codes and strings (added, named,
 * classified, reported through MPI_LASTUSEDCODE, raised, removed), datatype attributes.
 * Any number of ranks. */
#include "check.h"
#include <string.h>

static int seen = -1, copies = 0, deletes = 0;
static int tcopy(MPI_Datatype t, int k, void *extra, void *in, void *out, int *flag) {
    (void)t; (void)k; (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}
static int tdelete(MPI_Datatype t, int k, void *val, void *extra) {
    (void)t; (void)k; (void)val; (void)extra;
    deletes++;
    return MPI_SUCCESS;
}
static void handler(MPI_Comm *c, int *code, ...) {
    (void)c;
    seen = *code;
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    int size;
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    OK(MPI_Pcontrol(1));
    OK(MPI_Pcontrol(0));

    MPI_Info info;
    int flag, n;
    char v[MPI_MAX_INFO_VAL];
    OK(MPI_Info_create_env(argc, argv, &info));
    OK(MPI_Info_get(info, "command", MPI_MAX_INFO_VAL - 1, v, &flag));
    CHECK(flag && strstr(v, "envmore") != NULL);
    OK(MPI_Info_get(info, "maxprocs", MPI_MAX_INFO_VAL - 1, v, &flag));
    CHECK(flag && atoi(v) == size);
    OK(MPI_Info_free(&info));
    OK(MPI_Abi_get_info(&info));
    OK(MPI_Info_get(info, "mpi_count_size", MPI_MAX_INFO_VAL - 1, v, &flag));
    CHECK(flag && atoi(v) == (int)sizeof(MPI_Count));
    OK(MPI_Info_free(&info));
    OK(MPI_Get_hw_resource_info(&info));
    OK(MPI_Info_get_nkeys(info, &n));
    CHECK(n >= 0);
    OK(MPI_Info_free(&info));

    MPI_Datatype t;
    OK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &t));
    CHECK(t == MPI_INTEGER4);
    OK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &t));
    CHECK(t == MPI_REAL8);
    int sz;
    OK(MPI_Type_size(t, &sz));
    CHECK(sz == 8);
    OK(MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &t));
    CHECK(t == MPI_DOUBLE_INT);
    OK(MPI_Type_get_value_index(MPI_INT, MPI_INT, &t));
    CHECK(t == MPI_2INT);
    OK(MPI_Type_get_value_index(MPI_CHAR, MPI_INT, &t));
    CHECK(t == MPI_DATATYPE_NULL);

    /* User error classes and codes. */
    int *last, cls, code, code2, k, len;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(flag);
    int before = *last;
    OK(MPI_Add_error_class(&cls));
    OK(MPI_Add_error_code(cls, &code));
    OK(MPI_Add_error_code(MPI_ERR_ARG, &code2));
    CHECK(cls > before && code > cls && code2 > code);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(*last == code2);
    OK(MPI_Add_error_string(code, "phalanx test error"));
    char s[MPI_MAX_ERROR_STRING];
    OK(MPI_Error_string(code, s, &len));
    CHECK(strcmp(s, "phalanx test error") == 0 && len == (int)strlen(s));
    OK(MPI_Error_class(code, &k));
    CHECK(k == cls);
    OK(MPI_Error_class(code2, &k));
    CHECK(k == MPI_ERR_ARG);
    MPI_Errhandler eh;
    OK(MPI_Comm_create_errhandler(handler, &eh));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh));
    OK(MPI_Comm_call_errhandler(MPI_COMM_WORLD, code));
    CHECK(seen == code);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Errhandler_free(&eh));
    CHECK(MPI_Remove_error_class(cls) != MPI_SUCCESS); /* it still has a code */
    OK(MPI_Remove_error_string(code));
    OK(MPI_Remove_error_code(code));
    OK(MPI_Remove_error_class(cls));
    OK(MPI_Remove_error_code(code2));
    CHECK(MPI_Error_class(code, &k) != MPI_SUCCESS);
    /* Datatype attributes: set, get, copied by MPI_Type_dup, deleted by MPI_Type_free. */
    int kv, val = 42, *got;
    MPI_Datatype vec, dup;
    OK(MPI_Type_create_keyval(tcopy, tdelete, &kv, NULL));
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_set_attr(vec, kv, &val));
    OK(MPI_Type_get_attr(vec, kv, &got, &flag));
    CHECK(flag && got == &val);
    OK(MPI_Type_dup(vec, &dup));
    CHECK(copies == 1);
    OK(MPI_Type_get_attr(dup, kv, &got, &flag));
    CHECK(flag && *got == 42);
    OK(MPI_Type_free(&dup));
    CHECK(deletes == 1);
    OK(MPI_Type_delete_attr(vec, kv));
    CHECK(deletes == 2);
    OK(MPI_Type_get_attr(vec, kv, &got, &flag));
    CHECK(!flag);
    OK(MPI_Type_set_attr(MPI_INT, kv, &val)); /* predefined types carry them too */
    OK(MPI_Type_delete_attr(MPI_INT, kv));
    OK(MPI_Type_free(&vec));
    OK(MPI_Type_free_keyval(&kv));
    CHECK(kv == MPI_KEYVAL_INVALID);

    OK(MPI_Finalize());
    printf("envmore ok\n");
    return 0;
}
