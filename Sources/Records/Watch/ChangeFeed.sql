-- The change feed's tables and trigger functions (ChangeFeed.install runs this file as one
-- simple query, so in one transaction; it is idempotent). Constants shared with the Swift side
-- are written here as literals, and ChangeFeedSQLTests checks they match: the registration's
-- life (90 seconds, ChangeFeed.registrationSeconds), the advisory locks (29283 = 'rc';
-- 1903520101 = 'quie', quietLock; 1936419184 = 'skip', skipLock) and the channel
-- ('records_changes').

CREATE TABLE IF NOT EXISTS records.watched (
    server text NOT NULL,
    entity text NOT NULL,
    seen   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server, entity)
);
-- DDL below runs only when there is something to do: ALTER TABLE and CREATE INDEX
-- lock the table even when nothing changes, waiting behind every open transaction
-- that wrote to it while every later writer waits behind them (a server start
-- stalled the writes of every watched table so).
DO $watched$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'records.watched'::regclass AND attname = 'filtered' AND NOT attisdropped) THEN
        ALTER TABLE records.watched ADD COLUMN filtered boolean NOT NULL DEFAULT false;
    END IF;
END
$watched$;
CREATE TABLE IF NOT EXISTS records.deleted_rows (
    seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entity text NOT NULL,
    key    text NOT NULL,
    row    jsonb NOT NULL,
    at     timestamptz NOT NULL DEFAULT now()
);
DO $deleted$
BEGIN
    IF to_regclass('records.deleted_rows_key') IS NULL THEN
        CREATE INDEX deleted_rows_key ON records.deleted_rows (entity, key);
    END IF;
    IF to_regclass('records.deleted_rows_at') IS NULL THEN
        CREATE INDEX deleted_rows_at ON records.deleted_rows (at);
    END IF;
END
$deleted$;
CREATE TABLE IF NOT EXISTS records.change_log (
    seq       bigint GENERATED ALWAYS AS IDENTITY,
    xid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
    at        timestamptz NOT NULL DEFAULT now(),
    entity    text NOT NULL,
    operation text NOT NULL,
    keys      text[] NOT NULL
);
-- The reader's one index. Every concurrent writer appends to the right edge of
-- each b-tree on an ever-growing column, one at a time: a primary key on seq
-- (never looked up) and a b-tree on at (for pruning) cost a watched SAVE under 64
-- clients some 50 µs of PostgreSQL's CPU. at takes a BRIN index: a page range's
-- summary is made by VACUUM, not by each insert.
-- Without a primary key, deletes (pruning) need a replica identity where a
-- publication FOR ALL TABLES publishes them.
DO $indexes$
BEGIN
    IF to_regclass('records.change_log_xid') IS NULL THEN
        CREATE INDEX change_log_xid ON records.change_log (xid);
    END IF;
    IF to_regclass('records.change_log_pkey') IS NOT NULL THEN
        ALTER TABLE records.change_log DROP CONSTRAINT change_log_pkey;
    END IF;
    IF (SELECT relreplident FROM pg_class WHERE oid = 'records.change_log'::regclass) <> 'f' THEN
        ALTER TABLE records.change_log REPLICA IDENTITY FULL;
    END IF;
    IF to_regclass('records.change_log_at') IS NOT NULL THEN
        DROP INDEX records.change_log_at;
    END IF;
    IF to_regclass('records.change_log_at_range') IS NULL THEN
        CREATE INDEX change_log_at_range ON records.change_log USING brin (at);
    END IF;
END
$indexes$;

