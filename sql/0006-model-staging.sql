-- 0006-model-staging.sql: a model of many regions is written in several transactions, so that
-- other writers wait for one part at a time, not for the whole model.  Its row in models is
-- staged until the last, small transaction names it: a staged row has a name no model can have
-- (' staging ' and its id) and is never listed, counted or found.  A model being removed is
-- staged first (a small transaction) and its rows deleted part by part.  Rows a crash left
-- staged are deleted when pimd starts.

ALTER TABLE models ADD COLUMN staging INTEGER NOT NULL DEFAULT 0 CHECK (staging IN (0, 1));
