-- 0001-initial.sql: platforms and models (the manifest: allocations, regions, operands).
-- Later migrations add profile runs, samples, metrics, decisions and JIT-Q plans.

CREATE TABLE platforms (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	cpu_model TEXT NOT NULL DEFAULT '',
	pmu TEXT NOT NULL DEFAULT '',
	kernel TEXT NOT NULL DEFAULT '',
	b_cpu REAL,                         -- host read bandwidth, bytes/s (doc/design.md §3)
	created_at INTEGER NOT NULL
);

CREATE TABLE models (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	source TEXT NOT NULL DEFAULT '',
	owner_uid INTEGER NOT NULL,
	loaded_at INTEGER NOT NULL,
	n_regions INTEGER NOT NULL CHECK (n_regions > 0),
	n_allocations INTEGER NOT NULL CHECK (n_allocations > 0),
	allocation_bytes INTEGER NOT NULL CHECK (allocation_bytes > 0)
);

CREATE TABLE allocations (
	model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	alloc_id INTEGER NOT NULL,
	bytes INTEGER NOT NULL CHECK (bytes > 0),
	kind INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 3),   -- argument, alloc, global
	name TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (model_id, alloc_id)
) WITHOUT ROWID;

CREATE TABLE regions (
	model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	region_id INTEGER NOT NULL,
	name TEXT NOT NULL,
	op TEXT NOT NULL,
	ord INTEGER NOT NULL,               -- program order
	n_par INTEGER NOT NULL CHECK (n_par > 0),
	n_total INTEGER NOT NULL CHECK (n_total >= n_par),
	trip INTEGER NOT NULL CHECK (trip > 0),
	parallel_extents TEXT NOT NULL DEFAULT '',    -- comma-separated
	reduction_extents TEXT NOT NULL DEFAULT '',
	location TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (model_id, region_id),
	UNIQUE (model_id, ord)
) WITHOUT ROWID;

CREATE TABLE operands (
	model_id INTEGER NOT NULL,
	region_id INTEGER NOT NULL,
	idx INTEGER NOT NULL,
	alloc_id INTEGER NOT NULL,
	bytes INTEGER NOT NULL CHECK (bytes > 0),
	elem_type TEXT NOT NULL DEFAULT '',
	elem_bits INTEGER NOT NULL DEFAULT 0,
	role INTEGER NOT NULL CHECK (role BETWEEN 1 AND 3),   -- in, out, inout
	PRIMARY KEY (model_id, region_id, idx),
	FOREIGN KEY (model_id, region_id) REFERENCES regions(model_id, region_id) ON DELETE CASCADE,
	FOREIGN KEY (model_id, alloc_id) REFERENCES allocations(model_id, alloc_id) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE INDEX operands_by_alloc ON operands(model_id, alloc_id);