CREATE OR REPLACE FUNCTION records.row_key(j jsonb, columns text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $key$
    -- A trigger's TG_ARGV counts from 0, and its slices from 1: the first element is at the lower bound.
    SELECT CASE WHEN cardinality(columns) = 1 THEN j ->> columns[array_lower(columns, 1)]
                ELSE (SELECT jsonb_agg(j ->> c ORDER BY n) FROM unnest(columns) WITH ORDINALITY AS x(c, n))::text END
$key$;
CREATE OR REPLACE FUNCTION records.log_changes() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
    operation text := CASE TG_OP WHEN 'INSERT' THEN 'inserted' WHEN 'UPDATE' THEN 'updated' ELSE 'deleted' END;
    -- The trigger's arguments: the entity (a partition's changes are its table's), then
    -- its key columns.
    entity_name text := TG_ARGV[0];
BEGIN
    -- Static SQL (planned once per table): the key columns, named by the trigger's
    -- arguments, are read through jsonb; a composite key is written as a JSON array.
    -- A one-column key is read in place: row_key, a SQL function with a subquery,
    -- is never inlined, and called a row it cost more than the rest of the trigger.
    -- Inserts and updates are one statement: whether a server watches the table is
    -- its one-time filter (the rows are not read when none does), then the keys
    -- are gathered and logged; three statements cost a watched SAVE a tenth more.
    -- The servers are woken at commit, by records_wake on the log.
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM records.watched WHERE entity = entity_name
                       AND seen > now() - interval '90 seconds') THEN
            RETURN NULL;
        END IF;
        -- A watch with a WHERE decides on deletes from the values the rows had.
        IF EXISTS (SELECT 1 FROM records.watched WHERE entity = entity_name AND filtered
                   AND seen > now() - interval '90 seconds') THEN
            INSERT INTO records.deleted_rows (entity, key, row)
            SELECT entity_name, CASE WHEN TG_NARGS = 2 THEN r.j ->> TG_ARGV[1] ELSE records.row_key(r.j, TG_ARGV[1:]) END, r.j
            FROM (SELECT to_jsonb(o.*) AS j FROM old_rows o) r;
        END IF;
        -- (Two statements: both aggregates of a CASE would be computed.)
        IF TG_NARGS = 2 THEN
            INSERT INTO records.change_log (entity, operation, keys)
            SELECT entity_name, operation, k.keys
            FROM (SELECT array_agg(to_jsonb(o.*) ->> TG_ARGV[1]) AS keys FROM old_rows o) k WHERE k.keys IS NOT NULL;
        ELSE
            INSERT INTO records.change_log (entity, operation, keys)
            SELECT entity_name, operation, k.keys
            FROM (SELECT array_agg(records.row_key(to_jsonb(o.*), TG_ARGV[1:])) AS keys FROM old_rows o) k WHERE k.keys IS NOT NULL;
        END IF;
    ELSIF TG_NARGS = 2 THEN
        INSERT INTO records.change_log (entity, operation, keys)
        SELECT entity_name, operation, k.keys
        FROM (SELECT array_agg(to_jsonb(n.*) ->> TG_ARGV[1]) AS keys FROM new_rows n) k
        WHERE k.keys IS NOT NULL AND EXISTS (SELECT 1 FROM records.watched WHERE entity = entity_name
                                             AND seen > now() - interval '90 seconds');
    ELSE
        INSERT INTO records.change_log (entity, operation, keys)
        SELECT entity_name, operation, k.keys
        FROM (SELECT array_agg(records.row_key(to_jsonb(n.*), TG_ARGV[1:])) AS keys FROM new_rows n) k
        WHERE k.keys IS NOT NULL AND EXISTS (SELECT 1 FROM records.watched WHERE entity = entity_name
                                             AND seen > now() - interval '90 seconds');
    END IF;
    RETURN NULL;
END
$body$;
-- At commit (deferred): no wake-up while every server's reader polls (the quiet
-- lock is free: taken and let go at once). A writer that skips it holds the skip
-- lock shared until its commit ends, taken before it looks, so that a reader
-- asking to be woken meanwhile either makes it notify or sees it in flight.
CREATE OR REPLACE FUNCTION records.wake_servers() RETURNS trigger LANGUAGE plpgsql AS $wake$
BEGIN
    IF pg_try_advisory_lock_shared(29283, 1936419184) THEN
        IF pg_try_advisory_lock(29283, 1903520101) THEN
            PERFORM pg_advisory_unlock(29283, 1903520101);
            PERFORM pg_try_advisory_xact_lock_shared(29283, 1936419184);
            PERFORM pg_advisory_unlock_shared(29283, 1936419184);
            RETURN NULL;
        END IF;
        PERFORM pg_advisory_unlock_shared(29283, 1936419184);
    END IF;
    PERFORM pg_notify('records_changes', '');
    RETURN NULL;
END
$wake$;
DO $install$
BEGIN
    -- A constraint trigger has no CREATE OR REPLACE.
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'records.change_log'::regclass AND tgname = 'records_wake') THEN
        CREATE CONSTRAINT TRIGGER records_wake AFTER INSERT ON records.change_log
            DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION records.wake_servers();
    END IF;
END
$install$;
