-- Model requests sent through Anthropic's Message Batches API (half price, answered within 24 hours): one row per
-- request (a part of a job's review), named by its custom_id. The batch duty records each result here and wakes the
-- job, which reads it as the model's answer; tokens of a batched request are counted here, apart from the attempts'
-- interactive ones. `state` stays 'withdrawn' for a request whose job ended while it was batched (its tokens are
-- still counted when the batch reports them).
CREATE TABLE batch_requests (
    custom_id TEXT PRIMARY KEY,
    job_id BIGINT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    part_key TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    model TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'succeeded', 'errored', 'expired', 'canceled', 'withdrawn')),
    result TEXT,
    error TEXT,
    submitted_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cache_creation_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX batch_requests_job ON batch_requests (job_id);
CREATE INDEX batch_requests_open ON batch_requests (batch_id) WHERE ended_at IS NULL;
CREATE INDEX batch_requests_ended ON batch_requests (ended_at);
