# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The scheduling loop against a fake executor, a fake monitor and N fake GPUs (virtual time)."""

import pytest
from test_suite_support import FakeClock, FakeExecutor, FakeMonitor, fake_gpus, workload

from tirx_kernels.core.suite.gpus import LockPool
from tirx_kernels.core.suite.scheduler import Events, Scheduler


class Recorder(Events):
    def __init__(self):
        self.log = []

    def start(self, w, attempt, gpus, started, total):
        self.log.append(("start", w.config, attempt, tuple(g.index for g in gpus), started, total))

    def retry(self, w, attempt, delay_s):
        self.log.append(("retry", w.config, attempt.status))

    def finish(self, row, done, total):
        self.log.append(("finish", row.workload.config, row.status, done, total))


def run(workloads, n_gpus=1, tmp_path=None, interrupt_at=None, durations=None, **kw):
    clock = FakeClock(interrupt_at)
    ex = FakeExecutor(clock, durations)
    pool = LockPool(fake_gpus(n_gpus), tmp_path / "locks")
    events = Recorder()
    opts = dict(timeout_s=100.0, max_retries=2, retry_delay_s=5.0)
    opts.update(kw)
    s = Scheduler(
        ex, pool, FakeMonitor(), events=events, clock=clock, sleep=clock.sleep, poll_s=0.5, **opts
    )
    outcome = s.run(workloads)
    assert pool.free_count() == pool.total, "GPUs leaked"
    return outcome, ex, events, clock


def statuses(outcome):
    return [(r.workload.config, r.status) for r in outcome.rows]


def test_pass_and_bench_result_kept(tmp_path):
    outcome, ex, events, _ = run([workload("pass")], tmp_path=tmp_path)
    (row,) = outcome.rows
    assert row.status == "PASS" and row.result.bench["impls"]["tirx"] == 10.0
    assert [a.status for a in row.attempts] == ["PASS"]
    assert row.gpus[0].uuid == "GPU-fake-0"
    assert not outcome.not_run and not outcome.interrupted and outcome.stopped is None
    assert ("start", "pass", 0, (0,), 1, 1) in events.log


def test_interfered_then_clean_is_requeued_and_passes(tmp_path):
    outcome, ex, events, clock = run([workload("interfere1")], tmp_path=tmp_path)
    (row,) = outcome.rows
    assert row.status == "PASS"
    assert [a.status for a in row.attempts] == ["INTERFERED", "PASS"]
    assert "pid 4242" in row.attempts[0].detail
    assert ex.calls() == [("k", "interfere1", 0), ("k", "interfere1", 1)]
    assert ("retry", "interfere1", "INTERFERED") in events.log
    # the requeue waited the retry delay: two 10 s runs plus 5 s
    assert ex.started[1].start_t >= ex.started[0].start_t + 10 + 5


def test_interfered_past_the_retry_bound_fails(tmp_path):
    outcome, ex, _, _ = run(
        [workload("interfere"), workload("pass")], tmp_path=tmp_path, keep_going=True
    )
    row = outcome.rows[0]
    assert row.status == "FAIL"
    assert "interfered on all 3 attempts" in row.detail
    assert [a.status for a in row.attempts] == ["INTERFERED"] * 3
    assert [c for c in ex.calls() if c[1] == "interfere"] == [
        ("k", "interfere", 0),
        ("k", "interfere", 1),
        ("k", "interfere", 2),
    ]
    assert outcome.rows[1].status == "PASS"


def test_skip_is_accepted_without_retry(tmp_path):
    outcome, ex, _, _ = run([workload("skip"), workload("pass")], tmp_path=tmp_path)
    assert statuses(outcome) == [("skip", "SKIP"), ("pass", "PASS")]
    assert len(ex.started) == 2 and outcome.stopped is None


def test_fail_fast_stops_new_starts(tmp_path):
    ws = [
        workload("pass"),
        workload("fail"),
        workload("pass", kernel="k2"),
        workload("skip", kernel="k2"),
    ]
    outcome, ex, _, _ = run(ws, tmp_path=tmp_path)
    assert statuses(outcome) == [("pass", "PASS"), ("fail", "FAIL")]
    assert "max abs error" in outcome.rows[1].detail
    assert [c[:2] for c in ex.calls()] == [("k", "pass"), ("k", "fail")]
    assert "fail-fast after FAIL of k fail" in outcome.stopped
    assert [(w.kernel, w.config) for w, _ in outcome.not_run] == [("k2", "pass"), ("k2", "skip")]
    assert all("fail-fast" in why for _, why in outcome.not_run)


