"""Typed model options: each model family declares its `--opt` keys as one pydantic model.

`ModelOptions.extra` holds the raw `--opt key=value` values (strings, or JSON-decoded numbers and
booleans). `parse_options` turns them into the family's model, or raises `ModelSpecError` naming
the spec, the key and the allowed keys:

    embed-logreg: unknown option 'bogus'; allowed: C, backend
    tfidf-embed: option char: 'ture' is not a boolean (expected true/false)

Keys may spell `_` as `-` (`base-url`, `ft-epochs`). A None value means "the default".
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from classify.core.errors import ClassifyError


class ModelSpecError(ClassifyError, ValueError):
    """A model spec or its options are unusable; the message names the spec and the key."""


class OptionsModel(BaseModel):
    """Base of every family's options: unknown keys are refused, numbers given as text convert."""

    # coerce_numbers_to_str: `--opt prompts=2024` arrives JSON-decoded as an int and means a folder name.
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    # Word in "unknown <kind>option": "LLM " for the LLM settings, whose message users know.
    kind: ClassVar[str] = ""

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, v: Any, info: ValidationInfo) -> Any:
        # pydantic's lax mode reads true as 1: `--opt C=true` would silently mean C=1.
        if isinstance(v, bool) and info.field_name is not None:
            types = _leaf_types(cls.model_fields[info.field_name].annotation)
            if bool not in types and types & {int, float}:
                raise ValueError(f"expected a number, got {str(v).lower()}")
        return v


def _leaf_types(ann: Any) -> set[Any]:
    """The plain types inside an annotation (`Annotated[int | None, ...]` -> {int, NoneType})."""
    args = get_args(ann)
    if not args:
        return {ann}
    if get_origin(ann) is Annotated:
        return _leaf_types(args[0])
    return set().union(*(_leaf_types(a) for a in args))


class NoOptions(OptionsModel):
    """A family that takes no `--opt` keys."""


def _check_backend(v: str) -> str:
    # Imported here: encoders.encoder pulls numpy, and option models are declared at import time.
    from classify.encoders.encoder import BACKENDS

    if v not in BACKENDS:
        raise ValueError(f"unknown encoder backend {v!r}; known: {', '.join(BACKENDS)}")
    return v


# Shared option types, declared once.
Backend = Annotated[
    str, AfterValidator(_check_backend), Field(description="encoder backend: torch, onnx, onnx-int8 or model2vec")
]
InverseRegularisation = Annotated[
    float, Field(gt=0, description="inverse regularisation strength C of the logistic regression (smaller = stronger)")
]


class EncoderOptions(OptionsModel):
    backend: Backend = "torch"


def option_keys(model: type[BaseModel]) -> list[str]:
    """The keys `model` accepts, sorted."""
    return sorted(model.model_fields)


def normalize_keys(extra: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """{option name: (key as the user wrote it, value)}; `-` reads as `_`."""
    out: dict[str, tuple[str, Any]] = {}
    for key, value in (extra or {}).items():
        name = str(key).strip().replace("-", "_")
        if name in out:
            raise ModelSpecError(f"option {name} given twice ({out[name][0]!r} and {key!r})")
        out[name] = (str(key), value)
    return out


def parse_options(model: type[OptionsModel], spec: str | None, extra: dict[str, Any] | None) -> Any:
    """`extra` validated into an instance of `model`; ModelSpecError (prefixed with `spec`) if not."""
    given = normalize_keys(extra or {})
    data = {name: v for name, (_, v) in given.items() if v is not None}
    try:
        return model.model_validate(data)
    except ValidationError as e:
        prefix = f"{spec}: " if spec else ""
        first = e.errors(include_url=False)[0]
        raise ModelSpecError(prefix + explain_error(model, first, given)) from None


def explain_error(model: type[OptionsModel], err: Any, given: dict[str, tuple[str, Any]] | None = None) -> str:
    """One pydantic error as one sentence a CLI user can act on."""
    loc = [str(p) for p in err.get("loc", ())]
    name = loc[0] if loc else ""
    key = (given or {}).get(name, (name, None))[0]
    v = err.get("input")
    ctx = err.get("ctx") or {}
    kind = err["type"]
    if kind == "extra_forbidden":
        keys = option_keys(model)
        allowed = f"allowed: {', '.join(keys)}" if keys else "this model takes no options"
        return f"unknown {model.kind}option {key!r}; {allowed}"
    where = f"option {key}: " if key else ""
    if kind.startswith("bool"):
        return f"{where}{v!r} is not a boolean (expected true/false)"
    if kind in ("int_from_float", "int_parsing", "int_type"):
        return f"{where}expected a whole number, got {v!r}"
    if kind.startswith("float"):
        return f"{where}expected a number, got {v!r}"
    if kind == "literal_error":
        return f"{where}{v!r} is not one of {ctx.get('expected')}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return f"{where}must be {'at least' if kind == 'greater_than_equal' else 'more than'} {bound}, got {v!r}"
    if kind == "value_error":
        return f"{where}{ctx.get('error', err.get('msg'))}"
    return f"{where}{err.get('msg')}"


def options_table(model: type[BaseModel]) -> dict[str, dict[str, Any]]:
    """{key: {"type", "default", "description"}} for docs and `classify models --options`."""
    out: dict[str, dict[str, Any]] = {}
    for key in option_keys(model):
        f = model.model_fields[key]
        ann = f.annotation
        typ = ann.__name__ if isinstance(ann, type) else str(ann).replace("typing.", "")
        if get_origin(ann) is Literal:
            typ = " | ".join(map(str, get_args(ann)))
        out[key] = {"type": typ, "default": f.default, "description": f.description or ""}
    return out
