"""The base of the run settings that cross from a command line into the package (``ProduceConfig``,
``AgreementConfig``): frozen, no unknown keys, and a bad value is a ``ConfigError`` naming the setting, with the
command whose ``--help`` describes it."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from syntra_dspy.errors import ConfigError


class SettingsModel(BaseModel):
    """Frozen settings validated once, on construction; each field's description is its flag's help."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: What the settings are of, and the command whose flags they are (for error messages).
    what: ClassVar[str] = "a"
    command: ClassVar[str] = "syntra"

    @model_validator(mode="wrap")
    @classmethod
    def _as_config_error(cls, data: Any, handler: Any) -> Any:
        """A bad value is a ``ConfigError`` naming the setting (``field``), like every other setting's."""
        try:
            return handler(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else None
            if first["type"] == "extra_forbidden":
                raise ConfigError(f"unknown {cls.what} setting {name!r}", field=name,
                                  hint=f"known settings: {', '.join(cls.model_fields)}") from None
            raise ConfigError(f"{first['msg']}, got {first.get('input')!r}", field=name,
                              hint=f"see `{cls.command} --help`") from None

    @classmethod
    def of_call(cls, config: SettingsModel | None, settings: dict[str, Any]) -> Any:
        """The config a function was called with: ``config`` itself, or one built from the function's keyword
        settings (``export_records(store, out, num_negatives=3)``); refused when both are given."""
        if config is not None and settings:
            article = "an" if cls.__name__[:1] in "AEIOU" else "a"
            raise ConfigError(f"give either {article} {cls.__name__} or its settings as keywords, not both "
                              f"({', '.join(settings)})", field=next(iter(settings)))
        return config if config is not None else cls(**settings)
