"""Validation findings, each tied to the field path an operator has to fix."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One finding about one field, e.g. ``spec.deadband.growPercent: must be 0-100``."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Every error and every warning found in one pass over a config object."""

    errors: tuple[FieldError, ...]
    warnings: tuple[FieldError, ...]

    @property
    def allowed(self) -> bool:
        return not self.errors


class FieldErrors(ValueError):
    """Errors found together, each with its field path; the message joins them all."""

    def __init__(self, errors: tuple[FieldError, ...]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = errors


class ConfigError(FieldErrors):
    """A HeadroomConfig that breaks the rules; carries every error, not just the first.

    Callers must not fall back to the defaults on this error: the default namespace
    selector could enrol namespaces the operator's own selector left out.
    """


class Findings:
    """The errors and warnings of one pass over a config, in the order they are found."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.warnings: list[FieldError] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(FieldError(path, message))
