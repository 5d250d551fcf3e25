"""User-facing errors: one line that names the field and the fix, never a traceback."""


class CoocflowError(Exception):
    """Base class of every error coocflow reports to a user as a single line."""


class ConfigError(CoocflowError):
    """A configuration value (file, `--set`, or flag) is missing, mistyped or out of range."""


class RunFolderError(CoocflowError):
    """A run folder is missing, incomplete, corrupted or from an unknown format version."""


class Interrupted(CoocflowError):
    """Ctrl-C or SIGTERM stopped a run; its folder keeps a checkpoint to resume from."""

    exit_code = 130
