"""The policy contract: everything a runtime must agree on with the model it runs.

Written into the ONNX file at export (``robot_rl.contract`` in the model's metadata) and checked at load
against what the runtime builds from the robot spec and the task definition. A model whose contract
disagrees refuses to load, and the error names every differing field with both values, e.g.
``joint_names[3]: model has 'FL_hip_joint', spec has 'FR_lower_joint'``.

The comparison (every differing field, floats within a tolerance) is in ``contract_check.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from robot_rl.core.errors import RobotRLError
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm, with_more_frames
from robot_rl.typed_yaml import ConfigError, build, to_plain

if TYPE_CHECKING:  # the task module pulls in the simulator side; the deploy runtime need not import it
    from robot_rl.tasks.task import TaskCfg

SCHEMA_VERSION = 1
METADATA_KEY = "robot_rl.contract"  # key of the contract JSON in the ONNX model's metadata_props
GRAPH_DIGEST_KEY = "robot_rl.graph_sha256"  # SHA-256 of the serialized graph (weights included), for integrity
OBS_INPUT_NAME = "obs"
ACTION_OUTPUT_NAME = "actions"
BATCH_DIM = "batch"  # the exported batch dimension is dynamic (sim2sim evaluates many envs at once)


class ContractError(RobotRLError, ValueError):
    """A contract is malformed (unparsable JSON, missing or ill-typed fields, unknown schema)."""


class ContractMismatch(ContractError):
    """A model's contract disagrees with what the runtime expects. ``mismatches`` lists every difference."""

    def __init__(self, mismatches: list[Mismatch]):
        self.mismatches = mismatches
        shown = [f"  {m}" for m in mismatches[:20]]
        if len(mismatches) > 20:
            shown.append(f"  ... and {len(mismatches) - 20} more")
        noun = "difference" if len(mismatches) == 1 else "differences"
        super().__init__(f"policy contract does not match ({len(mismatches)} {noun}):\n" + "\n".join(shown))


@dataclass(frozen=True)
class Mismatch:
    field: str  # e.g. "joint_names[3]"
    found: Any  # the model's value
    expected: Any  # the runtime's value
    source: str  # where the runtime's value comes from: "spec", "task", "runtime"
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.field}: model has {_fmt(self.found)}, {self.source} has {_fmt(self.expected)}"
        return f"{text} ({self.hint})" if self.hint else text


def _fmt(value: Any) -> str:
    if isinstance(value, tuple | list) and len(value) > 8:
        return "[" + ", ".join(_fmt(v) for v in value[:8]) + f", ... ({len(value)} items)]"
    if isinstance(value, tuple):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return repr(value)


@dataclass(frozen=True)
class TensorContract:
    name: str
    shape: tuple[int | str, ...]  # a string is a symbolic (dynamic) dimension
    dtype: Literal["float32"] = "float32"


@dataclass(frozen=True)
class ObsTermContract:
    name: str
    size: int  # width of one frame
    scale: float
    clip: float | None
    history_length: int


@dataclass(frozen=True)
class ObservationContract:
    terms: tuple[ObsTermContract, ...]
    history_layout: Literal["term_major"]
    dim: int  # total width: sum of size · history_length
    # The gait clock's period where a ``gait_phase`` term observes it: the runtime counts the clock from the
    # policy's first tick (every arm / re-arm), as training counted it from each episode's start. Omitted from
    # the JSON when None, so clock-less contracts read as they always have.
    gait_period_s: float | None = None


@dataclass(frozen=True)
class ActionContract:
    """q_target = offset + scale · clip(action, −clip, clip); the offset is the spec's default pose."""

    type: Literal["joint_position"]
    scale: float
    clip: float
    offset: tuple[float, ...]


