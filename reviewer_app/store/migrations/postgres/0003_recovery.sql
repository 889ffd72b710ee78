-- Missed-webhook recovery: which deliveries we asked GitHub to redeliver, and leases of the periodic duties.
-- A GUID (X-GitHub-Delivery) is claimed before the request and marked requested after it: one request per GUID.
CREATE TABLE redeliveries (
    guid TEXT PRIMARY KEY,
    delivery_id BIGINT NOT NULL,
    owner TEXT NOT NULL,
    claimed_at DOUBLE PRECISION NOT NULL,
    requested_at DOUBLE PRECISION,
    error TEXT
);
CREATE INDEX redeliveries_claimed ON redeliveries (claimed_at);

-- One row per duty ("recovery", "sweep"): the host running a pass of it now, and until when at the latest.
CREATE TABLE duty_leases (
    duty TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
