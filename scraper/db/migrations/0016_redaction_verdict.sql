-- 16: the redaction decided when a template is stored (issue 19): `clean_at_rules`, the rules version
-- (policy/redact.RULES_VERSION) under which redacting the row's workflow, description and explainer
-- changes nothing (NULL: not known, or it holds a secret); `redacted`, for a row with secrets, its
-- redacted columns and count under the version it names (JSON). Written with those columns by
-- store.upsert; the export uses them only at the current version. Rows stored before stay NULL
-- (redacted at export, as before) until re-stored or reextracted.

    ALTER TABLE workflows ADD COLUMN clean_at_rules INTEGER;
    ALTER TABLE workflows ADD COLUMN redacted TEXT;
