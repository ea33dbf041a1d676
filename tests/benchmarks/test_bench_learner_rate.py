"""The learner-rate benchmark's update timing and its page (the real-time part runs the DDS finetune path,
tested in tests/learn/residual/test_finetune_dds.py)."""

from __future__ import annotations


def test_update_timing_and_page(tmp_path, benchmark_module):
    bench_learner_rate = benchmark_module("bench_learner_rate")
    ms = bench_learner_rate.update_ms(1, updates=3, state_dim=57, action_dim=12, warmup=1)
    assert 0 < ms < 5000
    page = tmp_path / "page.md"
    realtime = [{"threads": 1, "transitions": 499, "episodes": 1, "updates": 900.0, "utd_achieved": 1.8,
                 "missed_deadlines": 0, "ended_by": {"time_limit": 1}, "wall_s": 20.0}]
    bench_learner_rate.write_markdown(page, ["--threads", "1", "2"], {1: ms, 2: ms / 2}, 100.0, realtime, 10.0)
    text = page.read_text()
    assert "| 2 | " in text and "| 0.50 |" in text  # 2 threads at half the time: ratio 0.50 to the 1-thread baseline
    assert "| 1 | 499 | 900 | 1.80 | 0 |" in text and "100 updates/s" in text
