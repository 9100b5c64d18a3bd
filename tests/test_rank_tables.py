"""A run's step tables across ranks (gagpo.run_folder): each rank writes its own table of an
iteration (``iter_00012_rank1.npz``), numbering its groups and trajectories from 0, and
:func:`read_step_table` joins them with each rank's ids offset past the ranks before it, so
that two ranks' rollouts never fall into one group or one trajectory; a resume
(:func:`cut_run`) keeps exactly the iterations up to the checkpoint's, every rank's."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from gagpo.agents.rollout import StepTable
from gagpo.run_folder import (
    UnreadableTable,
    cut_run,
    read_step_table,
    save_step_table,
    step_tables,
)
from gagpo.synthetic_run import synthetic_table


def _rank_tables(out: Path, it: int, sizes: list[int], seed: int = 0) -> list[dict]:
    """One synthetic table per rank (``sizes[r]`` steps, 0 for a rank whose every episode
    was lost), written as the trainer names them; returns each rank's own columns."""
    rng = random.Random(seed)
    (out / "steps").mkdir(parents=True, exist_ok=True)
    own = []
    for rank, n in enumerate(sizes):
        table, cols = synthetic_table(rng, max(n, 1), group_size=3, max_t=4, obs_chars=50)
        if n == 0:
            table, cols = (StepTable(rows=[], num_envs=0, group_size=3),
                           {k: v[:0] for k, v in cols.items()})
        save_step_table(out / "steps" / f"iter_{it:05d}_rank{rank}.npz", table, cols, True)
        own.append({"group": table.column("group", np.int64),
                    "trajectory": table.column("trajectory", np.int64),
                    "reply": [r.reply for r in table.rows], "advantage": cols["advantage"]})
    return own


def _expected_ids(own: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Each rank's ids shifted past every id of the ranks before it (their largest + 1)."""
    groups, trajs, g_off, t_off = [], [], 0, 0
    for part in own:
        groups.append(part["group"] + g_off)
        trajs.append(part["trajectory"] + t_off)
        if len(part["group"]):
            g_off += int(part["group"].max()) + 1
            t_off += int(part["trajectory"].max()) + 1
    return np.concatenate(groups), np.concatenate(trajs)


@pytest.mark.parametrize("sizes", [[30, 22, 41], [30, 22]])
def test_ranks_tables_join_without_sharing_a_group_or_a_trajectory(tmp_path, sizes):
    own = _rank_tables(tmp_path, 1, sizes)
    paths = step_tables(tmp_path)[1]
    assert [p.name for p in paths] == [f"iter_00001_rank{r}.npz" for r in range(len(sizes))]
    assert all(part["group"].min() == part["trajectory"].min() == 0 for part in own)
    for columns in (None, ["reply"]):
        t = read_step_table(paths, columns)
        group, traj = _expected_ids(own)
        np.testing.assert_array_equal(t["group"], group)
        np.testing.assert_array_equal(t["trajectory"], traj)
        assert list(t["reply"]) == [r for part in own for r in part["reply"]]
        # No group and no trajectory holds rows of two ranks.
        rank = np.repeat(np.arange(len(sizes)), [len(p["group"]) for p in own])
        for ids in (t["group"], t["trajectory"]):
            for i in np.unique(ids):
                assert len(set(rank[ids == i].tolist())) == 1, i
        # ... and each rank keeps its own grouping (a group of its is one group here).
        assert len(np.unique(t["group"])) == sum(len(np.unique(p["group"])) for p in own)
        assert len(np.unique(t["trajectory"])) == sum(len(np.unique(p["trajectory"]))
                                                      for p in own)
    np.testing.assert_array_equal(read_step_table(paths)["advantage"],
                                  np.concatenate([p["advantage"] for p in own]))


def test_a_rank_with_no_steps_moves_no_id(tmp_path):
    """A rank whose every episode was lost writes an empty table: the ranks after it go on
    from the ranks before it."""
    own = _rank_tables(tmp_path, 1, [25, 0, 19])
    t = read_step_table(step_tables(tmp_path)[1], ["reply"])
    group, traj = _expected_ids(own)
    np.testing.assert_array_equal(t["group"], group)
    np.testing.assert_array_equal(t["trajectory"], traj)
    assert t["group"][len(own[0]["group"])] == own[0]["group"].max() + 1
    assert list(t["reply"]) == own[0]["reply"] + own[2]["reply"]


def test_a_rank_with_no_steps_leaves_the_other_ranks_columns_as_they_are(tmp_path):
    """An empty step table (a rank, or a run, whose every episode was lost) keeps its flags
    bool and its texts text, so joining it leaves the other ranks' columns as they are (they
    became floats, and gagpo view's run page failed on ~well_formed)."""
    _rank_tables(tmp_path, 1, [0, 19])
    t = read_step_table(step_tables(tmp_path)[1])
    alone = read_step_table([tmp_path / "steps" / "iter_00001_rank1.npz"])
    assert {k: t[k].dtype.kind for k in alone if k != "version"} == {
        k: alone[k].dtype.kind for k in alone if k != "version"}  # bool, text, numbers


def test_a_resume_keeps_every_ranks_tables_up_to_the_checkpoint_only(tmp_path):
    """Checkpoint after iteration 10 of a 2-rank run that logged 12: iterations 1..10 stay,
    whole (both ranks), 11 and 12 go, whatever their rank; metrics likewise."""
    for it in range(1, 13):
        _rank_tables(tmp_path, it, [4, 4], seed=it)
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps({"iteration": it, "x": it}) + "\n" for it in range(1, 13)))
    assert cut_run(tmp_path, 10) == 2
    assert sorted(step_tables(tmp_path)) == list(range(1, 11))
    assert all(len(paths) == 2 for paths in step_tables(tmp_path).values())
    assert [json.loads(x)["iteration"] for x in
            (tmp_path / "metrics.jsonl").read_text().splitlines()] == list(range(1, 11))


