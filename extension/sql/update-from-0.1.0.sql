-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION nearsim UPDATE" to load this file. \quit

-- What releases after 0.1.0 add to it: 0.2.0 the DROP EXTENSION guard; 0.3.0
-- only moved the Python code.  (The PL/Python functions and the comments are
-- re-created after this part, from the current install script.)

CREATE FUNCTION nearsim_drop_extension() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'nearsim_drop_extension'
	LANGUAGE C
	SET search_path = pg_catalog, pg_temp;

CREATE EVENT TRIGGER nearsim_drop_extension ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION')
	EXECUTE FUNCTION nearsim_drop_extension();

