-- 0012-operands-in-regions.sql: a region's operands are a column of its row, not rows of their
-- own.  They are always written, read and deleted with their region, never looked up apart:
-- as rows, loading a model of 30 regions and 60 operands wrote 93 rows, and the operands' 60
-- were most of the writer's work for that change (every other change waits for the writer).
--
-- regions.operands: the region's operands in order, ';' between two, each
--   "ALLOC BYTES ROLE ELEM_BITS N:ELEM_TYPE"
-- (decimal numbers; ROLE 1 in, 2 out, 3 inout; N the length of ELEM_TYPE in bytes, which may
-- hold any character); '' for none.  store_model.c writes and reads it (operands_text,
-- operand_next) and refuses a text that does not parse as a damaged database.

ALTER TABLE regions ADD COLUMN operands TEXT NOT NULL DEFAULT '';

-- the operands' primary key (model_id, region_id, idx) orders the subquery's rows by idx, as
-- its ORDER BY asks, and an aggregate over an ordered subquery takes them in that order
UPDATE regions SET operands = coalesce((
	SELECT group_concat(o.alloc_id || ' ' || o.bytes || ' ' || o.role || ' ' || o.elem_bits || ' ' ||
			    length(CAST(o.elem_type AS BLOB)) || ':' || o.elem_type, ';')
	FROM (SELECT alloc_id, bytes, role, elem_bits, elem_type FROM operands
	      WHERE model_id = regions.model_id AND region_id = regions.region_id ORDER BY idx) AS o), '');

DROP TABLE operands;
