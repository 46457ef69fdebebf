"""svcdoctor: find, explain, reproduce and fix intermittent failures through Services."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("svcdoctor")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["__version__"]
