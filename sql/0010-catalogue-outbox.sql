-- 0010-catalogue-outbox.sql: what pimd shares with the fleet catalogue (pimd.conf(5),
-- catalogue).  A finished run or imported counts are queued here in the transaction that stores
-- them, so nothing acknowledged is lost when PostgreSQL is down; pimd's catalogue thread
-- publishes the oldest row and deletes it only once PostgreSQL has committed it (publishing
-- is idempotent there: a row published twice is one run).  The payload is a snapshot: a later
-- run or a removed model does not change what is published.

CREATE TABLE catalogue_outbox (
	id INTEGER PRIMARY KEY,
	kind TEXT NOT NULL CHECK (kind IN ('measured', 'imported')),
	publish_key TEXT NOT NULL UNIQUE,     -- unique per host: "run:ID:CREATED" or "import:..."
	model_name TEXT NOT NULL,
	model_hash TEXT NOT NULL,             -- models.content_hash
	regions INTEGER NOT NULL,             -- of the model
	platform_key TEXT NOT NULL,
	platform TEXT NOT NULL,               -- JSON: this host as it measured
	uid INTEGER NOT NULL,
	backend TEXT NOT NULL,
	measured_at INTEGER NOT NULL,
	payload TEXT NOT NULL,                -- JSON: {"summary": {...}, "metrics": [{...}, ...]}
	attempts INTEGER NOT NULL DEFAULT 0,
	failed TEXT                           -- refused by the catalogue for its content: kept, skipped
);

-- A model's identity in the catalogue: SHA-256 of its manifest without its name (computed
-- when first needed; a replaced model is a new row).
ALTER TABLE models ADD COLUMN content_hash TEXT NOT NULL DEFAULT '';

-- Metrics taken from the catalogue: which host measured them, when, with which backend.
-- NULL for this host's own.
ALTER TABLE metrics ADD COLUMN origin_host TEXT;
ALTER TABLE metrics ADD COLUMN origin_measured_at INTEGER;
ALTER TABLE metrics ADD COLUMN origin_backend TEXT;

-- A model's version changes with each row of its metrics (0005), but the rows fetched from the
-- catalogue for one model arrive together, in one transaction that bumps the version once
-- (store_fetched_end): a new host's first answer does not wait for 10,000 updates of models.
DROP TRIGGER metrics_version;
CREATE TRIGGER metrics_version AFTER INSERT ON metrics WHEN NEW.origin_host IS NULL
BEGIN
	UPDATE model_version_high SET n = n + 1;
	UPDATE models SET version = (SELECT n FROM model_version_high) WHERE id = NEW.model_id;
END;