def test_keep_going_runs_everything(tmp_path):
    ws = [workload("fail"), workload("crash"), workload("pass")]
    outcome, ex, _, _ = run(ws, tmp_path=tmp_path, keep_going=True)
    assert statuses(outcome) == [("fail", "FAIL"), ("crash", "FAIL"), ("pass", "PASS")]
    assert "SIGSEGV" in outcome.rows[1].detail and outcome.rows[1].detail.startswith("error:")
    assert not outcome.not_run and outcome.stopped is None


def test_timeout_kills_the_hang(tmp_path):
    outcome, ex, _, clock = run(
        [workload("hang"), workload("pass")], tmp_path=tmp_path, timeout_s=30.0, keep_going=True
    )
    assert statuses(outcome) == [("hang", "TIMEOUT"), ("pass", "PASS")]
    assert ex.started[0].killed
    assert "no result after 30 s" in outcome.rows[0].detail
    assert 30 <= outcome.rows[0].result.seconds < 32


def test_timeout_is_a_real_failure_for_fail_fast(tmp_path):
    outcome, _, _, _ = run([workload("hang"), workload("pass")], tmp_path=tmp_path, timeout_s=30.0)
    assert statuses(outcome) == [("hang", "TIMEOUT")]
    assert len(outcome.not_run) == 1


def test_baseline_error_counts_as_failure(tmp_path):
    outcome, _, _, _ = run([workload("baseline_error"), workload("pass")], tmp_path=tmp_path)
    assert statuses(outcome) == [("baseline_error", "BASELINE_ERROR")]
    assert "reference 'flashinfer' failed: JIT failed" in outcome.rows[0].detail
    assert outcome.not_run and "BASELINE_ERROR" in outcome.stopped


def test_result_without_ours_fails(tmp_path):
    outcome, _, _, _ = run([workload("no_ours")], tmp_path=tmp_path)
    assert statuses(outcome) == [("no_ours", "FAIL")]
    assert "no implementation of ours" in outcome.rows[0].detail


def test_start_failure_is_a_fail_and_frees_the_gpu(tmp_path):
    outcome, _, _, _ = run([workload("boom"), workload("pass")], tmp_path=tmp_path, keep_going=True)
    assert statuses(outcome) == [("boom", "FAIL"), ("pass", "PASS")]
    assert "could not start: OSError: cannot exec python" in outcome.rows[0].detail


def test_ctrl_c_kills_children_and_returns_partial(tmp_path):
    ws = [workload("pass"), workload("pass", kernel="k2"), workload("pass", kernel="k3")]
    # first finishes at t=10; the interrupt comes at t=15 while the second runs
    outcome, ex, _, _ = run(ws, tmp_path=tmp_path, interrupt_at=15.0)
    assert outcome.interrupted
    assert statuses(outcome) == [("pass", "PASS")]
    assert ex.started[1].killed and not ex.started[0].killed
    assert [(w.kernel, why.split(" ")[0]) for w, why in outcome.not_run] == [
        ("k2", "interrupted"),
        ("k3", "interrupted"),
    ]


def test_no_gpu_skips_everything_without_starting(tmp_path):
    outcome, ex, _, _ = run(
        [workload("pass"), workload("fail")],
        n_gpus=0,
        tmp_path=tmp_path,
        no_gpu_reason="no GPU: no nvidia-smi",
    )
    assert statuses(outcome) == [("pass", "SKIP"), ("fail", "SKIP")]
    assert all(r.detail == "no GPU: no nvidia-smi" for r in outcome.rows)
    assert ex.started == []


@pytest.mark.parametrize("n_gpus", [2, 4])
def test_workloads_run_concurrently_on_all_gpus(tmp_path, n_gpus):
    ws = [workload("pass", kernel=f"k{i}") for i in range(8)]
    outcome, ex, _, clock = run(ws, n_gpus=n_gpus, tmp_path=tmp_path)
    assert all(r.status == "PASS" for r in outcome.rows) and len(outcome.rows) == 8
    assert ex.max_concurrent == n_gpus
    # 8 workloads of 10 s: 8 / n_gpus waves, not 8 serial runs
    assert clock() <= 8 / n_gpus * 10 + 2
    used = {r.gpus[0].index for r in outcome.rows}
    assert used == set(range(n_gpus))
    assert [r.workload.kernel for r in outcome.rows] == [f"k{i}" for i in range(8)]


