"""Load an exported policy, check its contract, and run it with onnxruntime.

Every way a policy file can be wrong ends in one ``PolicyLoadError`` naming the file and one line of
cause: missing, unreadable, truncated or corrupted file (weights included: the export records a SHA-256
of the graph), no contract in its metadata, an unparsable contract, a graph that disagrees with its own
contract, or a contract that disagrees with the runtime (the error then lists every differing field with
both values and keeps the ``ContractMismatch`` in ``.mismatch``).

The session is single-threaded and sequential on the CPU: a 50–1000 Hz control loop wants one predictable
core, not a thread pool waking up per call.
"""

from __future__ import annotations

import hashlib
from functools import partial
from pathlib import Path
from typing import Protocol

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.policy.contract import (
    BATCH_DIM,
    GRAPH_DIGEST_KEY,
    METADATA_KEY,
    ContractError,
    ContractMismatch,
    PolicyContract,
    TensorContract,
)
from robot_rl.policy.contract_check import check_contract
from robot_rl.robots.spec import shipped_path

_ORT_DTYPES = {"float32": "tensor(float)"}


def resolve_policy(policy: str | Path) -> Path | None:
    """The policy file: as given, or one the repository ships (``policies/a1_flat/…``: the checkout's, or the
    installed package's copy) when run from elsewhere; None if absent. A default like
    ``policies/a1_flat/policy.onnx`` is relative to the repository, not to wherever the command runs."""
    path = Path(policy)
    if path.is_file():
        return path
    if path.is_absolute():
        return None
    shipped = shipped_path(path)
    return shipped if shipped is not None and shipped.is_file() else None


class PolicyLoadError(RobotRLError, RuntimeError):
    """A policy file cannot be used. ``path`` and ``reason`` are the parts of the message."""

    def __init__(self, path: str | Path, reason: str, mismatch: ContractMismatch | None = None):
        self.path = str(path)
        self.reason = reason
        self.mismatch = mismatch
        super().__init__(f"cannot load policy {path}: {reason}")


class Policy(Protocol):
    """What the controller runs: a contract and a raw-observation → raw-action function (raw-action chunk,
    (length, num_actions), when the contract has a ``chunk``)."""

    contract: PolicyContract

    def act(self, obs: np.ndarray) -> np.ndarray: ...


def _ort():
    try:
        import onnxruntime
    except ImportError:
        raise ImportError("running a policy needs onnxruntime: pip install 'robot-rl[deploy]'") from None
    return onnxruntime


def make_session(model: str | bytes):
    """A CPU session with one intra-op and one inter-op thread, sequential execution."""
    ort = _ort()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: a warning on stderr at every load is noise
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _one_line(exc: BaseException, path: Path) -> str:
    """onnxruntime/protobuf errors are multi-line with internal prefixes; keep the informative first line."""
    text = str(exc).strip()
    text = text.splitlines()[0] if text else type(exc).__name__
    text = text.removeprefix("[ONNXRuntimeError] : ").replace(f"Load model from {path} failed:", "")
    return text[:300]


def graph_digest(graph_bytes: bytes) -> str:
    return hashlib.sha256(graph_bytes).hexdigest()


