"""The env-throughput page keeps one section per backend: rerunning one backend's sweep replaces its own section."""

from __future__ import annotations

import pytest


def test_each_backend_rewrites_only_its_section(tmp_path, benchmark_module):
    bench = benchmark_module("bench_env_throughput")
    page = tmp_path / "RESULTS_env_throughput.md"
    bench.write_section(str(page), bench.CPU_SECTION, "cpu table v1\n")
    bench.write_section(str(page), bench.WARP_SECTION, "warp table\n")
    bench.write_section(str(page), bench.CPU_SECTION, "cpu table v2\n")
    text = page.read_text()
    assert text.startswith(bench.TITLE)
    assert "cpu table v2" in text and "cpu table v1" not in text and "warp table" in text
    assert text.index(bench.CPU_SECTION) < text.index(bench.WARP_SECTION)


def test_the_warp_sweep_runs_on_warps_cpu_device(tmp_path, benchmark_module):
    pytest.importorskip("mujoco_warp", reason="the warp backend needs the gpu extra: pip install 'robot-rl[gpu]'")
    bench = benchmark_module("bench_env_throughput")
    dec, med, ratios = bench.bench_warp(2, "cpu", 0.0, repeats=1, steps=3)
    assert dec == 4 and set(med) == {"warp env", "warp ceiling", "cpu env"} and all(v > 0 for v in med.values())
    assert len(ratios) == 1 and ratios[0] > 0
