"""``python -m benchmarks.prompt_share``: each history pair shown costs prompt tokens from the
second step on, none at the first; the report gives each length's share of history 2's."""

from benchmarks import prompt_share


def test_less_history_is_fewer_prompt_tokens_and_the_first_step_has_none():
    # (the tiny model's tokenizer spells pages out: a cap of 1024 would drop the history)
    steps, totals = prompt_share.prompt_tokens(2, expert=1.0, seed=1000, model="tiny",
                                               max_prompt_tokens=100_000)
    assert steps > 2  # the expert's episodes take several steps
    assert totals[2] > totals[1] > totals[0] > 0
    one_step, first = prompt_share.prompt_tokens(1, expert=1.0, seed=1000, max_steps=1,
                                                 model="tiny", max_prompt_tokens=100_000)
    assert one_step == 1 and first[2] == first[1] == first[0]


def test_the_command_records_the_table(tmp_path, capsys):
    assert prompt_share.main(["--episodes", "1", "--expert", "1", "--model", "tiny",
                              "--out", str(tmp_path)]) == 0
    text = (tmp_path / "report.txt").read_text()
    command = text.splitlines()[0]  # (``make test`` runs it under OMP_NUM_THREADS=1)
    assert command.startswith("$ ") and "python -m benchmarks.prompt_share --episodes 1" in command
    assert "| 2 |" in text and "| 100.0% |" in text and "| 0 |" in text
