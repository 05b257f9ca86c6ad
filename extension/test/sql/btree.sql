-- nearsim_btree: btree, with a transaction's new entries inserted in key order
-- (its operator class compares bigint with bigint: write keys as bigint)
\set VERBOSITY terse
SELECT amvalidate(oid) FROM pg_opclass WHERE opcname = 'nearsim_btree_int8_ops';
CREATE TABLE keys (id integer PRIMARY KEY, k bigint);
CREATE INDEX keys_k ON keys USING nearsim_btree (k);
-- the rows as the index finds them and as the table has them, each in id order
CREATE FUNCTION by_index() RETURNS integer[] LANGUAGE sql
	SET enable_seqscan = off SET enable_bitmapscan = off
	AS $$ SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM keys
		WHERE k >= -9223372036854775808 $$;
CREATE FUNCTION by_table() RETURNS integer[] LANGUAGE sql
	SET enable_indexscan = off SET enable_indexonlyscan = off SET enable_bitmapscan = off
	AS $$ SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM keys WHERE k IS NOT NULL $$;
CREATE FUNCTION agree() RETURNS text LANGUAGE sql
	AS $$ SELECT CASE WHEN by_index() = by_table() THEN 'equal, ' || cardinality(by_table())
		ELSE 'index ' || cardinality(by_index()) || ' rows, table ' || cardinality(by_table()) END $$;
SET enable_seqscan = off;
SET enable_bitmapscan = off;

-- a transaction's scans see its own entries, in key order, every extreme key too
EXPLAIN (COSTS OFF) SELECT id FROM keys WHERE k BETWEEN -2::bigint AND 2::bigint;
BEGIN;
INSERT INTO keys SELECT g, (g * 7919) % 10007 - 5003 FROM generate_series(1, 10000) g;
INSERT INTO keys VALUES (-1, -9223372036854775808), (-2, 9223372036854775807), (-3, 0), (-4, -1);
SELECT id, k FROM keys WHERE k BETWEEN -2::bigint AND 2::bigint ORDER BY k, id;
SELECT k FROM keys ORDER BY k LIMIT 3;
SELECT k FROM keys ORDER BY k DESC LIMIT 3;
SELECT agree();
COMMIT;
SELECT agree();

-- entries of a subtransaction rolled back go in too, and VACUUM removes them
BEGIN;
INSERT INTO keys VALUES (20001, 7);
SAVEPOINT s;
INSERT INTO keys SELECT g, g FROM generate_series(20002, 20100) g;
ROLLBACK TO s;
INSERT INTO keys VALUES (20101, 8);
COMMIT;
SELECT agree();
SELECT id, k FROM keys WHERE k BETWEEN 7::bigint AND 8::bigint ORDER BY id;
VACUUM keys;
SELECT agree();

-- a transaction larger than nearsim.insert_buffer inserts as the memory fills
SET nearsim.insert_buffer = '64kB';
SHOW nearsim.insert_buffer;
BEGIN;
INSERT INTO keys SELECT g, g % 1000 FROM generate_series(200001, 300000) g;
SELECT total_bytes < 1024 * 1024 AS within_a_megabyte FROM pg_backend_memory_contexts
WHERE name = 'TopTransactionContext';
DELETE FROM keys WHERE id BETWEEN 200001 AND 200500;
SELECT agree();
COMMIT;
SELECT agree();
-- and with none, each entry goes in at once
SET nearsim.insert_buffer = 0;
INSERT INTO keys SELECT g, -g FROM generate_series(150001, 150100) g;
SELECT agree();
RESET nearsim.insert_buffer;

-- NULL keys go in at once, as in btree
INSERT INTO keys VALUES (60001, NULL), (60002, NULL);
SELECT count(*) FROM keys WHERE k IS NULL;

-- a rebuild or a new, empty file in the same transaction keeps the index whole
BEGIN;
INSERT INTO keys SELECT g, g FROM generate_series(70001, 70100) g;
REINDEX INDEX keys_k;
INSERT INTO keys SELECT g, g FROM generate_series(70101, 70200) g;
SELECT agree();
COMMIT;
SELECT agree();
BEGIN;
INSERT INTO keys SELECT g, g FROM generate_series(80001, 80100) g;
TRUNCATE keys;
INSERT INTO keys SELECT g, g FROM generate_series(80101, 80200) g;
COMMIT;
SELECT agree();
-- entries for a file a rolled-back subtransaction made are dropped, not put in the old file
BEGIN;
INSERT INTO keys SELECT g, g FROM generate_series(80201, 80300) g;
SAVEPOINT s;
TRUNCATE keys;
INSERT INTO keys SELECT g, g FROM generate_series(80301, 80400) g;
ROLLBACK TO s;
INSERT INTO keys SELECT g, g FROM generate_series(80401, 80500) g;
SELECT agree();
COMMIT;
SELECT agree();

-- an index moved to another tablespace takes the waiting entries with it
SET allow_in_place_tablespaces = true;
CREATE TABLESPACE nearsim_btree_test LOCATION '';
BEGIN;
INSERT INTO keys SELECT g, g FROM generate_series(90001, 90100) g;
ALTER INDEX keys_k SET TABLESPACE nearsim_btree_test;
COMMIT;
SELECT agree();
ALTER INDEX keys_k SET TABLESPACE pg_default;
DROP TABLESPACE nearsim_btree_test;

-- an index that is gone, in a rolled-back subtransaction or dropped, takes its entries
BEGIN;
SAVEPOINT s;
CREATE INDEX keys_k_again ON keys USING nearsim_btree (k);
INSERT INTO keys VALUES (100001, 1);
ROLLBACK TO s;
INSERT INTO keys VALUES (100002, 2);
COMMIT;
SELECT agree();
BEGIN;
CREATE INDEX keys_k_again ON keys USING nearsim_btree (k);
INSERT INTO keys VALUES (100003, 3);
DROP INDEX keys_k_again;
COMMIT;
SELECT agree();

-- parallel workers, which cannot see a backend's waiting entries, start after they go in
BEGIN;
SET LOCAL force_parallel_mode = on;
SET LOCAL parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM keys WHERE k = 123456::bigint;
INSERT INTO keys SELECT g, 123456 FROM generate_series(110001, 110010) g;
SELECT count(*) FROM keys WHERE k = 123456::bigint;
COMMIT;

-- btree's kinds of index that cannot wait are refused
CREATE UNIQUE INDEX ON keys USING nearsim_btree (k);
CREATE INDEX ON keys USING nearsim_btree (k, id);
CLUSTER keys USING keys_k;
DROP TABLE keys;
DROP FUNCTION agree(), by_index(), by_table();
