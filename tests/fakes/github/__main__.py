"""``python -m tests.fakes.github``: serve a fake GitHub REST API on loopback (see server.main)."""

from tests.fakes.github.server import main

main()
