"""Foreign TorchScript policies rebuilt as plain torch modules (which torch.onnx's exporter can trace).

TorchScript archives (``torch.jit.save``) are what rl_sar and unitree_rl_gym deploy. The exporter cannot
trace a ScriptModule, and the recurrent ones keep their LSTM state in buffers that every call overwrites,
so each is rebuilt from its weights in one of the shapes these trainers produce:

- ``mlp``: [normalizer →] actor MLP (rsl_rl / Isaac Lab, legged_gym).
- ``himloco``: an estimator MLP over the observation history → (velocity, normalized latent), appended to the
  newest frame for the actor MLP (HIMLoco).
- ``lstm``: [normalizer →] one-layer LSTM → actor MLP, state as explicit inputs/outputs (rsl_rl recurrent).

The rebuilt module is compared with the archive itself on random inputs (whole sequences for a recurrent
one) before it is used, so a misread architecture is refused, never exported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_rl.policy.importers.description import PolicyImportError

ACTIVATIONS = {"ELU": "ELU", "ReLU": "ReLU", "Tanh": "Tanh", "LeakyReLU": "LeakyReLU", "Sigmoid": "Sigmoid",
               "SELU": "SELU", "Identity": "Identity", "Mish": "Mish", "SiLU": "SiLU"}
MATCH_ATOL = 1e-4  # rebuilt vs archive, on |diff| / (1 + |archive|): the same float32 ops, reassociated at most


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("importing a TorchScript policy needs torch: pip install 'robot-rl[train]'") from None
    return torch


def _mlp(script, where: str):
    torch = _torch()
    layers = []
    for name, child in script.named_children():
        kind = child.original_name
        if kind == "Linear":
            w, b = child.weight.detach().clone(), child.bias.detach().clone()
            layer = torch.nn.Linear(w.shape[1], w.shape[0])
            layer.weight.data.copy_(w)
            layer.bias.data.copy_(b)
        elif kind in ACTIVATIONS:
            cls = getattr(torch.nn, ACTIVATIONS[kind])
            if kind == "ELU":
                layer = cls(alpha=float(getattr(child, "alpha", 1.0)))
            elif kind == "LeakyReLU":
                layer = cls(negative_slope=float(getattr(child, "negative_slope", 0.01)))
            else:
                layer = cls()
        else:
            raise PolicyImportError(f"{where}: layer {name} is a {kind}; the importer rebuilds Linear layers and the "
                                    f"activations {', '.join(ACTIVATIONS)}")
        layers.append(layer)
    return torch.nn.Sequential(*layers)


def _normalizer(script, where: str):
    """rsl_rl's EmpiricalNormalization ((x − mean) / (std + eps)) or Identity; None when absent."""
    torch = _torch()
    if script is None or script.original_name == "Identity":
        return None
    buffers = dict(script.named_buffers())
    if not {"_mean", "_std"} <= buffers.keys():
        raise PolicyImportError(f"{where}: normalizer {script.original_name} has no _mean/_std buffers; the importer "
                                "knows rsl_rl's EmpiricalNormalization")
    mean, std, eps = buffers["_mean"].detach().clone(), buffers["_std"].detach().clone(), float(script.eps)

    class Normalizer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", mean)
            self.register_buffer("denominator", std + eps)

        def forward(self, x):
            return (x - self.mean) / self.denominator

    return Normalizer()


def _children(script) -> dict:
    return dict(script.named_children())


