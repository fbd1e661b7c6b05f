-- 0008-b-cpu-probe.sql: how the host read bandwidth B_cpu of a platform was measured, so that
-- an answer can say how far to trust the θ derived from it (doc/design.md §3): the probe's
-- method, the relative spread of its figure between rounds, when it ran, whether the machine
-- was busy meanwhile (and the load in words), and the host it ran on (online CPUs and memory):
-- pimd measures again when that differs.  A b_cpu without a method was measured by the single
-- long pass of pimd before this migration, which load could halve: pimd measures it again.

ALTER TABLE platforms ADD COLUMN b_cpu_spread REAL CHECK (b_cpu_spread IS NULL OR b_cpu_spread >= 0);
ALTER TABLE platforms ADD COLUMN b_cpu_method TEXT;
ALTER TABLE platforms ADD COLUMN b_cpu_measured_at INTEGER;
ALTER TABLE platforms ADD COLUMN b_cpu_busy INTEGER CHECK (b_cpu_busy IS NULL OR b_cpu_busy IN (0, 1));
ALTER TABLE platforms ADD COLUMN b_cpu_load TEXT;
ALTER TABLE platforms ADD COLUMN b_cpu_host TEXT;
