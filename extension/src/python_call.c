#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/makefuncs.h"
#include "nodes/pg_list.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "nearsim.h"

/*
 * The functions nearsim writes in PL/Python are called through a C function
 * of the same name and arguments, nearsim_python_call, which calls the
 * PL/Python body (<name>_python) and reports its errors the way PostgreSQL
 * reports its own: message, detail, hint and SQLSTATE, without the Python
 * traceback that PL/Python puts into the error's context and without
 * PL/Python's "plpy.Error: " prefix.  The context of the caller (a PL/pgSQL
 * function calling nearsim_enable, say) is kept.
 */

/* The PL/Python body of a function and the state it keeps between calls */
typedef struct PythonBody
{
	FmgrInfo	flinfo;
} PythonBody;

/* PL/Python's message for an error raised by a set-returning body's iterator */
#define ITERATOR_MESSAGE "error fetching next item from iterator"

/* Suffix of a PL/Python body's name */
#define PYTHON_BODY_SUFFIX "_python"

/* The PL/Python body of function outer: same schema, name + suffix, same arguments */
Oid
nearsim_python_body(Oid outer)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(outer));
	Form_pg_proc proc;
	char	   *schema;
	char	   *name;
	Oid			body;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", outer);
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	schema = get_namespace_name(proc->pronamespace);
	name = psprintf("%s%s", NameStr(proc->proname), PYTHON_BODY_SUFFIX);
	body = LookupFuncName(list_make2(makeString(schema), makeString(name)),
						  proc->pronargs, proc->proargtypes.values, true);
	ReleaseSysCache(tuple);
	if (!OidIsValid(body))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function %s.%s is missing", schema, name),
				 errhint("Reinstall the extension: ALTER EXTENSION nearsim UPDATE, or DROP and CREATE it.")));
	return body;
}

/* The message without the "plpy.Error: " or "spiexceptions.Name: " PL/Python puts before it */
static char *
without_python_prefix(char *message)
{
	static const char *const prefixes[] = {"plpy.Error: ", "plpy.Fatal: ", "spiexceptions."};
	size_t		i;

	if (message == NULL)
		return NULL;
	for (i = 0; i < lengthof(prefixes); i++)
	{
		size_t		length = strlen(prefixes[i]);

		if (strncmp(message, prefixes[i], length) != 0)
			continue;
		if (i < 2)
			return message + length;
		/* spiexceptions.<Name>: message */
		{
			char	   *colon = strstr(message + length, ": ");

			return colon != NULL ? colon + 2 : message;
		}
	}
	return message;
}

/*
 * Report the error being handled in a PG_CATCH block around a call of a
 * PL/Python body again, without the body's context: message, detail, hint
 * and SQLSTATE as the body raised them, in caller_context.
 */
void
nearsim_rethrow_python_error(MemoryContext caller_context)
{
	ErrorData  *error;

	MemoryContextSwitchTo(caller_context);
	error = CopyErrorData();
	FlushErrorState();
	/*
	 * An error raised while a set-returning body makes its next row (a
	 * cancel or a limit met half-way) comes with PL/Python's own message
	 * and the body's in the detail: the body's is the message.
	 */
	if (error->message != NULL && error->detail != NULL &&
		strcmp(error->message, ITERATOR_MESSAGE) == 0)
	{
		error->message = error->detail;
		error->detail = NULL;
	}
	error->message = without_python_prefix(error->message);
	error->context = NULL;
	error->internalquery = NULL;
	error->internalpos = 0;
	/* reported again here, so the caller's context callbacks add theirs */
	ThrowErrorData(error);
	/* ThrowErrorData returns only for levels below ERROR */
	pg_unreachable();
}

/*
 * Call the PL/Python body of the function being called with the same
 * arguments, result info and context; set-returning bodies keep their
 * state between calls in the FmgrInfo kept here.  An error is reported
 * again, at this level, without the body's context.
 */
Datum
nearsim_call_python_body(FunctionCallInfo fcinfo)
{
	PythonBody *body = (PythonBody *) fcinfo->flinfo->fn_extra;
	MemoryContext caller_context = CurrentMemoryContext;
	LOCAL_FCINFO(inner, FUNC_MAX_ARGS);
	Datum		result = (Datum) 0;

	if (body == NULL)
	{
		body = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(PythonBody));
		fmgr_info_cxt(nearsim_python_body(fcinfo->flinfo->fn_oid), &body->flinfo,
					  fcinfo->flinfo->fn_mcxt);
		body->flinfo.fn_expr = fcinfo->flinfo->fn_expr;
		fcinfo->flinfo->fn_extra = body;
	}
	InitFunctionCallInfoData(*inner, &body->flinfo, fcinfo->nargs, fcinfo->fncollation,
							 fcinfo->context, fcinfo->resultinfo);
	memcpy(inner->args, fcinfo->args, sizeof(NullableDatum) * fcinfo->nargs);

	PG_TRY();
	{
		result = FunctionCallInvoke(inner);
	}
	PG_CATCH();
	{
		nearsim_rethrow_python_error(caller_context);
	}
	PG_END_TRY();

	fcinfo->isnull = inner->isnull;
	return result;
}

PG_FUNCTION_INFO_V1(nearsim_python_call);
/* A function written in PL/Python: its body, called as above */
Datum
nearsim_python_call(PG_FUNCTION_ARGS)
{
	return nearsim_call_python_body(fcinfo);
}

/*
 * Refuse a table whose profile this server cannot compute (the PL/Python
 * body of nearsim_check_profile says why); the default profile (default/1
 * or default/2), computed in C, is taken without asking.  ext is the quoted
 * schema of the extension; the caller has connected to SPI.
 */
void
nearsim_require_computable_profile(const char *ext, Oid relid, const char *profile)
{
	char	   *check;
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		values[2];

	if (nearsim_profile_in_c(profile))
		return;
	check = psprintf("SELECT %s.nearsim_check_profile($1, $2)", ext);
	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(profile);
	if (SPI_execute_with_args(check, 2, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "nearsim: could not check the profile of %s", get_rel_name(relid));
	pfree(check);
}

PG_FUNCTION_INFO_V1(nearsim_check_profile);
/*
 * nearsim_check_profile(tbl, profile): true when this server computes the
 * profile, else an error (the PL/Python body says why).  The default
 * profile (default/1 or default/2) is computed in C and needs no Python: a
 * search of a table of that profile, which plans this call, never starts
 * the Python interpreter.
 */
Datum
nearsim_check_profile(PG_FUNCTION_ARGS)
{
	char	   *profile = text_to_cstring(PG_GETARG_TEXT_PP(1));

	if (nearsim_profile_in_c(profile))
		PG_RETURN_BOOL(true);
	return nearsim_call_python_body(fcinfo);
}
