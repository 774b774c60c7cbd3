-- Each user has their own memos, contacts, journal entries and friends. recordsd tells
-- PostgreSQL who is asking (records.user, records.role); these policies decide. An admin
-- sees and changes every user's records by policy, not by bypass; sessions without a user
-- (loopback, no users) run as admin. FORCE: the tables' owner is bound too, so a server that
-- connects as the owner still honours them (a superuser or BYPASSRLS role never does:
-- recordsd warns at start when it connects as one).

ALTER TABLE memo ADD COLUMN owner text DEFAULT NULLIF(current_setting('records.user', true), '');
ALTER TABLE contact ADD COLUMN owner text DEFAULT NULLIF(current_setting('records.user', true), '');
ALTER TABLE journal_entry ADD COLUMN owner text DEFAULT NULLIF(current_setting('records.user', true), '');
ALTER TABLE friend ADD COLUMN owner text DEFAULT NULLIF(current_setting('records.user', true), '');

CREATE INDEX memo_owner_idx ON memo (owner);
CREATE INDEX contact_owner_idx ON contact (owner);
CREATE INDEX journal_entry_owner_idx ON journal_entry (owner);
CREATE INDEX friend_owner_idx ON friend (owner);

ALTER TABLE memo ENABLE ROW LEVEL SECURITY;
ALTER TABLE memo FORCE ROW LEVEL SECURITY;
CREATE POLICY own_records ON memo
    USING (owner = current_setting('records.user', true) OR current_setting('records.role', true) = 'admin')
    WITH CHECK (owner = current_setting('records.user', true) OR current_setting('records.role', true) = 'admin');

ALTER TABLE contact ENABLE ROW LEVEL SECURITY;
ALTER TABLE contact FORCE ROW LEVEL SECURITY;
CREATE POLICY own_records ON contact
    USING (owner = current_setting('records.user', true) OR current_setting('records.role', true) = 'admin')
    WITH CHECK (owner = current_setting('records.user', true) OR current_setting('records.role', true) = 'admin');

ALTER TABLE journal_entry ENABLE ROW LEVEL SECURITY;
ALTER TABLE journal_entry FORCE ROW LEVEL SECURITY;
CREATE POLICY own_records ON journal_entry
    USING (owner = current_setting('records.user', true) OR current_setting('records.role', true) = 'admin')
    WITH CHECK (owner = current_setting('records.user', true) OR current_setting('records.role', true) = 'admin');

ALTER TABLE friend ENABLE ROW LEVEL SECURITY;
ALTER TABLE friend FORCE ROW LEVEL SECURITY;
CREATE POLICY own_records ON friend
    USING (owner = current_setting('records.user', true) OR current_setting('records.role', true) = 'admin')
    WITH CHECK (owner = current_setting('records.user', true) OR current_setting('records.role', true) = 'admin');