def test_multi_gpu_claim_gets_distinct_gpus_atomically(tmp_path):
    ws = [
        workload("pass", kernel="one_a"),
        workload("pass", kernel="two", num_gpus=2),
        workload("pass", kernel="one_b"),
        workload("pass", kernel="one_c"),
    ]
    outcome, ex, events, _ = run(ws, n_gpus=2, tmp_path=tmp_path)
    two = next(r for r in outcome.rows if r.workload.kernel == "two")
    assert len({g.uuid for g in two.gpus}) == 2
    # larger claims first: the 2-GPU workload starts before every 1-GPU one
    assert [h.workload.kernel for h in ex.started][0] == "two"
    assert ex.max_concurrent == 2  # afterwards the 1-GPU ones share the 2 GPUs
    starts = [e for e in events.log if e[0] == "start"]
    assert starts[0][3] == (0, 1)


def test_larger_claim_waits_and_is_not_starved(tmp_path):
    # A requeued 2-GPU claim must get both GPUs although 1-GPU work finishing at staggered
    # times never frees both at once: the waiting claim reserves the GPUs that free up.
    ws = [workload("interfere1", kernel="two", num_gpus=2)] + [
        workload("pass", kernel=f"k{i}") for i in range(6)
    ]
    outcome, ex, _, _ = run(
        ws, n_gpus=2, tmp_path=tmp_path, retry_delay_s=1.0, durations={("k1", "pass"): 15.0}
    )
    two = outcome.rows[0]
    assert two.status == "PASS" and [a.status for a in two.attempts] == ["INTERFERED", "PASS"]
    order = [(h.workload.kernel, h.attempt) for h in ex.started]
    assert order[:4] == [("two", 0), ("k0", 0), ("k1", 0), ("two", 1)]


def test_claim_larger_than_the_machine_is_skip(tmp_path):
    ws = [workload("pass", kernel="huge", num_gpus=8), workload("pass")]
    outcome, ex, _, _ = run(ws, n_gpus=4, tmp_path=tmp_path)
    assert statuses(outcome) == [("pass", "SKIP"), ("pass", "PASS")]
    assert outcome.rows[0].detail == "needs 8 GPUs; this machine has 4"
    assert [h.workload.kernel for h in ex.started] == ["k"]


def test_gpus_held_by_another_suite_are_not_used(tmp_path):
    other = LockPool(fake_gpus(2), tmp_path / "locks")  # a second suite process
    held = other.acquire(1)
    assert held[0].index == 0
    outcome, ex, _, _ = run(
        [workload("pass", kernel=f"k{i}") for i in range(3)], n_gpus=2, tmp_path=tmp_path
    )
    assert {r.gpus[0].index for r in outcome.rows} == {1}
    assert ex.max_concurrent == 1
    other.close()


def test_an_error_in_a_hook_still_kills_the_children(tmp_path):
    class Broken(Events):
        def finish(self, row, done, total):
            raise RuntimeError("disk full")

    clock = FakeClock()
    ex = FakeExecutor(clock, durations={("k1", "pass"): 50.0})
    pool = LockPool(fake_gpus(2), tmp_path / "locks")
    s = Scheduler(
        ex,
        pool,
        FakeMonitor(),
        timeout_s=100,
        events=Broken(),
        clock=clock,
        sleep=clock.sleep,
        poll_s=0.5,
    )
    with pytest.raises(RuntimeError, match="disk full"):
        s.run([workload("pass", kernel="k0"), workload("pass", kernel="k1")])
    assert ex.started[1].killed and pool.free_count() == 2


def test_ctrl_c_while_starting_a_workload_loses_no_row(tmp_path, monkeypatch):
    ws = [workload("pass"), workload("pass", kernel="k2")]
    calls = []

    def watch(self, key, gpus):  # the GPU monitor's first query is where Ctrl-C lands
        calls.append(key)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(FakeMonitor, "watch", watch)
    outcome, ex, _, _ = run(ws, tmp_path=tmp_path)  # asserts no GPU leaked
    assert outcome.interrupted
    assert statuses(outcome) == [("pass", "PASS")]
    assert [(w.kernel, why) for w, why in outcome.not_run] == [("k2", "interrupted (Ctrl-C)")]
