"""The loaded form of a deck: what the loader produces and the runtime consumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ._compute import DeckDefinition
    from ._errors import Problem
    from ._loader.paths import ProjectRoot
    from ._schema import Schema

DeckRole = Literal["root", "action", "scenario", "grader"]
StartMode = Literal["assistant", "user"]

REASONING_EFFORTS = ("none", "low", "medium", "high", "xhigh")
REASONING_SUMMARIES = ("concise", "detailed", "auto")
SUPPORTED_MODEL_PARAMS = (
    "temperature",
    "top_p",
    "frequency_penalty",
    "presence_penalty",
    "max_tokens",
    "reasoning",
)


@dataclass
class ModelParams:
    """`[modelParams]`: the model (an ordered fallback list) and provider parameters."""

    models: list[str] = field(default_factory=list)
    temperature: float | None = None
    top_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    max_tokens: int | None = None
    reasoning: dict[str, str] | None = None
    additional_params: dict[str, Any] = field(default_factory=dict)
    # The model's context window and when to compact (docs/decks.md, "Context window and
    # compaction"): the runtime's, never sent to the provider.
    context_window: int | None = None
    compact_ratio: float | None = None
    compact: bool | None = None

    def provider_params(self) -> dict[str, Any]:
        """Parameters for the provider: `additionalParams` first, supported keys win."""
        params: dict[str, Any] = dict(self.additional_params)
        for key in SUPPORTED_MODEL_PARAMS:
            value = getattr(self, key)
            if value is not None:
                params[key] = value
        return params

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.models:
            data["model"] = self.models[0] if len(self.models) == 1 else list(self.models)
        for key in SUPPORTED_MODEL_PARAMS:
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.additional_params:
            data["additionalParams"] = self.additional_params
        for key, value in (
            ("contextWindow", self.context_window),
            ("compactRatio", self.compact_ratio),
            ("compact", self.compact),
        ):
            if value is not None:
                data[key] = value
        return data


@dataclass
class Guardrails:
    """`[guardrails]`; `None` means "inherit from the caller, else the default"."""

    max_depth: int | None = None
    max_passes: int | None = None
    timeout_ms: int | None = None


@dataclass
class Permissions:
    """Normalised `[permissions]`: `True` = all, `False` = none, else a sorted list."""

    read: bool | list[str] = False
    write: bool | list[str] = False
    net: bool | list[str] = False
    env: bool | list[str] = False
    run: bool | dict[str, list[str]] = False

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "write": self.write,
            "net": self.net,
            "env": self.env,
            "run": self.run,
        }


@dataclass
class HandlerDecl:
    """One of `[handlers.onBusy|onIdle|onError]`."""

    kind: Literal["onBusy", "onIdle", "onError"]
    path: str
    label: str | None = None
    delay_ms: int | None = None
    repeat_ms: int | None = None


@dataclass
class ActionDecl:
    """One `[[actions]]` entry, with its schemas resolved (from the action deck or module)."""

    name: str
    description: str
    path: str | None = None  # absolute path of the action deck's PROMPT.md
    execute: str | None = None  # absolute path of a Python compute module
    context_schema: Schema | None = None
    response_schema: Schema | None = None
    permissions: Permissions | None = None
    label: str | None = None
    id: str | None = None
    declared_in: str = ""

    @property
    def target(self) -> str:
        return self.path or self.execute or ""


@dataclass
class DeckRef:
    """A `[[scenarios]]` or `[[graders]]` entry."""

    path: str
    label: str | None = None
    description: str | None = None
    id: str | None = None
    permissions: Permissions | None = None


@dataclass
class ToolDecl:
    """A `[[tools]]` entry: an external tool dispatched through the caller's `on_tool`."""

    name: str
    description: str | None = None
    input_schema: Schema | None = None
    label: str | None = None
    id: str | None = None
    shadowed: bool = False


@dataclass
class Deck:
    """A loaded deck: a Markdown `PROMPT.md` (prompt-driven) or a Python compute deck."""

    path: str
    kind: Literal["markdown", "compute"] = "markdown"
    label: str | None = None
    start_mode: StartMode | None = None
    context_schema: Schema | None = None
    response_schema: Schema | None = None
    respond: bool = False
    allow_end: bool = False
    model_params: ModelParams = field(default_factory=ModelParams)
    guardrails: Guardrails = field(default_factory=Guardrails)
    permissions: Permissions | None = None
    handlers: dict[str, HandlerDecl] = field(default_factory=dict)
    actions: list[ActionDecl] = field(default_factory=list)
    scenarios: list[DeckRef] = field(default_factory=list)
    graders: list[DeckRef] = field(default_factory=list)
    tools: list[ToolDecl] = field(default_factory=list)
    body: str = ""
    embeds: list[str] = field(default_factory=list)
    definition: DeckDefinition | None = None
    passthrough: dict[str, Any] = field(default_factory=dict)
    warnings: list[Problem] = field(default_factory=list)
    # `[[responseItemExtensions]]`: namespaced item type -> the schema of its `data`
    item_extensions: dict[str, Schema] = field(default_factory=dict)

    @property
    def system_prompt(self) -> str:
        return self.body.strip()

    @property
    def effective_tools(self) -> list[ToolDecl]:
        """`[[tools]]` that the model may call: those not shadowed by an action."""
        return [tool for tool in self.tools if not tool.shadowed]

    def action(self, name: str) -> ActionDecl | None:
        for action in self.actions:
            if action.name == name:
                return action
        return None


@dataclass
class DeckTreeEntry:
    """One deck of a loaded tree, for listings: its path, its role in the tree, its label."""

    path: str
    role: DeckRole
    label: str | None


@dataclass
class DeckTree:
    """A root deck and every deck it reaches (actions, scenarios, graders, handlers)."""

    root: Deck
    decks: dict[str, Deck]
    entries: list[DeckTreeEntry]
    warnings: list[Problem]
    # The project root its files were checked against (decks loaded while it runs, by a
    # compute deck's spawn_and_wait, are checked against it too); None: not loaded by path.
    project_root: ProjectRoot | None = None
