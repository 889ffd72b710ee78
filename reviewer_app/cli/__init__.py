"""The reviewer-app command and its subcommands (main.py: serve, worker, review, jobs, learnings, outcomes ...)."""
