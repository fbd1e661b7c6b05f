-- 0002-metrics.sql: profile runs, raw samples, derived per-region metrics with their evidence,
-- and stored placement decisions (doc/design.md §3, §4).

CREATE TABLE profile_runs (
	id INTEGER PRIMARY KEY,
	model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	platform_id INTEGER NOT NULL REFERENCES platforms(id),
	owner_uid INTEGER NOT NULL,
	backend TEXT NOT NULL CHECK (backend IN ('counters', 'timing', 'imported', 'pending')),
	state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
	message TEXT NOT NULL DEFAULT '',
	backend_reason TEXT NOT NULL DEFAULT '',
	worker_uid INTEGER,
	samples INTEGER NOT NULL DEFAULT 0,
	repetitions_done INTEGER NOT NULL DEFAULT 0,
	repetitions_total INTEGER NOT NULL DEFAULT 0,
	warmup INTEGER NOT NULL DEFAULT 0,
	repetitions INTEGER NOT NULL DEFAULT 0,
	regions_total INTEGER NOT NULL DEFAULT 0,
	regions_done INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	finished_at INTEGER
);

CREATE INDEX profile_runs_by_model ON profile_runs(model_id);

-- One row per region, event group and repetition: time and raw counts summed over the
-- region's executions in that repetition (values_blob holds n_values little-endian 64-bit
-- counts in the group's event order), with time enabled/running.
CREATE TABLE samples (
	run_id INTEGER NOT NULL REFERENCES profile_runs(id) ON DELETE CASCADE,
	region_id INTEGER NOT NULL,
	grp INTEGER NOT NULL,
	rep INTEGER NOT NULL,
	executions INTEGER NOT NULL DEFAULT 1,
	time_ns INTEGER NOT NULL,
	time_enabled INTEGER NOT NULL DEFAULT 0,
	time_running INTEGER NOT NULL DEFAULT 0,
	n_values INTEGER NOT NULL DEFAULT 0,
	values_blob BLOB,
	PRIMARY KEY (run_id, region_id, grp, rep)
) WITHOUT ROWID;

-- Derived metrics of one execution of a region on a platform: the latest of any source.
CREATE TABLE metrics (
	model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	region_id INTEGER NOT NULL,
	platform_id INTEGER NOT NULL REFERENCES platforms(id),
	run_id INTEGER REFERENCES profile_runs(id) ON DELETE SET NULL,
	evidence TEXT NOT NULL CHECK (evidence IN ('counters', 'estimate', 'imported')),
	t_host REAL NOT NULL CHECK (t_host > 0),
	t_host_spread REAL NOT NULL DEFAULT 0,
	n_rd REAL,
	c_store REAL,
	c_be1 REAL,
	c_be2 REAL,
	c_be3 REAL,
	bw_read_estimate REAL,
	scaled INTEGER NOT NULL DEFAULT 0,      -- a count was scaled (time_running < time_enabled)
	source TEXT NOT NULL DEFAULT '',
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (model_id, platform_id, region_id),
	FOREIGN KEY (model_id, region_id) REFERENCES regions(model_id, region_id) ON DELETE CASCADE
) WITHOUT ROWID;

-- Placement answers, keyed by the model, the platform and every parameter that shaped them.
-- Any change of the model's metrics deletes them (same transaction), so a stored answer is
-- always the one a recomputation would give.
CREATE TABLE decisions (
	model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	platform_id INTEGER NOT NULL REFERENCES platforms(id),
	params_key TEXT NOT NULL,
	reply BLOB NOT NULL,                    -- a packed pim.PlacementReply
	created_at INTEGER NOT NULL,
	PRIMARY KEY (model_id, platform_id, params_key)
) WITHOUT ROWID;
