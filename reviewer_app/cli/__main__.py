"""`python -m reviewer_app.cli`: the reviewer-app command."""

import sys

from reviewer_app.cli.main import main

sys.exit(main())
