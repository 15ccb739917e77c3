//! Hand-written stubs (none at present): functions the header declares that phalanx does
//! not implement are generated into [`crate::stubs_gen`]; each raises `MPI_ERR_OTHER`
//! ("not implemented") through the error handler of its communicator (`MPI_COMM_WORLD`
//! when it has none), so a program under `MPI_ERRORS_RETURN` gets the class back.