@dataclass(frozen=True)
class ChunkContract:
    """An action-chunking policy (ACT, Zhao et al. 2023): the graph maps one observation to the next
    ``length`` actions ``a_t … a_{t+length−1}``, output shape (batch, length, num_actions).

    How the controller turns chunks into one action per tick (``consume``):

    - ``"temporal_ensemble"``: a new chunk every tick; the action for tick t is the weighted mean of every
      prediction made for t by the last ``length`` chunks, ``w_i = exp(−ensemble_m · i)`` with i = 0 the
      oldest prediction (ACT's exponential weighting: m > 0 favours older predictions, m = 0 is a plain
      mean, m < 0 favours newer ones). The average smooths the chunk-to-chunk jumps a one-shot prediction
      makes.
    - ``"first_action"``: a new chunk every tick, its first action executed (receding horizon).

    A contract without a chunk (``PolicyContract.chunk`` None, every file exported before it existed) is a
    policy with one action out, shape (batch, num_actions).
    """

    length: int
    consume: Literal["temporal_ensemble", "first_action"] = "temporal_ensemble"
    ensemble_m: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.length, bool) or not isinstance(self.length, int) or self.length < 1:
            raise ContractError(f"chunk.length must be an integer ≥ 1, got {self.length!r}")
        if not math.isfinite(self.ensemble_m):
            raise ContractError(f"chunk.ensemble_m must be finite, got {self.ensemble_m!r}")


@dataclass(frozen=True)
class RecurrentState:
    """One recurrent state tensor: fed as graph input ``input_name``, returned as graph output ``output_name``
    (the next tick's value), shape (batch, size). Zero at the start of every episode."""

    input_name: str
    output_name: str
    size: int


@dataclass(frozen=True)
class RecurrentContract:
    """A policy with memory (an LSTM's hidden and cell state, a gait clock): the state is explicit graph
    inputs and outputs, so the runtime carries it between ticks and resets it (zeros) when the policy starts
    driving (every arm / re-arm). A contract without one (``PolicyContract.recurrent`` None) is memoryless."""

    states: tuple[RecurrentState, ...]


@dataclass(frozen=True)
class CommandContract:
    names: tuple[str, ...]
    ranges: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Provenance:
    """Where a model came from. Recorded, never checked."""

    task: str = ""
    seed: int | None = None
    iterations: int | None = None
    env_steps: int | None = None
    git_commit: str = ""
    created_utc: str = ""  # ISO 8601
    metrics: dict[str, float] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)  # free-form, JSON-serializable


