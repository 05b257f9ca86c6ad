-- What 0.3.0 adds.  Its Python code moved into nearsim.core, nearsim.server
-- and nearsim.client, so every PL/Python function is re-created (after this
-- part, from the install script).  And no role gains another's rights:

-- The registry is written only through nearsim_register/nearsim_unregister.
DROP POLICY owner_registers ON @extschema@.nearsim_tables;
DROP POLICY owner_updates ON @extschema@.nearsim_tables;
DROP POLICY owner_or_drop_removes ON @extschema@.nearsim_tables;
REVOKE INSERT, UPDATE, DELETE ON @extschema@.nearsim_tables FROM PUBLIC;

CREATE FUNCTION nearsim_as_owner(tbl regclass, statement text) RETURNS text
	AS 'MODULE_PATHNAME', 'nearsim_as_owner'
	LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION nearsim_link(tbl regclass, relations regclass[], functions regprocedure[])
	RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_link'
	LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION nearsim_register(tbl regclass, key_column name, text_column name,
		hash_column name, bands integer, profile text, bucket_table name,
		fingerprint_function name, bucket_function name, similar_function name)
	RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_register'
	LANGUAGE C VOLATILE;

CREATE FUNCTION nearsim_unregister(tbl regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_unregister'
	LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION nearsim_link_registered() RETURNS trigger
	LANGUAGE plpgsql
	AS $plpgsql$ BEGIN RETURN NULL; END $plpgsql$;

CREATE TRIGGER nearsim_link_registered AFTER INSERT OR UPDATE ON @extschema@.nearsim_tables
	FOR EACH ROW EXECUTE FUNCTION @extschema@.nearsim_link_registered();

CREATE FUNCTION nearsim_follow_owner() RETURNS event_trigger
	LANGUAGE plpgsql
	AS $plpgsql$ BEGIN END $plpgsql$;

CREATE EVENT TRIGGER nearsim_follow_owner ON ddl_command_end
	WHEN TAG IN ('ALTER TABLE')
	EXECUTE FUNCTION @extschema@.nearsim_follow_owner();

CREATE FUNCTION nearsim_guard_alter_table() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'nearsim_guard_alter_table'
	LANGUAGE C;

CREATE EVENT TRIGGER nearsim_guard_alter_table ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE')
	EXECUTE FUNCTION @extschema@.nearsim_guard_alter_table();
