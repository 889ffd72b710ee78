"""reviewer-app: a GitHub App that reviews pull requests with Claude. The version is pyproject.toml's, read from the
installed package's metadata: it is said in one place."""

from importlib import metadata

try:
    __version__ = metadata.version("reviewer-app")
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "unknown"