def test_a_resume_cuts_by_the_iteration_number_past_ten_thousand_and_leaves_other_files(
        tmp_path):
    """Iteration numbers are read whole (``iter_12345``, past the names' five digits); a file
    in ``steps/`` that is not a step table of the run (a user's notes, a name with digits
    after ``iter_`` that are not a number) stays; temporary files a kill left while saving
    (``*.tmp``, beside the run's files or among its tables) go."""
    for it in (9_999, 12_344, 12_345):
        _rank_tables(tmp_path, it, [3], seed=it)
    steps = tmp_path / "steps"
    foreign = [steps / "notes99999.txt", steps / "iter_x99.npz", steps / "README"]
    for path in foreign:
        path.write_text("mine")
    torn = [tmp_path / "config.json.tmp", steps / "iter_00001_rank0.npz.tmp"]
    for path in torn:
        path.write_text("half")
    cut_run(tmp_path, 12_344)
    assert sorted(step_tables(tmp_path)) == [9_999, 12_344]
    assert all(p.exists() for p in foreign)
    assert not any(p.exists() for p in torn)


def test_a_resume_drops_a_metrics_line_torn_by_a_kill(tmp_path):
    """A last line cut short by a kill is no iteration: it goes (and counts as dropped), the
    whole lines up to the checkpoint stay."""
    lines = [json.dumps({"iteration": it}) for it in (1, 2)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + '\n{"iteration": 3, "lo')
    assert cut_run(tmp_path, 2) == 1
    assert (tmp_path / "metrics.jsonl").read_text() == "\n".join(lines) + "\n"


def test_a_table_that_is_not_a_step_table_is_refused_with_its_name(tmp_path):
    """What gagpo view and the trainer's readers are told: the file's name and why, for a
    table without a group column, a torn file, an object array (never unpickled: a run folder
    is data, not code) and no file at all."""
    own = _rank_tables(tmp_path, 1, [6])
    good = step_tables(tmp_path)[1][0]
    no_group = tmp_path / "no_group.npz"
    np.savez(no_group, trajectory=np.arange(3))
    with pytest.raises(UnreadableTable) as e:
        read_step_table([good, no_group])
    assert str(e.value) == "no_group.npz is not a step table (no group column)"
    torn = tmp_path / "torn.npz"
    torn.write_bytes(good.read_bytes()[:100])
    with pytest.raises(UnreadableTable, match=r"^torn\.npz: BadZipFile: ") as e:
        read_step_table([torn])
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, group=np.zeros(2, np.int64), trajectory=np.zeros(2, np.int64),
             reply=np.array([{"code": 1}, None], dtype=object))
    with pytest.raises(UnreadableTable, match=r"^pickled\.npz: ValueError: .*allow_pickle"):
        read_step_table([pickled])
    with pytest.raises(UnreadableTable) as e:
        read_step_table([])
    assert str(e.value) == "no step table"
    assert len(read_step_table([good])["group"]) == len(own[0]["group"])


def test_the_version_is_the_oldest_of_the_ranks_tables_and_1_without_one(tmp_path):
    """``version`` says what a table holds (1: written before replies were kept, with no
    ``version`` entry); ranks' tables of two versions read as the older."""
    _rank_tables(tmp_path, 1, [5, 4])
    paths = step_tables(tmp_path)[1]
    assert read_step_table(paths)["version"] == 2
    with np.load(paths[1]) as z:
        old = {k: z[k] for k in z.files if k != "version"}
    np.savez(paths[1], **old)  # as version 1 wrote it: no version entry
    assert read_step_table(paths)["version"] == 1
    assert read_step_table(paths[:1])["version"] == 2
    assert read_step_table(paths[1:])["version"] == 1


def test_only_the_columns_asked_for_are_read_with_the_ids(tmp_path):
    _rank_tables(tmp_path, 1, [5, 4])
    t = read_step_table(step_tables(tmp_path)[1], ["reply", "not_a_column"])
    assert set(t) == {"version", "group", "trajectory", "reply"}
