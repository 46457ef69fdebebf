"""Reading manifests (files, directories, stdin) into model objects."""

from svcdoctor.manifests.loader import (
    DEFAULT_MAX_FILE_MB,
    STDIN,
    LoadResult,
    RawObject,
    json_objects,
    load,
)
from svcdoctor.manifests.objects import build_inventory

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "STDIN",
    "LoadResult",
    "RawObject",
    "build_inventory",
    "json_objects",
    "load",
]
