/* MPI_Pcontrol, MPI_Info_create_env, MPI_Abi_get_info, MPI_Get_hw_resource_info,
 * MPI_Type_match_size, and user error classes, codes and strings (added, named,
 * classified, reported through MPI_LASTUSEDCODE, raised, removed). Any number of ranks. */
#include "check.h"
#include <string.h>

static int seen = -1;
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
    OK(MPI_Finalize());
    printf("envmore ok\n");
    return 0;
}
