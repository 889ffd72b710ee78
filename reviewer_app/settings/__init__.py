"""Every setting of reviewer-app: the table (table.py), read once at start and validated (config.py)."""
