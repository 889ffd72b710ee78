-- A learning's status (issue 39): one proposed from a reply is 'pending' until a person with write access confirms
-- it (a 👍 on the app's acknowledgement, or `/review learn confirm ID`); only 'active' learnings are used by reviews.
-- Learnings kept before this migration were used already: they stay active. ack_comment_id is the app's comment that
-- acknowledged a pending learning (a review comment in its thread), where the confirming 👍 is read.
ALTER TABLE learnings ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('pending', 'active'));
ALTER TABLE learnings ADD COLUMN ack_comment_id BIGINT;
-- A resolved thread's learning covers its file only: one kept for a top-level file (a glob without "/", which matches
-- that name in any directory) is anchored at the repository's top, as core/globs.exact_glob binds new ones.
UPDATE learnings SET path_glob = '/' || path_glob
 WHERE source_kind = 'resolved' AND path_glob <> '' AND path_glob NOT LIKE '%/%';