def _read_model(path: Path):
    """(file bytes, parsed ModelProto). Read once: the session is built from the bytes that were checked."""
    if not path.exists():
        raise PolicyLoadError(path, "no such file")
    if not path.is_file():
        raise PolicyLoadError(path, "not a file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PolicyLoadError(path, f"cannot read the file ({exc.strerror})") from None
    if not data:
        raise PolicyLoadError(path, "file is empty")
    try:
        import onnx
    except ImportError:
        raise ImportError("loading a policy needs onnx: pip install 'robot-rl[deploy]'") from None
    try:
        model = onnx.load_from_string(data)
    except Exception as exc:  # protobuf DecodeError and friends
        cause = _one_line(exc, path)
        raise PolicyLoadError(path, f"not a valid ONNX model (truncated or corrupted?): {cause}") from None
    return data, model


def _read_contract(path: Path, metadata: dict[str, str]) -> PolicyContract:
    if METADATA_KEY not in metadata:
        raise PolicyLoadError(
            path,
            f"no policy contract in the model metadata (key {METADATA_KEY!r}); "
            "export it with robot_rl.policy.export",
        )
    try:
        return PolicyContract.from_json(metadata[METADATA_KEY], source="contract")
    except ContractMismatch as exc:  # a schema version this code cannot read
        raise PolicyLoadError(path, str(exc), exc) from None
    except ContractError as exc:
        raise PolicyLoadError(path, f"unreadable contract: {exc}") from None


def _check_graph_digest(path: Path, model, metadata: dict[str, str]) -> None:
    """Protobuf parses a model whose weight bytes were flipped; the digest recorded at export catches it."""
    recorded = metadata.get(GRAPH_DIGEST_KEY)
    if recorded is None:
        raise PolicyLoadError(path, f"no graph digest in the model metadata (key {GRAPH_DIGEST_KEY!r})")
    actual = graph_digest(model.graph.SerializeToString(deterministic=True))
    if actual != recorded:
        raise PolicyLoadError(
            path, f"graph digest {actual[:16]}… differs from {recorded[:16]}… recorded at export "
            "(weights or graph corrupted or edited after export)"
        )


def _open_session(path: Path, data: bytes):
    try:
        return make_session(data)
    except ImportError:
        raise
    except Exception as exc:  # onnxruntime raises several pybind types (InvalidProtobuf, Fail, ...)
        raise PolicyLoadError(path, f"onnxruntime cannot load the model: {_one_line(exc, path)}") from None


def _graph_io_matches(label: str, found, declared: TensorContract) -> list[str]:
    """Differences between one graph input/output and the contract's declaration of it."""
    problems = []
    if found.name != declared.name:
        problems.append(f"{label} name: graph has {found.name!r}, contract has {declared.name!r}")
    if found.type != _ORT_DTYPES[declared.dtype]:
        problems.append(f"{label} type: graph has {found.type}, contract has {declared.dtype}")
    graph_shape = tuple(found.shape)
    same_rank = len(graph_shape) == len(declared.shape)
    # A symbolic dimension in the contract must be symbolic in the graph; a number must be that number.
    dims_agree = same_rank and all(
        (isinstance(g, str) or g is None) if isinstance(d, str) else g == d
        for g, d in zip(graph_shape, declared.shape, strict=True)
    )
    if not dims_agree:
        problems.append(f"{label} shape: graph has {list(graph_shape)}, contract has {list(declared.shape)}")
    return problems


def _check_graph_against_own_contract(path: Path, session, contract: PolicyContract) -> None:
    inputs, outputs = session.get_inputs(), session.get_outputs()
    states = contract.recurrent.states if contract.recurrent is not None else ()
    declared_in = [contract.input] + [TensorContract(s.input_name, (BATCH_DIM, s.size)) for s in states]
    declared_out = [contract.output] + [TensorContract(s.output_name, (BATCH_DIM, s.size)) for s in states]
    if len(inputs) != len(declared_in) or len(outputs) != len(declared_out):
        extra = f" and {len(states)} recurrent states" if states else ""
        raise PolicyLoadError(
            path,
            f"graph has {len(inputs)} inputs and {len(outputs)} outputs; its contract declares "
            f"{len(declared_in)} and {len(declared_out)} ({contract.input.name!r} → {contract.output.name!r}{extra})",
        )
    problems = []
    for label, found, declared in (("input", inputs, declared_in), ("output", outputs, declared_out)):
        for f, d in zip(found, declared, strict=True):
            problems += _graph_io_matches(label, f, d)
    if problems:
        raise PolicyLoadError(path, "graph disagrees with its own contract: " + "; ".join(problems))


def _open(path: Path):
    data, model = _read_model(path)
    metadata = {p.key: p.value for p in model.metadata_props}
    contract = _read_contract(path, metadata)
    _check_graph_digest(path, model, metadata)
    session = _open_session(path, data)
    _check_graph_against_own_contract(path, session, contract)
    return session, contract


def read_contract(path: str | Path) -> PolicyContract:
    """The contract stored in a policy file, checked only against the file itself (for inspection)."""
    return _open(Path(path))[1]


def load_policy(path: str | Path, expected: PolicyContract, check_spec_hash: bool = True) -> OnnxPolicy:
    """Open a policy file and refuse it unless its contract matches ``expected`` (see ``check_contract``)."""
    path = Path(path)
    session, contract = _open(path)
    try:
        check_contract(contract, expected, check_spec_hash=check_spec_hash)
    except ContractMismatch as exc:
        raise PolicyLoadError(path, str(exc), exc) from None
    return OnnxPolicy(session, contract, path)


class OnnxPolicy:
    """A loaded, contract-checked policy. ``act`` is the per-tick call."""

    def __init__(self, session, contract: PolicyContract, path: str | Path = "<memory>"):
        self.session = session
        self.contract = contract
        self.path = str(path)
        self.obs_dim = contract.obs_dim
        self.num_actions = contract.num_actions
        self._input_name = contract.input.name
        self._output_names = [contract.output.name]
        self._obs_shape = (1, self.obs_dim)
        # Why an I/O binding (figures: benchmarks/results/RESULTS_policy_tick.md, ort_iobinding vs ort_run): an I/O
        # binding to preallocated buffers beats ``run`` with a feed dict at p50, and at p99 too (no output
        # allocation). Passing a RunOptions to ``run_with_iobinding`` costs more than the inference itself: don't.
        self._own_obs = np.zeros(self._obs_shape, dtype=np.float32)
        self._obs_buffer = self._own_obs  # the bound input: this one, or the caller's (bind_observation)
        # A chunking policy (contract.chunk) returns (1, length, num_actions): the controller ensembles them.
        self.chunk_length = contract.chunk.length if contract.chunk is not None else None
        out_shape = (1, self.num_actions) if self.chunk_length is None else (1, self.chunk_length, self.num_actions)
        self._action_buffer = np.zeros(out_shape, dtype=np.float32)
        self._action = self._action_buffer[0]  # what act() returns (one view, made once)
        self._binding = session.io_binding()
        self._bind_input(self._own_obs)
        self._binding.bind_output(self._output_names[0], "cpu", 0, np.float32, list(self._action_buffer.shape),
                                  self._action_buffer.ctypes.data)
        # Recurrent state (contract.recurrent): each state has an input buffer and an output buffer; after a
        # tick the output is copied into the input, so the next tick continues from it. ``reset`` zeros them.
        self._states: list[tuple[np.ndarray, np.ndarray]] = []
        states = contract.recurrent.states if contract.recurrent is not None else ()
        for state in states:
            buf_in = np.zeros((1, state.size), dtype=np.float32)
            buf_out = np.zeros((1, state.size), dtype=np.float32)
            self._binding.bind_input(state.input_name, "cpu", 0, np.float32, [1, state.size], buf_in.ctypes.data)
            self._binding.bind_output(state.output_name, "cpu", 0, np.float32, [1, state.size], buf_out.ctypes.data)
            self._states.append((buf_in, buf_out))
        self._state_inputs = {s.input_name: (1, s.size) for s in states}
        self._all_outputs = [self._output_names[0]] + [s.output_name for s in states]
        # onnxruntime's Python ``run_with_iobinding`` checks, on every call, that the binding is this session's and
        # whether WebGPU graph capture is on (≈ 0.4 µs a tick); this binding is this session's and the session
        # runs on the CPU, so ``act`` calls the C++ method that it wraps, where onnxruntime has one.
        run = getattr(getattr(session, "_sess", None), "run_with_iobinding", None)
        binding = getattr(self._binding, "_iobinding", None)
        self._run = (partial(run, binding, None) if run is not None and binding is not None
                     else partial(session.run_with_iobinding, self._binding))

    def _bind_input(self, buffer: np.ndarray) -> None:
        self._binding.bind_input(self._input_name, "cpu", 0, np.float32, list(self._obs_shape), buffer.ctypes.data)
        self._obs_buffer = buffer  # the reference keeps the bound memory alive

    def bind_observation(self, buffer: np.ndarray) -> None:
        """Run the network straight from ``buffer`` (float32, C-contiguous, (1, obs_dim)): ``act(buffer)`` then
        skips its check and copy. The controller binds its observation builder's output, rewritten every tick.
        ``act`` on any other array goes back to the policy's own buffer (it never writes into ``buffer``)."""
        if (not isinstance(buffer, np.ndarray) or buffer.shape != self._obs_shape or buffer.dtype != np.float32
                or not buffer.flags.c_contiguous):
            got = f"{getattr(buffer, 'dtype', type(buffer).__name__)} {np.shape(buffer)}"
            raise ValueError(f"policy {self.path}: an observation buffer must be a C-contiguous float32 array of "
                             f"shape {self._obs_shape}, got {got}")
        self._bind_input(buffer)

    def reset(self) -> None:
        """Forget the recurrent state (zeros, as at the start of a training episode); a no-op without one.
        The controller calls it whenever the policy starts driving: every arm / re-arm."""
        for buf_in, buf_out in self._states:
            buf_in.fill(0.0)
            buf_out.fill(0.0)

    @property
    def state(self) -> tuple[np.ndarray, ...]:
        """The recurrent state the next ``act`` starts from (copies); empty without one."""
        return tuple(buf_in[0].copy() for buf_in, _ in self._states)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Raw (1, obs_dim) float32 observation → raw (num_actions,) action (before scale/clip/offset); a
        chunking policy returns its chunk, (length, num_actions). A recurrent policy advances its state.

        The returned array is this policy's output buffer, overwritten by the next call: copy it to keep it.
        Not thread-safe (one buffer pair per policy).
        """
        if obs is not self._obs_buffer:  # the bound buffer itself (bind_observation) is run as it is
            if obs.shape != self._obs_shape or obs.dtype != np.float32:
                raise ValueError(
                    f"policy {self.path}: expected a float32 observation of shape {self._obs_shape}, "
                    f"got {obs.dtype} {obs.shape}"
                )
            if self._obs_buffer is not self._own_obs:  # never overwrite a caller's bound buffer
                self._bind_input(self._own_obs)
            np.copyto(self._own_obs, obs)
        self._run()
        if self._states:
            for buf_in, buf_out in self._states:
                np.copyto(buf_in, buf_out)
        return self._action

    def act_batch(self, obs: np.ndarray) -> np.ndarray:
        """(N, obs_dim) → (N, num_actions) (chunks: (N, length, num_actions)), for evaluating many envs at once
        (the batch dim is dynamic). A recurrent policy's batch starts from zero state (one step of N episodes)."""
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"policy {self.path}: expected observations of shape (N, {self.obs_dim}), got {obs.shape}")
        feed = {self._input_name: obs}
        feed.update({name: np.zeros((len(obs), shape[1]), dtype=np.float32)
                     for name, shape in self._state_inputs.items()})
        return self.session.run(self._all_outputs, feed)[0]
