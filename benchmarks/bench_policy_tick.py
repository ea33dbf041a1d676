"""Policy tick compute: observation build + ONNX inference + decode + the real safety chain, against a bare
onnxruntime ``run`` of the same model in the same process.

The model is an A1-sized MLP (the a1-flat task's actor observation, 45 wide, → 512 → 256 → 128 → 12, ELU,
random weights: compute does not depend on training), exported by ``robot_rl.policy.export`` and loaded
through ``load_policy`` (one intra-op thread, sequential, CPU). States are a smooth synthetic trot-like
joint trajectory around the default pose with an upright, slightly rocking base, so the safety chain runs
its full path (no fault, which would short-circuit it to a damping command).

Variants, measured in alternating blocks (order rotated every round) so slow drifts of this shared machine
hit every variant alike; garbage collection frozen and disabled while timing:

- ``ort_run``        bare ``session.run([out], {in: obs})`` on a fixed observation (the baseline)
- ``ort_iobinding``  ``run_with_iobinding`` with pre-bound input/output buffers (what ``act`` uses)
- ``policy_act``     ``OnnxPolicy.act`` on its bound input buffer, as the controller calls it (no copy)
- ``observation``    ``ObservationBuilder.compute`` alone (N = 1, the task's actor layout), for the breakdown
- ``decode``         the controller's action decoding alone (raw action → joint targets), for the breakdown
- ``safety_chain``   ``SafetyChain.step`` alone on a fixed in-range command with the controller's gain arrays
                     (as the runtime passes them), for the breakdown
- ``chain_finite``   the chain's quiet-tick finite check alone (``QuietTickCheck.all_finite``), for the breakdown
- ``chain_quiet``    the chain's quiet-tick bound and torque check alone (``QuietTickCheck.quiet``), for the breakdown
- ``chain_filters``  ``chain_step`` without the quiet-tick check: every filter, as the chain ran before issue 26
                     (the same-run baseline of ``safety_chain``)
- ``controller``     ``PolicyController.step(state)``: state → observation → act → decode → JointCommand
- ``tick``           ``controller`` + ``SafetyChain.step`` (the whole per-tick compute of the runtime's
                     ``DeployRuntime.step`` while running: the operator command is set when it changes, not per tick)

Both inference baselines run the session ``load_policy`` opens (``make_session``: CPU provider, one intra-op and
one inter-op thread, sequential execution, every graph optimization): ``ort_run`` through the plain
``session.run`` with the output name fixed and a feed dict (what a careful user would write; it allocates its
output), ``ort_iobinding`` and ``OnnxPolicy.act`` through an I/O binding to preallocated buffers. The controller
binds its observation builder's output as the policy's input buffer, so ``act`` in the tick copies nothing.

Robots: ``--robots a1 g1``. The A1 runs its a1-flat task's actor observation (45 wide). The G1 (29 joints,
hardware/robots/g1.yaml) drives its 12 leg joints (spec ``policy_joints``) and holds the other 17 at their default
pose; it has no velocity task with random-weight export here, so it runs the a1-flat terms, commands and action
on its 12 legs (45 → … → 12) while the observation gather, the target scatter and the safety chain cover all 29
joints, as ``DeployRuntime`` builds them.

Allocation per tick (after the timed part, ``tick`` only): tracemalloc traces every Python and numpy allocation;
"retained" is the growth of traced memory over 2,000 and over 8,000 steady-state ticks (each after 2,000 traced ones,
which fill the interpreter's caches once); per tick is the slope between the two (goal 0: nothing accumulates);
"transient" is the largest peak over one tick above the memory before it (objects made and freed within the
tick: Python floats, tuples, the NamedTuples of the chain's state). onnxruntime's own C++ allocations are not
traced.

Back-to-back calls of one thing keep its code and data hot in the caches; in ``controller`` inference
follows the observation build and runs slower than in ``ort_run`` (see the p50 breakdown in the results). That
is the honest figure, and a real 50 Hz loop, idle between ticks, will be colder still.

    .venv/bin/python benchmarks/bench_policy_tick.py --ticks 20000 \\
        --markdown-out benchmarks/results/RESULTS_policy_tick.md
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import tyro

from robot_rl.control.controller import PolicyController
from robot_rl.core.loop_timing import realtime_context
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.policy.contract import PolicyContract
from robot_rl.policy.export import export_onnx
from robot_rl.policy.onnx_policy import load_policy
from robot_rl.robots.spec import load_robot
from robot_rl.safety import ActionClip, FilterState, SafetyChain, chain_step
from robot_rl.tasks.observations import ObservationBuilder, ObsInputs
from robot_rl.tasks.registry import make_task

VARIANTS = ("ort_run", "ort_iobinding", "policy_act", "observation", "decode", "safety_chain", "chain_finite",
            "chain_quiet", "chain_filters", "controller", "tick")


@dataclass(frozen=True)
class Args:
    ticks: int = 20_000  # timed calls per variant
    block: int = 1_000  # calls per alternating block
    repeats: int = 3  # whole measurement repeated; medians over repeats are reported
    hidden: tuple[int, ...] = (512, 256, 128)
    task: str = "a1-flat"  # the observation terms, commands and action (the G1 takes them at its width)
    robots: tuple[str, ...] = ("a1", "g1")
    fifo_priority: int | None = None  # run the timed part under SCHED_FIFO, as a deployed loop would
    markdown_out: Path | None = None


def _mlp(obs_dim: int, hidden: tuple[int, ...], num_actions: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    width = obs_dim
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ELU()]
        width = h
    layers.append(torch.nn.Linear(width, num_actions))
    return torch.nn.Sequential(*layers)


def _trajectory(spec, n: int, period: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """q, dq, base quat (wxyz), gyro for n ticks: joints swing ±0.15 rad at 2 Hz, base rocks ±0.05 rad."""
    t = np.arange(n)[:, None] * period
    phase = np.linspace(0.0, np.pi, spec.num_joints)[None, :]
    w = 2 * np.pi * 2.0
    q = spec.default_positions + 0.15 * np.sin(w * t + phase)
    dq = 0.15 * w * np.cos(w * t + phase)
    roll = 0.05 * np.sin(2 * np.pi * 1.0 * t[:, 0])
    quat = np.stack([np.cos(roll / 2), np.sin(roll / 2), np.zeros(n), np.zeros(n)], axis=1)
    gyro = np.stack([0.05 * 2 * np.pi * np.cos(2 * np.pi * t[:, 0]), np.zeros(n), np.zeros(n)], axis=1)
    return q, dq, quat, gyro


def _percentiles(samples_ns: np.ndarray) -> dict[str, float]:
    us = samples_ns / 1e3
    return {"p50": float(np.percentile(us, 50)), "p99": float(np.percentile(us, 99)),
            "p99.9": float(np.percentile(us, 99.9)), "max": float(us.max())}


def _retained_bytes(tick: Callable[[], None], next_state: Callable[[], None], ticks: int) -> tuple[int, int]:
    """(traced bytes retained over ``ticks`` ticks, the largest transient peak of one tick above its start)."""
    tracemalloc.start()
    try:
        for _ in range(2000):  # a first traced window: caches the interpreter fills once are not "per tick"
            next_state()
            tick()
        start, _ = tracemalloc.get_traced_memory()
        transient = 0
        for _ in range(ticks):
            next_state()
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            tick()
            transient = max(transient, tracemalloc.get_traced_memory()[1] - before)
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return end - start, transient


def _allocation_per_tick(tick: Callable[[], None], next_state: Callable[[], None]) -> dict:
    """Retained bytes over 2,000 and over 8,000 steady-state ticks; per tick = the slope between them (a few
    hundred bytes of interpreter and onnxruntime-wrapper caches come and go independently of the tick count)."""
    short, transient_a = _retained_bytes(tick, next_state, 2000)
    long, transient_b = _retained_bytes(tick, next_state, 8000)
    return {"retained_2000": short, "retained_8000": long, "retained_per_tick": max(0.0, (long - short) / 6000),
            "transient_max": max(transient_a, transient_b)}


def run(args: Args, robot: str) -> tuple[dict[str, dict[str, float]], list[dict[str, dict[str, float]]], dict]:
    task = make_task(args.task)
    spec = load_robot(robot)
    layout = task.actor_obs
    contract = PolicyContract.expected_from(spec, layout, task.commands, task.action)
    tmp = Path(tempfile.mkdtemp(prefix="bench_policy_tick_"))
    path = tmp / "policy.onnx"
    export_onnx(_mlp(contract.obs_dim, args.hidden, contract.num_actions), None, contract, path)
    policy = load_policy(path, contract)
    controller = PolicyController(spec, layout, task.commands, task.action, policy)
    a = contract.action
    offset = np.array(spec.default_positions, dtype=np.float64)  # every joint's target space, as DeployRuntime
    offset[spec.policy_joint_indices] = a.offset
    chain = SafetyChain.from_spec(spec, ActionClip(a.clip, a.scale, offset))

    period = spec.timing.policy_period_s
    total = args.ticks * len(VARIANTS) * args.repeats + 1
    q, dq, quat, gyro = _trajectory(spec, min(total, 5000), period)
    state = RobotState(0.0, 0, q[0].copy(), dq[0].copy(), np.zeros(spec.num_joints), quat[0].copy(), gyro[0].copy())
    command = np.array([0.5, 0.0, 0.2])
    tick_no = [0]

    def next_state() -> None:  # untimed: the interface's read() would produce this
        i = tick_no[0] % len(q)
        tick_no[0] += 1
        state.tick = tick_no[0]
        state.timestamp = tick_no[0] * period
        state.q[:] = q[i]
        state.dq[:] = dq[i]
        state.base_quat[:] = quat[i]
        state.base_ang_vel[:] = gyro[i]

    session = policy.session
    in_name, out_names = contract.input.name, [contract.output.name]
    controller.step(state, command)
    obs = controller.last_obs.copy()  # a realistic observation for the bare-inference variants
    feed = {in_name: obs}
    out_buf = np.zeros((1, contract.num_actions), dtype=np.float32)
    binding = session.io_binding()
    binding.bind_input(in_name, "cpu", 0, np.float32, list(obs.shape), obs.ctypes.data)
    binding.bind_output(out_names[0], "cpu", 0, np.float32, list(out_buf.shape), out_buf.ctypes.data)

    def ort_run() -> None:
        session.run(out_names, feed)

    def ort_iobinding() -> None:
        session.run_with_iobinding(binding)

    def policy_act() -> None:
        policy.act(controller.last_obs)  # the builder's output, bound as the policy's input

    legs = spec.policy_joint_indices
    builder = ObservationBuilder(layout, 1, contract.num_actions, task.commands.size, contract.num_actions)
    inputs = ObsInputs(q=state.q[None, legs], dq=state.dq[None, legs], default_q=spec.default_positions[legs],
                       base_quat=state.base_quat[None, :], base_ang_vel=state.base_ang_vel[None, :],
                       command=command[None, :], last_action=np.zeros((1, contract.num_actions)))
    if hasattr(builder, "bind"):  # as the controller's builder is (code before bind(): unbound)
        builder.bind(inputs)
    controller.set_command(command)  # once: the runtime sets it when the operator's command changes
    gains = controller.step(state)  # the controller's read-only gain arrays, as the runtime passes them
    fixed_command = JointCommand(spec.default_positions.copy(), gains.dq_target, gains.kp, gains.kd, gains.tau_ff)
    filters_state = [FilterState()]
    quiet = chain._quiet  # the chain's own quiet-tick check, timed alone for the breakdown
    reference = spec.default_positions.copy()
    new_reference = np.zeros(spec.num_joints)
    decoded = np.zeros(contract.num_actions)
    default_q = spec.default_positions[legs]

    def observation() -> None:
        builder.compute(inputs)

    decoder = getattr(controller, "_decoder", None)  # the controller's ActionDecoder (None: code before it)

    def decode() -> None:
        if decoder is not None:
            decoder.decode_into(controller.last_raw_action, decoded)
        else:
            controller.action.decode_into(controller.last_raw_action, default_q, decoded)

    def chain_finite() -> None:
        quiet.all_finite(state, fixed_command, controller.last_raw_action)

    def chain_quiet() -> None:
        quiet.quiet(reference, state, fixed_command, new_reference)

    def safety_chain() -> None:
        chain.step(state, fixed_command, state.timestamp, action=controller.last_raw_action)

    def chain_filters() -> None:
        filters_state[0] = chain_step(chain.limits, filters_state[0], state, fixed_command, state.timestamp,
                                      action=controller.last_raw_action)[1]

    def controller_step() -> None:
        controller.step(state)

    def tick() -> None:
        cmd = controller.step(state)
        chain.step(state, cmd, state.timestamp, action=controller.last_raw_action)

    calls: dict[str, Callable[[], None]] = {
        "ort_run": ort_run, "ort_iobinding": ort_iobinding, "policy_act": policy_act, "observation": observation,
        "decode": decode, "safety_chain": safety_chain, "chain_finite": chain_finite, "chain_quiet": chain_quiet,
        "chain_filters": chain_filters, "controller": controller_step, "tick": tick,
    }
    for name in VARIANTS:  # warm-up
        for _ in range(200):
            next_state()
            calls[name]()
    controller.reset()
    chain.reset()
    filters_state[0] = FilterState()

    per_repeat = []
    clock = time.perf_counter_ns
    load_before = os.getloadavg()[0]
    with realtime_context(fifo_priority=args.fifo_priority) as realtime:
        for rep in range(args.repeats):
            samples = {name: np.empty(args.ticks, dtype=np.int64) for name in VARIANTS}
            filled = dict.fromkeys(VARIANTS, 0)
            order = list(VARIANTS)
            while filled[VARIANTS[0]] < args.ticks:
                for name in order:
                    call, buf, start = calls[name], samples[name], filled[name]
                    for k in range(start, min(start + args.block, args.ticks)):
                        next_state()
                        t0 = clock()
                        call()
                        buf[k] = clock() - t0
                    filled[name] = min(start + args.block, args.ticks)
                order = order[1:] + order[:1]
            per_repeat.append({name: _percentiles(samples[name]) for name in VARIANTS})
            print(f"repeat {rep + 1}/{args.repeats}: " + ", ".join(
                f"{n} p50 {per_repeat[-1][n]['p50']:.1f} p99 {per_repeat[-1][n]['p99']:.1f}" for n in VARIANTS))
    medians = {name: {k: float(np.median([r[name][k] for r in per_repeat])) for k in ("p50", "p99", "p99.9", "max")}
               for name in VARIANTS}
    allocation = _allocation_per_tick(tick, next_state)
    info = {"robot": robot, "allocation": allocation, "obs_dim": contract.obs_dim,
            "num_actions": contract.num_actions, "faulted": chain.faulted,
            "safety": chain.report.summary(), "model_bytes": path.stat().st_size,
            "load": (load_before, os.getloadavg()[0]), "scheduling": realtime.fifo_detail if realtime.fifo_requested
            else "normal priority (SCHED_OTHER)"}
    path.unlink()
    tmp.rmdir()
    return medians, per_repeat, info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


GOALS = (  # (what, value from the medians, goal, unit); the goals (26)
    ("tick p50 / ort_run p50", lambda m: m["tick"]["p50"] / m["ort_run"]["p50"], 2.0, "×"),
    ("safety chain p50", lambda m: m["safety_chain"]["p50"], 10.0, " µs"),
    ("observation p50", lambda m: m["observation"]["p50"], 10.0, " µs"),
    ("tick p99", lambda m: m["tick"]["p99"], 150.0, " µs"),
)


def _header(args: Args, info: dict) -> list[str]:
    robots = " ".join(args.robots)
    return [
        "# Policy tick compute",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_policy_tick.py --ticks {args.ticks} --repeats {args.repeats} "
        f"--robots {robots}" + (f" --fifo-priority {args.fifo_priority}`" if args.fifo_priority is not None else "`"),
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs ({_cpu_model()}), Python {platform.python_version()}, "
        f"{platform.platform()}. Shared with other processes while measured: 1-min load average "
        f"{info['load'][0]:.1f} before, {info['load'][1]:.1f} after, on {os.cpu_count()} cores, so p99 and above "
        "include preemption by them, and single-core speed drifts up to 2×: compare rows of one table only. "
        f"Scheduling: {info['scheduling']}.",
        "",
    ]


def _stages(medians) -> list[str]:
    """Where the tick's p50 goes, stage by stage (each timed alone; the remainders by difference)."""
    p50 = {name: m["p50"] for name, m in medians.items()}
    chain_rest = p50["safety_chain"] - p50["chain_finite"] - p50["chain_quiet"]
    controller_rest = p50["controller"] - p50["observation"] - p50["policy_act"] - p50["decode"]
    interleaving = p50["tick"] - p50["controller"] - p50["safety_chain"]
    rows = [
        ("observation build", p50["observation"]),
        ("inference (`act`)", p50["policy_act"]),
        ("decode (raw action → targets)", p50["decode"]),
        ("controller's copies and Python (`controller` − the three above)", controller_rest),
        ("chain: finite check", p50["chain_finite"]),
        ("chain: quiet-tick bound and torque check", p50["chain_quiet"]),
        ("chain: tilt, stale, overrun, counters, Python (`safety_chain` − the two above)", chain_rest),
        ("running them interleaved (`tick` − `controller` − `safety_chain`)", interleaving),
    ]
    budget = 2.0 * p50["ort_run"]
    lines = [f"Where the tick's p50 goes (µs; each stage timed alone, remainders by difference; the ratio goal allows "
             f"2 × ort_run = {budget:.1f} µs, the tick is {p50['tick'] - budget:+.1f} µs from it):", "",
             "| stage | p50 | share of tick |", "|---|---|---|"]
    lines += [f"| {what} | {v:.1f} | {v / p50['tick']:.0%} |" for what, v in rows]
    lines.append(f"| **tick** | **{p50['tick']:.1f}** | 100% |")
    return lines


