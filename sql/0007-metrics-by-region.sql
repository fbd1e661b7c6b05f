-- 0007-metrics-by-region.sql: the foreign keys of metrics need indexes of their own.  Deleting
-- a region deletes its metrics (ON DELETE CASCADE on (model_id, region_id)); the primary key
-- leads with (model_id, platform_id), so without this index every deleted region scanned all of
-- its model's metrics: a model of 50,000 measured regions took minutes to replace or remove,
-- holding the write lock from every other client.  Deleting a profile run sets its metrics'
-- run_id to NULL, which scanned the whole table per run.

CREATE INDEX metrics_by_region ON metrics(model_id, region_id);
CREATE INDEX metrics_by_run ON metrics(run_id);
