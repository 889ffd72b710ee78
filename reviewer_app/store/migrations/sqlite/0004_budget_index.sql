-- The budget guard counts an installation's live jobs of the last day; refused (cancelled) rows must not slow it.
CREATE INDEX jobs_live_by_installation ON jobs (installation_id, created_at) WHERE state NOT IN ('superseded', 'cancelled');
