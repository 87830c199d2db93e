#ifndef CPOSTGRES_SHIM_H
#define CPOSTGRES_SHIM_H
// libpq (PostgreSQL's own client library), from Debian's libpq-dev.
#include <libpq-fe.h>
#endif
