-- 0003-run-ids.sql: profile run (job) ids stay unique for the life of the database.
-- Removing or replacing a model deletes its runs (ON DELETE CASCADE), and an INTEGER PRIMARY KEY
-- alone hands the highest ids out again; the high-water mark kept here never goes down.

CREATE TABLE run_id_high (id INTEGER NOT NULL);
INSERT INTO run_id_high SELECT coalesce(max(id), 0) FROM profile_runs;

CREATE TRIGGER profile_runs_high AFTER INSERT ON profile_runs
BEGIN
	UPDATE run_id_high SET id = max(id, NEW.id);
END;
