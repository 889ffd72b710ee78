-- Who is creating the job's check run right now, and until when: one creator across hosts (see CLAIM_CHECK_RUN_CREATION).
ALTER TABLE jobs ADD COLUMN check_run_claim TEXT;
ALTER TABLE jobs ADD COLUMN check_run_claim_until REAL