def _markdown(args: Args, medians, per_repeat, info) -> str:
    base = medians["ort_run"]
    alloc = info["allocation"]
    lines = [
        f"## {info['robot']}: MLP {info['obs_dim']} → {' → '.join(map(str, args.hidden))} → {info['num_actions']}",
        "",
        f"Task terms of {args.task}, exported ONNX opset 18 ({info['model_bytes']} bytes), onnxruntime CPU, 1 thread. "
        f"{args.ticks} timed calls per variant per repeat, alternating blocks of {args.block}, gc frozen + disabled. "
        f"Medians over {args.repeats} repeats, µs:",
        "",
        "| variant | p50 | p99 | p99.9 | max | p50 / ort_run | p99 / ort_run |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in VARIANTS:
        m = medians[name]
        lines.append(f"| {name} | {m['p50']:.1f} | {m['p99']:.1f} | {m['p99.9']:.1f} | {m['max']:.0f} | "
                     f"{m['p50'] / base['p50']:.2f} | {m['p99'] / base['p99']:.2f} |")
    lines += ["", *_stages(medians), "", "| goal (issue 26) | measured | goal | |", "|---|---|---|---|"]
    for what, value, goal, unit in GOALS:
        v = value(medians)
        lines.append(f"| {what} | {v:.2f}{unit} | ≤ {goal:g}{unit} | {'met' if v <= goal else 'NOT met'} |")
    lines += [
        f"| allocation per tick, retained (over 2,000 ticks: {alloc['retained_2000']} B, over 8,000: "
        f"{alloc['retained_8000']} B) | {alloc['retained_per_tick']:.3f} B | 0 B | "
        f"{'met' if alloc['retained_per_tick'] < 0.01 else 'NOT met'} |",
        f"| allocation per tick, transient peak (Python objects made and freed in the tick) | "
        f"{alloc['transient_max']} B | (reported) | |",
        "",
        f"Safety chain faulted during the run: {info['faulted']}; interventions: {info['safety']['interventions']}.",
        "",
        "Per repeat (p50 / p99, µs):",
        "",
        "| repeat | " + " | ".join(VARIANTS) + " |",
        "|---|" + "---|" * len(VARIANTS),
    ]
    for i, rep in enumerate(per_repeat):
        cells = " | ".join(f"{rep[n]['p50']:.1f} / {rep[n]['p99']:.1f}" for n in VARIANTS)
        lines.append(f"| {i + 1} | {cells} |")
    return "\n".join(lines) + "\n"


def main(args: Args) -> None:
    sections, infos = [], []
    for robot in args.robots:
        medians, per_repeat, info = run(args, robot)
        infos.append(info)
        sections.append(_markdown(args, medians, per_repeat, info))
        base = medians["ort_run"]
        print(f"{robot}: tick / bare onnxruntime run: p50 ×{medians['tick']['p50'] / base['p50']:.2f}, "
              f"p99 ×{medians['tick']['p99'] / base['p99']:.2f}; chain p50 {medians['safety_chain']['p50']:.1f} µs, "
              f"observation p50 {medians['observation']['p50']:.1f} µs; allocation {info['allocation']}")
    load = (infos[0]["load"][0], infos[-1]["load"][1])
    text = "\n".join(_header(args, {**infos[0], "load": load})) + "\n" + "\n".join(sections)
    print(text)
    if args.markdown_out is not None:
        args.markdown_out.write_text(text)


if __name__ == "__main__":
    main(tyro.cli(Args))
