-- Tables enabled by an earlier release: link their objects to them (so that
-- DROP TABLE ... CASCADE drops them by dependency); a row that names
-- objects which are not its table owner's is dropped from the registry.
-- The block runs as the superuser who updates, with the update's
-- search_path: there an operator or function that a role created in the
-- extension's schema would win over pg_catalog's whenever its argument
-- types fit better, so every table, call and operator is qualified.
DO $link$
DECLARE
	entry record;
BEGIN
	FOR entry IN SELECT r.tbl FROM @extschema@.nearsim_tables r LOOP
		BEGIN
			UPDATE @extschema@.nearsim_tables r SET bands = r.bands
				WHERE r.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) entry.tbl::pg_catalog.oid;
		EXCEPTION WHEN insufficient_privilege THEN
			RAISE WARNING 'nearsim: forgetting %, whose registry row names objects that are not its owner''s: %',
				entry.tbl, SQLERRM;
			DELETE FROM @extschema@.nearsim_tables r
				WHERE r.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) entry.tbl::pg_catalog.oid;
		END;
	END LOOP;
END
$link$;
