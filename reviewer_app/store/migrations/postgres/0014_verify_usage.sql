-- The verification pass's tokens, metered apart from the review's (a cheaper model, another kind of spend): its model
-- and token counts per attempt. A batched verification is a batch_requests row whose part_key starts with 'verify-'.
ALTER TABLE attempts ADD COLUMN verify_model TEXT;
ALTER TABLE attempts ADD COLUMN verify_input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN verify_output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN verify_cache_creation_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN verify_cache_read_tokens BIGINT NOT NULL DEFAULT 0;
