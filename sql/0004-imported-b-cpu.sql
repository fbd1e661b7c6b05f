-- 0004-imported-b-cpu.sql: the host read bandwidth B_cpu of the host that measured imported
-- counts (pimctl import-perf --b-cpu).  θ for those regions is derived from it rather than from
-- this host's B_cpu (doc/design.md §3, θ = 0.12·B_cpu).  NULL: not given; this host's is used, with a
-- warning in every answer that rests on it.

ALTER TABLE metrics ADD COLUMN source_b_cpu REAL CHECK (source_b_cpu IS NULL OR source_b_cpu > 0);
