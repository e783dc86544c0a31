"""Per-family exporters for scripts/export_bundle.py.

Each module defines add_parser(subparsers), registering a subcommand whose
`run(args)` writes a bundle folder. Shared helpers live in common.py.
"""
import importlib

_NAMES = ["lumina", "emu3", "llamagen"]
FAMILIES = []
for _name in _NAMES:
    try:
        FAMILIES.append(importlib.import_module(f"sjd_export.{_name}"))
    except ModuleNotFoundError as error:  # a family whose exporter is not written yet
        if error.name != f"sjd_export.{_name}":
            raise
