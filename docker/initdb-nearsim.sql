-- Run by the postgres image's entrypoint, as the bootstrap superuser, when it
-- initialises an empty data directory: creates the extension in POSTGRES_DB.
-- CASCADE creates PL/Python too; both need a superuser, plpython3u being an
-- untrusted language.
CREATE EXTENSION IF NOT EXISTS nearsim CASCADE;
