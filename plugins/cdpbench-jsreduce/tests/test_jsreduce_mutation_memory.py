"""Tests that close survivors of the mutation check (mutation/README.md): the per-respondent memory
the sequential knowledge revises from (its last entries, their release times, and the run of
consecutive weeks that decides how many steps of BK_seq apply), by hand."""

import numpy as np

from cdpbench_jsreduce.sequential_knowledge import RespondentMemory


def memory() -> RespondentMemory:
    mem = RespondentMemory(4, dtype=np.int64)  # depth 4: k ^ depth != depth - k
    mem.push(np.array([7, 3]), np.array([1, 2]), t=1)
    mem.push(np.array([7, 3]), np.array([4, 5]), t=2)
    mem.push(np.array([7]), np.array([6]), t=3)
    mem.push(np.array([3]), np.array([0]), t=5)
    return mem


def test_last_entries_and_their_times_oldest_first():
    mem = memory()
    slots = mem.lookup(np.array([7, 3]))
    assert mem.stored(slots).tolist() == [3, 3]
    assert mem.last(slots, 2).tolist() == [[4, 6], [5, 0]]
    assert mem.last_times(slots, 2).tolist() == [[2, 3], [2, 5]]
    assert mem.last_times(slots, 3).tolist() == [[1, 2, 3], [1, 2, 5]]
    assert mem.last_times(slots, 1).tolist() == [[3], [5]]
    assert mem.last_times(slots, 4).tolist() == [[0, 1, 2, 3], [0, 1, 2, 5]]  # one slot never filled


def test_runs_give_the_gap_and_the_consecutive_weeks_and_zero_for_unseen():
    mem = memory()
    slots = mem.lookup(np.array([7, 3, 42]))
    assert slots[2] == -1
    gap, run = mem.runs(slots, 6)
    assert gap.tolist() == [3, 1, 0]  # 42 never pushed: (0, 0)
    assert run.tolist() == [3, 1, 0]  # 7: weeks 1, 2, 3; 3: week 5 after a gap
    gap, run = mem.runs(slots, 4)
    assert gap.tolist() == [1, -1, 0]
