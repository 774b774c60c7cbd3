#ifndef CLIBPQ_SHIM_H
#define CLIBPQ_SHIM_H
#include <libpq-fe.h>

// Swift does not import character-literal macros; re-export the diagnostic field codes we read.
static const int CLibPQ_DIAG_SQLSTATE = PG_DIAG_SQLSTATE;
static const int CLibPQ_DIAG_MESSAGE_PRIMARY = PG_DIAG_MESSAGE_PRIMARY;
static const int CLibPQ_DIAG_MESSAGE_DETAIL = PG_DIAG_MESSAGE_DETAIL;
static const int CLibPQ_DIAG_MESSAGE_HINT = PG_DIAG_MESSAGE_HINT;
static const int CLibPQ_DIAG_SCHEMA_NAME = PG_DIAG_SCHEMA_NAME;
static const int CLibPQ_DIAG_TABLE_NAME = PG_DIAG_TABLE_NAME;
static const int CLibPQ_DIAG_COLUMN_NAME = PG_DIAG_COLUMN_NAME;
static const int CLibPQ_DIAG_CONSTRAINT_NAME = PG_DIAG_CONSTRAINT_NAME;
static const int CLibPQ_DIAG_CONTEXT = PG_DIAG_CONTEXT;
static const int CLibPQ_DIAG_SEVERITY = PG_DIAG_SEVERITY_NONLOCALIZED;
#endif
