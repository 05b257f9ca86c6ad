-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION nearsim UPDATE" to load this file. \quit

-- What releases after 0.2.0 add to it.  0.3.0 changes no SQL object: its
-- Python code moved into nearsim.core, nearsim.server and nearsim.client, and
-- every PL/Python function, re-created after this part from the current
-- install script, calls nearsim.server.functions.
