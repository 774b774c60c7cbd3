-- The role recordsd serves as: it reads and writes the data, never changes the schema.
-- Run once by the database's owner (the role that applies migrations), with psql:
--   psql -v app_role=records_app -v app_password="..." -v owner=records -f app-role.sql
-- Tables, sequences and schemas the owner creates later (migrations, recordsd's own schema)
-- are granted to the app role as they are made.
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'app_role', :'app_password')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_role') \gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'app_role', :'app_password') \gexec
SELECT format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO %I', current_database(), :'app_role') \gexec
SELECT format('GRANT USAGE ON SCHEMA public TO %I', :'app_role') \gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I GRANT USAGE ON SCHEMAS TO %I', :'owner', :'app_role') \gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', :'owner', :'app_role') \gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO %I', :'owner', :'app_role') \gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I GRANT EXECUTE ON FUNCTIONS TO %I', :'owner', :'app_role') \gexec
-- What exists already (a database migrated before this ran): the schemas the owner owns or owns
-- through a role it has; PostgreSQL 15's `public` belongs to pg_database_owner, which is the
-- database's owner.
SELECT format('GRANT USAGE ON SCHEMA %I TO %I', nspname, :'app_role') FROM pg_namespace
WHERE pg_has_role(:'owner', nspowner, 'USAGE') AND nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' \gexec
SELECT format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I', nspname, :'app_role') FROM pg_namespace
WHERE pg_has_role(:'owner', nspowner, 'USAGE') AND nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' \gexec
SELECT format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO %I', nspname, :'app_role') FROM pg_namespace
WHERE pg_has_role(:'owner', nspowner, 'USAGE') AND nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' \gexec
