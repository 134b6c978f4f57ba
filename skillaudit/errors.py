"""Exceptions raised by skillaudit's library code; only the commands (`skillaudit.commands`, via
`reports_errors`) turn them into messages."""

from __future__ import annotations


class SkillauditError(Exception):
    """Base class of every error skillaudit raises on purpose."""

    #: exit status the CLI uses for this error (2 = bad input, 1 = a check that failed)
    exit_code = 2


class InputError(SkillauditError):
    """A file or value given by the user cannot be used; the message names the file and line."""


class RunLogError(InputError):
    """A run log (JSON Lines) is malformed; the message starts with `file:line:`."""


class UnpairedError(RunLogError):
    """Records without their other condition were found while `--strict` was on."""


class LibraryError(InputError):
    """A skill library cannot be read at all."""


class ImportFormatError(InputError):
    """A file given to `skillaudit import` is not in the format that importer reads."""


class MissingExtraError(SkillauditError):
    """An optional dependency is not installed; the message says which extra to install."""

    exit_code = 1


class HarnessError(SkillauditError):
    """The paired-run harness cannot go on (bad endpoint, unreadable data, bad options)."""


class OutputError(SkillauditError):
    """An output location cannot be written safely (would overwrite input, not empty, ...)."""


def require(module: str, extra: str):
    """Import `module` lazily, or raise MissingExtraError naming `pip install skillaudit[extra]`."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(
            f"{module} is not installed; install it with: pip install 'skillaudit[{extra}]'"
        ) from exc
