"""Op signatures and the mapping of call arguments onto an op's input object.

The interpreter only needs an op's *parameter names* to build (and hash) its input, never its
implementation, which is why a replay host can run from signatures alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

from flux.errors import FluxError

__all__ = ["OpSpec", "OpCatalog", "OpArgError", "map_args_to_input"]


class OpArgError(FluxError):
    """Call arguments cannot be mapped onto the op's declared parameters."""


@dataclass(frozen=True)
class OpSpec:
    name: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    effect: str = "read"
    description: str = ""

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(self.required) + tuple(self.optional)


class OpCatalog:
    """Op name → :class:`OpSpec`. A *permissive* catalog knows every name, with no params."""

    def __init__(self, specs: Iterable[OpSpec] = (), permissive: bool = False):
        self._specs: dict[str, OpSpec] = {s.name: s for s in specs}
        self.is_permissive = permissive

    @classmethod
    def permissive(cls, specs: Iterable[OpSpec] = ()) -> "OpCatalog":
        """For replay hosts without signatures: any op exists; one object arg is the input."""
        return cls(specs, permissive=True)

    def add(self, spec: OpSpec) -> None:
        self._specs[spec.name] = spec

    def get(self, name: str) -> Optional[OpSpec]:
        spec = self._specs.get(name)
        if spec is None and self.is_permissive:
            return OpSpec(name)
        return spec

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._specs or self.is_permissive)

    def __iter__(self) -> Iterator[OpSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)


def map_args_to_input(spec: OpSpec, values: list[Any]) -> Any:
    """Evaluated argument values → the op's input (what gets hashed), as flux maps them before hashing."""
    if len(values) == 1 and isinstance(values[0], dict):
        return values[0]
    if not values:
        return {}
    params = spec.params
    if len(values) == 1:
        if not params:
            return values[0]
        key = spec.required[0] if len(spec.required) == 1 else params[0]
        return {key: values[0]}
    if len(values) > len(params):
        raise OpArgError(
            f"op `{spec.name}` takes {len(params)} positional argument(s), got {len(values)}; "
            "pass one object instead")
    return {p: v for p, v in zip(params, values)}
