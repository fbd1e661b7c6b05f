-- 0005-model-version.sql: a model's version changes with everything a placement answer rests
-- on (its manifest and its metrics).  Answers are stored under a key that names the version they
-- were computed from, so an answer computed on one connection from an older version and stored
-- after a change made on another is never served for the newer version.  The counter never goes
-- down (model ids are reused after a removal; versions are not).

CREATE TABLE model_version_high (n INTEGER NOT NULL);
INSERT INTO model_version_high VALUES (0);

ALTER TABLE models ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER models_version AFTER INSERT ON models
BEGIN
	UPDATE model_version_high SET n = n + 1;
	UPDATE models SET version = (SELECT n FROM model_version_high) WHERE id = NEW.id;
END;

-- INSERT OR REPLACE of a region's metrics runs the insert trigger; metrics are deleted only
-- with their region or model.
CREATE TRIGGER metrics_version AFTER INSERT ON metrics
BEGIN
	UPDATE model_version_high SET n = n + 1;
	UPDATE models SET version = (SELECT n FROM model_version_high) WHERE id = NEW.model_id;
END;
