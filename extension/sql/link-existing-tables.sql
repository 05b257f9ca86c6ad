
-- Tables enabled by an earlier release: link their objects to them (so that
-- DROP TABLE ... CASCADE drops them by dependency); a row that names
-- objects which are not its table owner's is dropped from the registry.
DO $link$
DECLARE
	entry record;
BEGIN
	FOR entry IN SELECT tbl FROM nearsim_tables LOOP
		BEGIN
			UPDATE nearsim_tables SET bands = bands WHERE tbl = entry.tbl;
		EXCEPTION WHEN insufficient_privilege THEN
			RAISE WARNING 'nearsim: forgetting %, whose registry row names objects that are not its owner''s: %',
				entry.tbl, SQLERRM;
			DELETE FROM nearsim_tables WHERE tbl = entry.tbl;
		END;
	END LOOP;
END
$link$;