def rebuild(path: Path, obs_width: int, history: int):
    """(module, state sizes, architecture name): ``module(obs, *states) → (action, *new states)``, where ``obs``
    is the archive's own input ((batch, obs_width · history) for himloco) and each state is (batch, size)."""
    torch = _torch()
    where = str(path)
    try:
        script = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:
        raise PolicyImportError(f"{where}: not a TorchScript archive ({str(exc).splitlines()[0][:200]})") from None
    script.eval()
    parts = _children(script)
    memory_name = next((n for n in ("rnn", "memory", "memory_a") if n in parts), None)
    if "actor" not in parts:
        raise PolicyImportError(f"{where}: no 'actor' submodule (has {', '.join(parts) or 'none'}); the importer "
                                "knows rsl_rl-style actors")
    actor = _mlp(parts["actor"], f"{where}: actor")
    normalizer = _normalizer(parts.get("normalizer"), f"{where}: normalizer")

    if memory_name is not None:
        lstm_script = parts[memory_name]
        if lstm_script.original_name != "LSTM":
            raise PolicyImportError(f"{where}: recurrent module {memory_name} is a {lstm_script.original_name}; the "
                                    "importer knows one-layer LSTMs")
        weights = {k: v.detach().clone() for k, v in lstm_script.state_dict().items()}
        if any(k.endswith("_l1") for k in weights):
            raise PolicyImportError(f"{where}: {memory_name} has more than one LSTM layer; the importer knows one")
        hidden = weights["weight_hh_l0"].shape[1]
        lstm = torch.nn.LSTM(weights["weight_ih_l0"].shape[1], hidden)
        lstm.load_state_dict(weights)

        class Recurrent(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.normalizer = normalizer if normalizer is not None else torch.nn.Identity()
                self.lstm, self.actor = lstm, actor

            def forward(self, obs, h, c):
                out, (h2, c2) = self.lstm(self.normalizer(obs).unsqueeze(0), (h.unsqueeze(0), c.unsqueeze(0)))
                return self.actor(out.squeeze(0)), h2.squeeze(0), c2.squeeze(0)

        module, sizes, arch = Recurrent(), (hidden, hidden), "lstm"
    elif "estimator" in parts:
        estimator = _mlp(parts["estimator"], f"{where}: estimator")
        est_out = [m for m in estimator if isinstance(m, torch.nn.Linear)][-1].out_features
        actor_in = next(m for m in actor if isinstance(m, torch.nn.Linear)).in_features
        if actor_in != obs_width + est_out:
            raise PolicyImportError(f"{where}: the actor takes {actor_in} inputs, not one frame ({obs_width}) plus "
                                    f"the estimator's {est_out}: not a HIMLoco policy the importer knows")

        class HimLoco(torch.nn.Module):
            """Velocity (3) and a unit latent from the history; the actor sees the newest frame and both."""

            def __init__(self) -> None:
                super().__init__()
                self.estimator, self.actor = estimator, actor

            def forward(self, obs_history):
                parts = self.estimator(obs_history)
                vel, latent = parts[:, :3], torch.nn.functional.normalize(parts[:, 3:], p=2.0, dim=-1, eps=1e-12)
                return (self.actor(torch.cat([obs_history[:, :obs_width], vel, latent], dim=1)),)

        module, sizes, arch = HimLoco(), (), "himloco"
    else:
        class Plain(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.normalizer = normalizer if normalizer is not None else torch.nn.Identity()
                self.actor = actor

            def forward(self, obs):
                return (self.actor(self.normalizer(obs)),)

        module, sizes, arch = Plain(), (), "mlp"
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    _check_against_archive(path, module, sizes, obs_width * (history if arch == "himloco" else 1))
    return module, sizes, arch


def _check_against_archive(path: Path, module, sizes: tuple[int, ...], width: int, steps: int = 50) -> None:
    """The rebuilt module reproduces the archive (a fresh copy: recurrent archives update their buffers) on a
    sequence of random observations; a difference means the architecture was misread."""
    torch = _torch()
    script = torch.jit.load(str(path), map_location="cpu")
    script.eval()
    rng = np.random.default_rng(0)
    states = [torch.zeros(1, s) for s in sizes]
    worst = 0.0
    with torch.no_grad():
        for _ in range(steps if sizes else 1):
            obs = torch.from_numpy(rng.normal(0.0, 1.0, (1 if sizes else 64, width)).astype(np.float32))
            ref = script(obs)
            out, *states = module(obs, *states)
            worst = max(worst, float(((out - ref).abs() / (1.0 + ref.abs())).max()))
    if not worst <= MATCH_ATOL:
        raise PolicyImportError(f"{path}: the rebuilt network differs from the archive by {worst:.3g} (tolerance "
                                f"{MATCH_ATOL:g}): its architecture is not one the importer knows")
