-- What 0.2.0 adds: the guard on DROP EXTENSION.

CREATE FUNCTION nearsim_drop_extension() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'nearsim_drop_extension'
	LANGUAGE C
	SET search_path = pg_catalog, pg_temp;

CREATE EVENT TRIGGER nearsim_drop_extension ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION')
	EXECUTE FUNCTION @extschema@.nearsim_drop_extension();

