"""Model cards for shipped policies: what a person needs before running a policy on a robot.

Everything on the card is read from the ONNX file's own contract (robot, spec hash, joints, observation
layout, provenance) and from the sim2sim gate's ``gate.json``; only the training command and wall time,
which the file cannot know, are passed in.
"""

from __future__ import annotations

import json
from pathlib import Path

from robot_rl.policy.contract import IMPORTED_NOTE
from robot_rl.policy.onnx_policy import read_contract


def write_model_card(
    policy: str,
    training_command: str,
    training_minutes: float | None = None,
    gate_json: str | None = None,
    out: str | None = None,
    notes: tuple[str, ...] = (),
) -> int:
    """Write MODEL_CARD.md next to a policy from its contract and its sim2sim gate result."""
    path = Path(policy)
    c = read_contract(path)
    p = c.provenance
    lines = [
        f"# {path.parent.name}: {p.task} policy for {c.robot}",
        "",
        "| | |",
        "|---|---|",
        f"| file | `{path.name}` ({path.stat().st_size:,} bytes) |",
        f"| robot / spec hash | `{c.robot}` / `{c.spec_hash}` |",
        f"| task | `{p.task}` |",
        f"| training command | `{training_command}` |",
        f"| training wall time | {training_minutes:.1f} min on this project's 2-core CPU machine |"
        if training_minutes is not None else "| training wall time | not known (trained elsewhere) |",
        f"| seed | {p.seed} |",
        f"| iterations / env steps | {p.iterations} / {p.env_steps:,} |" if p.env_steps else
        f"| iterations | {p.iterations} |",
        f"| commit | `{p.git_commit}` |",
        f"| exported | {p.created_utc} |",
        f"| policy period | {c.policy_period_s * 1000:g} ms |",
        f"| observation | {c.obs_dim} values, {c.observation.history_layout} history: "
        + ", ".join(f"{t.name}[{t.size}×{t.history_length}]" for t in c.observation.terms)
        + (f"; gait clock period {c.observation.gait_period_s:g} s, from the first tick"
           if c.observation.gait_period_s is not None else "") + " |",
        f"| action | {c.num_actions} joint position targets: "
        f"default pose + {c.action.scale:g} · clip(a, ±{c.action.clip:g}) |",
        "| commands | " + ", ".join(f"{n} ∈ [{lo:g}, {hi:g}]" for n, (lo, hi) in
                                   zip(c.commands.names, c.commands.ranges, strict=True)) + " |",
        f"| normalizer | {'baked into the graph' if c.normalizer_baked_in else 'none'} |",
    ]
    imported = p.notes.get(IMPORTED_NOTE)
    if isinstance(imported, dict):  # a policy trained elsewhere (robot-rl import-policy): what it came from
        lines += ["", "## Imported", "", f"- trainer: {imported.get('trainer')} ({imported.get('architecture')})"]
        lines += [f"- {role}: `{s['file']}` sha256 `{s['sha256']}`" for role, s in imported.get("sources", {}).items()]
        lines.append("- policy joint order: " + ", ".join(imported.get("policy_joint_order", [])))
        lines += [f"- allowed ({kind}): " + "; ".join(items) for kind, items in imported.get("allowed", {}).items()]
        if imported.get("held_joints"):
            lines.append("- held at the default pose: " + ", ".join(imported["held_joints"]))
    if p.metrics:
        lines += ["", "## Training metrics", ""]
        lines += [f"- {k}: {v:.4g}" for k, v in sorted(p.metrics.items())]
    if gate_json:
        gate = json.loads(Path(gate_json).read_text())
        lines += ["", f"## sim2sim gate: **{'PASS' if gate['passed'] else 'FAIL'}**", "",
                  f"Command: `{gate['command']}`; report: `{Path(gate_json).with_name('report.md').name}`", ""]
        sims = list(gate["simulators"])
        lines += ["| check | limit | " + " | ".join(sims) + " |", "|---|---|" + "---|" * len(sims)]
        first = max((gate["simulators"][sim]["checks"] for sim in sims), key=len)
        for i, check in enumerate(first):
            values = []
            for sim in sims:
                checks = gate["simulators"][sim]["checks"]
                if i >= len(checks):  # the simulator's run failed: no checks, an error (listed below)
                    values.append("—")
                    continue
                ch = checks[i]
                values.append(f"{ch['value']:.3g}{'' if ch['passed'] else ' ✗'}")
            lines.append(f"| {check['name']} | ≤ {check['limit']:g} {check['unit']} | " + " | ".join(values) + " |")
        lines += [f"\n{sim}: run failed: {gate['simulators'][sim]['error']}" for sim in sims
                  if gate["simulators"][sim].get("error")]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    target = Path(out) if out else path.with_name("MODEL_CARD.md")
    target.write_text("\n".join(lines) + "\n")
    print(f"wrote {target}")
    return 0