@dataclass(frozen=True)
class PolicyContract:
    """What a model assumes about the robot and the runtime. Built by ``expected_from`` on both sides:
    at export (written into the model) and at load (what this runtime will feed and decode)."""

    schema_version: int
    robot: str
    spec_hash: str
    joint_names: tuple[str, ...]
    default_positions: tuple[float, ...]
    kp: tuple[float, ...]
    kd: tuple[float, ...]
    action: ActionContract
    observation: ObservationContract
    commands: CommandContract
    policy_period_s: float
    # True when the training observation normalizer is inside the graph. Either way the model takes RAW
    # observations: our exporter never produces a model that needs normalizing outside it.
    normalizer_baked_in: bool
    input: TensorContract
    output: TensorContract
    provenance: Provenance = field(default_factory=Provenance)
    # Action chunking (see ChunkContract); None: one action per observation. The runtime does not expect a
    # chunk length: it is the model's choice, and the controller adapts to it (only the output shape must
    # agree with it). Omitted from the JSON when None, so such contracts read as they always have.
    chunk: ChunkContract | None = None
    # Recurrent state carried by the runtime (see RecurrentContract); None: memoryless. Like the chunk, the
    # model's choice, not compared against the runtime; omitted from the JSON when None.
    recurrent: RecurrentContract | None = None

    @property
    def num_actions(self) -> int:
        return len(self.action.offset)

    @property
    def obs_dim(self) -> int:
        return self.observation.dim

    def with_chunk(self, chunk: ChunkContract | None) -> PolicyContract:
        """This contract for a model that predicts ``chunk`` (None: one action); the output shape follows."""
        return dataclasses.replace(self, chunk=chunk, output=dataclasses.replace(
            self.output, shape=output_shape(self.num_actions, chunk)))

    def with_more_history(self, extra: int) -> PolicyContract:
        """This contract with every observation term ``extra`` frames longer: what a base + residual file that
        looks ``extra`` ticks back takes (:func:`~robot_rl.tasks.observations.with_more_frames`)."""
        terms = with_more_frames(self.observation.terms, extra)
        dim = sum(t.size * t.history_length for t in terms)
        return dataclasses.replace(self, observation=dataclasses.replace(self.observation, terms=terms, dim=dim),
                                   input=dataclasses.replace(self.input, shape=(self.input.shape[0], dim)))

    @classmethod
    def expected_from(
        cls,
        spec: RobotSpec,
        layout: ObservationLayout,
        commands: CommandSpec,
        action: JointPositionAction,
        normalizer_baked_in: bool = True,
        provenance: Provenance | None = None,
    ) -> PolicyContract:
        """The contract a runtime built from these pieces expects (and an exporter writes)."""
        # The policy sees and drives the spec's policy joints (all joints unless the spec lists a subset, as
        # the G1's legs); the runtime holds the others at their default pose.
        idx = spec.policy_joint_indices
        num_joints = len(idx)
        num_actions = num_joints  # one position target per policy joint
        sizes = layout.term_sizes(num_joints, commands.size, num_actions)
        obs_dim = layout.size(num_joints, commands.size, num_actions)
        defaults = tuple(float(v) for v in spec.default_positions[idx])
        return cls(
            schema_version=SCHEMA_VERSION,
            robot=spec.name,
            spec_hash=spec.spec_hash,
            joint_names=tuple(spec.policy_joint_names),
            default_positions=defaults,
            kp=tuple(float(v) for v in spec.kp[idx]),
            kd=tuple(float(v) for v in spec.kd[idx]),
            action=ActionContract("joint_position", float(action.scale), float(action.clip), defaults),
            observation=ObservationContract(
                terms=tuple(
                    ObsTermContract(t.name, size, float(t.scale), None if t.clip is None else float(t.clip),
                                    t.history_length)
                    for t, size in zip(layout.terms, sizes, strict=True)
                ),
                history_layout=layout.history_layout,
                dim=obs_dim,
                gait_period_s=None if layout.gait_period_s is None else float(layout.gait_period_s),
            ),
            commands=CommandContract(
                tuple(commands.names), tuple((float(lo), float(hi)) for lo, hi in commands.ranges)
            ),
            policy_period_s=float(spec.timing.policy_period_s),
            normalizer_baked_in=normalizer_baked_in,
            input=TensorContract(OBS_INPUT_NAME, (BATCH_DIM, obs_dim)),
            output=TensorContract(ACTION_OUTPUT_NAME, (BATCH_DIM, num_actions)),
            provenance=provenance if provenance is not None else Provenance(),
        )

    def to_json(self) -> str:
        """Stable JSON: keys in field order, provenance dicts sorted, floats as exact repr."""
        plain = to_plain(self)
        if plain["chunk"] is None:
            del plain["chunk"]  # older readers refuse unknown keys: a chunk-less contract stays as it was
        if plain["recurrent"] is None:
            del plain["recurrent"]
        if plain["observation"]["gait_period_s"] is None:
            del plain["observation"]["gait_period_s"]
        plain["provenance"]["metrics"] = dict(sorted(plain["provenance"]["metrics"].items()))
        plain["provenance"]["notes"] = dict(sorted(plain["provenance"]["notes"].items()))
        try:
            return json.dumps(plain, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ContractError(f"contract is not JSON-serializable (provenance metrics/notes?): {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "policy contract") -> PolicyContract:
        """Parse a contract. Refuses schemas this code does not know, naming both versions."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ContractError(f"{source}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ContractError(f"{source}: expected a JSON object, got {type(data).__name__}")
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise ContractError(f"{source}: schema_version missing or not an integer (got {version!r})")
        check_schema_version(version)
        while version < SCHEMA_VERSION:
            data = _MIGRATIONS[version](data)
            version = data["schema_version"]
        try:
            return build(cls, data, source)
        except ConfigError as exc:
            raise ContractError(str(exc)) from None


def output_shape(num_actions: int, chunk: ChunkContract | None) -> tuple[int | str, ...]:
    """The graph's output shape: (batch, num_actions), or (batch, length, num_actions) for a chunk."""
    return (BATCH_DIM, num_actions) if chunk is None else (BATCH_DIM, chunk.length, num_actions)


# Older schema version → function upgrading its dict by one version. Empty: version 1 is the first.
_MIGRATIONS: dict[int, Callable[[dict], dict]] = {}


def check_schema_version(version: int) -> None:
    """Refuse a schema this code cannot read: newer (upgrade robot_rl) or older without a migration."""
    if version > SCHEMA_VERSION:
        hint = "the model was exported by a newer robot_rl; upgrade robot_rl to load it"
    elif version < SCHEMA_VERSION and version not in _MIGRATIONS:
        hint = "no migration from that schema exists; re-export the policy with this robot_rl"
    else:
        return
    raise ContractMismatch([Mismatch("schema_version", version, SCHEMA_VERSION, "runtime", hint)])


RESIDUAL_NOTE = "residual"  # provenance notes of a base + residual composition (robot_rl.learn.residual.export)


def residual_history(contract: PolicyContract) -> int:
    """Ticks of observations a composed base + residual file looks at (1: this tick's, as any policy)."""
    note = contract.provenance.notes.get(RESIDUAL_NOTE)
    return int(note.get("history", 1)) if isinstance(note, dict) else 1


IMPORTED_NOTE = "imported"  # provenance notes of a policy trained elsewhere (robot_rl.policy.importers)


def layout_for_policy(layout: ObservationLayout, contract: PolicyContract) -> ObservationLayout:
    """The task's observation ``layout`` as the file ``contract`` takes it: a residual composed with H ticks
    of history takes every term with H − 1 more past frames (its contract says so, and is checked in full).
    A policy imported from another trainer takes its own terms, scales and history (its contract's): the task
    then only supplies the commands and the gate's scenario; every robot fact is still checked."""
    if IMPORTED_NOTE in contract.provenance.notes:
        return ObservationLayout(tuple(ObsTerm(t.name, t.scale, t.clip, 0.0, t.history_length)
                                       for t in contract.observation.terms), contract.observation.history_layout,
                                 contract.observation.gait_period_s)
    return layout.with_more_history(residual_history(contract) - 1)


def action_for_policy(action: JointPositionAction, contract: PolicyContract) -> JointPositionAction:
    """The task's action decoding as the file takes it: an imported policy's own scale and clip."""
    if IMPORTED_NOTE in contract.provenance.notes:
        return JointPositionAction(contract.action.scale, contract.action.clip)
    return action


def expected_for_task(found: PolicyContract, spec: RobotSpec, task: TaskCfg) -> PolicyContract:
    """What a file whose own contract is ``found`` must match to run on ``task`` and ``spec``: the task's commands and
    every robot fact, with the observation and action decoding as the file takes them (:func:`layout_for_policy`,
    :func:`action_for_policy`). Deploy, the gate and fine-tuning load a policy against this one contract."""
    return PolicyContract.expected_from(spec, layout_for_policy(task.actor_obs, found), task.commands,
                                        action_for_policy(task.action, found))


def contract_for_task(
    task: TaskCfg, spec: RobotSpec | None = None, provenance: Provenance | None = None,
    chunk: ChunkContract | None = None,
) -> PolicyContract:
    """The contract of a policy trained on ``task`` (its actor observations, commands and action), predicting
    ``chunk`` (None: one action per observation).

    ``spec`` defaults to the task's robot; a spec of another robot is refused. The provenance's task name
    defaults to the task's.
    """
    spec = spec if spec is not None else load_robot(task.robot)
    if spec.name != task.robot:
        raise ValueError(f"task {task.name!r} is for robot {task.robot!r}, got the spec of {spec.name!r}")
    provenance = provenance if provenance is not None else Provenance()
    if not provenance.task:
        provenance = dataclasses.replace(provenance, task=task.name)
    contract = PolicyContract.expected_from(spec, task.actor_obs, task.commands, task.action, provenance=provenance)
    return contract.with_chunk(chunk) if chunk is not None else contract
