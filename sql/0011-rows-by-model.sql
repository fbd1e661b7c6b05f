-- 0011-rows-by-model.sql: a model's operands and metrics are deleted by the model, not region by
-- region.  ON DELETE CASCADE from regions ran a trigger program for each deleted region (and
-- from allocations, for each allocation), and every deleted operand looked its parents up:
-- removing or replacing a model of 30 regions spent most of its time there, on the writer that
-- every other change waits for.
--
-- operands have no foreign key: a validated manifest's operands name its own regions and
-- allocations (common/manifest.c), they are written with them, and the store deletes them with
-- their model, first (store_model.c: model_delete, model_delete_parts; store_check_integrity
-- looks for any left without a model).  metrics still refer to their region, so that counts
-- naming a region the model lacks are refused (the fleet catalogue's), but without an action:
-- a model's metrics are deleted before its regions.

CREATE TABLE operands_new (
	model_id INTEGER NOT NULL,
	region_id INTEGER NOT NULL,
	idx INTEGER NOT NULL,
	alloc_id INTEGER NOT NULL,
	bytes INTEGER NOT NULL CHECK (bytes > 0),
	elem_type TEXT NOT NULL DEFAULT '',
	elem_bits INTEGER NOT NULL DEFAULT 0,
	role INTEGER NOT NULL CHECK (role BETWEEN 1 AND 3),   -- in, out, inout
	PRIMARY KEY (model_id, region_id, idx)
) WITHOUT ROWID;
INSERT INTO operands_new (model_id, region_id, idx, alloc_id, bytes, elem_type, elem_bits, role)
	SELECT model_id, region_id, idx, alloc_id, bytes, elem_type, elem_bits, role FROM operands;
DROP TABLE operands;
ALTER TABLE operands_new RENAME TO operands;

CREATE TABLE metrics_new (
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
	source_b_cpu REAL CHECK (source_b_cpu IS NULL OR source_b_cpu > 0),
	origin_host TEXT,
	origin_measured_at INTEGER,
	origin_backend TEXT,
	PRIMARY KEY (model_id, platform_id, region_id),
	FOREIGN KEY (model_id, region_id) REFERENCES regions(model_id, region_id)
) WITHOUT ROWID;
INSERT INTO metrics_new (model_id, region_id, platform_id, run_id, evidence, t_host, t_host_spread, n_rd,
			 c_store, c_be1, c_be2, c_be3, bw_read_estimate, scaled, source, updated_at,
			 source_b_cpu, origin_host, origin_measured_at, origin_backend)
	SELECT model_id, region_id, platform_id, run_id, evidence, t_host, t_host_spread, n_rd, c_store,
	       c_be1, c_be2, c_be3, bw_read_estimate, scaled, source, updated_at, source_b_cpu, origin_host,
	       origin_measured_at, origin_backend FROM metrics;
DROP TABLE metrics;
ALTER TABLE metrics_new RENAME TO metrics;
CREATE INDEX metrics_by_region ON metrics(model_id, region_id);
CREATE INDEX metrics_by_run ON metrics(run_id);
-- (dropped with the table: as 0010 made it)
CREATE TRIGGER metrics_version AFTER INSERT ON metrics WHEN NEW.origin_host IS NULL
BEGIN
	UPDATE model_version_high SET n = n + 1;
	UPDATE models SET version = (SELECT n FROM model_version_high) WHERE id = NEW.model_id;
END;
