-- 0009-cancelled-runs.sql: a cancelled profile run has a state of its own, 'cancelled', instead
-- of 'failed' with a message that says so (pimctl profile --cancel; removing or replacing a
-- model cancels its jobs).  SQLite cannot change a CHECK constraint in place: the table is
-- made again and its rows copied (the procedure of SQLite's ALTER TABLE documentation, with
-- foreign keys off while the migration runs and checked before it commits), then the runs
-- cancelled before this migration get the new state.

CREATE TABLE profile_runs_new (
	id INTEGER PRIMARY KEY,
	model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	platform_id INTEGER NOT NULL REFERENCES platforms(id),
	owner_uid INTEGER NOT NULL,
	backend TEXT NOT NULL CHECK (backend IN ('counters', 'timing', 'imported', 'pending')),
	state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
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

INSERT INTO profile_runs_new (id, model_id, platform_id, owner_uid, backend, state, message,
	backend_reason, worker_uid, samples, repetitions_done, repetitions_total, warmup,
	repetitions, regions_total, regions_done, created_at, finished_at)
SELECT id, model_id, platform_id, owner_uid, backend,
	CASE WHEN state = 'failed' AND message LIKE 'cancelled: %' THEN 'cancelled' ELSE state END,
	message, backend_reason, worker_uid, samples, repetitions_done, repetitions_total, warmup,
	repetitions, regions_total, regions_done, created_at, finished_at
FROM profile_runs;

DROP TABLE profile_runs;
ALTER TABLE profile_runs_new RENAME TO profile_runs;
CREATE INDEX profile_runs_by_model ON profile_runs(model_id);
CREATE TRIGGER profile_runs_high AFTER INSERT ON profile_runs
BEGIN
	UPDATE run_id_high SET id = max(id, NEW.id);
END;
