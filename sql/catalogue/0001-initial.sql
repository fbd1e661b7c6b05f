-- 0001-initial.sql: the fleet catalogue (PostgreSQL), schema pim_catalogue.  pimd applies these
-- migrations itself, one transaction each under an advisory lock, so many hosts starting at
-- once apply each one once.  Rows are written only by pimd's publisher and never updated:
-- a run published twice (pimd crashed before it could forget it) is one row
-- (UNIQUE (host_id, publish_key)).

-- What "same platform" means: hosts whose key is equal (pimd(8), "Fleet catalogue").
CREATE TABLE pim_catalogue.platforms (
	key TEXT PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 255),
	description JSONB NOT NULL,           -- as the first host to publish described it
	first_seen TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A model is its manifest's content hash; the name is the first publisher's.
CREATE TABLE pim_catalogue.models (
	hash TEXT PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'),
	name TEXT NOT NULL,
	regions INTEGER NOT NULL CHECK (regions > 0),
	first_seen TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE pim_catalogue.runs (
	id BIGSERIAL PRIMARY KEY,
	host_id TEXT NOT NULL CHECK (length(host_id) BETWEEN 1 AND 64),
	publish_key TEXT NOT NULL,
	model_hash TEXT NOT NULL REFERENCES pim_catalogue.models(hash),
	platform_key TEXT NOT NULL REFERENCES pim_catalogue.platforms(key),
	kind TEXT NOT NULL CHECK (kind IN ('measured', 'imported')),
	backend TEXT NOT NULL,                -- counters, timing, imported
	uid BIGINT NOT NULL,                  -- who asked for the run or imported the counts
	platform JSONB NOT NULL,              -- the host as it measured: microcode, kernel, B_cpu
	summary JSONB NOT NULL,
	regions INTEGER NOT NULL,             -- metrics rows of this run
	measured_at TIMESTAMPTZ NOT NULL,
	published_at TIMESTAMPTZ NOT NULL DEFAULT now(),
	UNIQUE (host_id, publish_key)
);

-- The lookup: the newest measured run of a model on a platform.
CREATE INDEX runs_by_model_platform ON pim_catalogue.runs (model_hash, platform_key, kind, measured_at DESC);

CREATE TABLE pim_catalogue.region_metrics (
	run_id BIGINT NOT NULL REFERENCES pim_catalogue.runs(id) ON DELETE CASCADE,
	region_id INTEGER NOT NULL CHECK (region_id >= 0),
	evidence TEXT NOT NULL CHECK (evidence IN ('counters', 'estimate', 'imported')),
	t_host DOUBLE PRECISION NOT NULL CHECK (t_host > 0),
	t_host_spread DOUBLE PRECISION NOT NULL DEFAULT 0,
	n_rd DOUBLE PRECISION,
	c_store DOUBLE PRECISION,
	c_be1 DOUBLE PRECISION,
	c_be2 DOUBLE PRECISION,
	c_be3 DOUBLE PRECISION,
	bw_read_estimate DOUBLE PRECISION,
	source_b_cpu DOUBLE PRECISION,
	PRIMARY KEY (run_id, region_id)
);
