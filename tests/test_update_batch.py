"""The update's typed batch (:class:`gagpo.policy_update.UpdateBatch`): a new batch with other
rollout log-probs keeps every other field and the row order; fields that do not line up are
refused with an error that says so, at the batch or, for log-probs that do not match their
replies, at the update."""

from __future__ import annotations

import pytest
import torch

from gagpo.agents.models import load_model
from gagpo.distributed import Compute
from gagpo.policy_update import UpdateBatch, update
from gagpo.train_config import TrainConfig

FIELDS = {"prompt": [[1, 2], [3], [4, 5, 6]], "reply": [[7], [8, 9], [10, 11, 12]],
          "old_logp": [[-1.0], [-2.0, -3.0], [-4.0, -5.0, -6.0]], "adv": [0.5, -1.0, 2.0]}


def test_other_old_log_probs_keep_every_other_field_and_the_row_order():
    batch = UpdateBatch(**FIELDS)
    given = [[-0.1], [-0.2, -0.3], [-0.4, -0.5, -0.6]]
    new = batch.with_old_logp(given)
    assert new.old_logp == ((-0.1,), (-0.2, -0.3), (-0.4, -0.5, -0.6))
    assert (new.prompt, new.reply, new.adv) == (batch.prompt, batch.reply, batch.adv)
    assert new.prompt == ((1, 2), (3,), (4, 5, 6)) and new.adv == (0.5, -1.0, 2.0)
    assert len(new) == 3
    assert batch.old_logp == ((-1.0,), (-2.0, -3.0), (-4.0, -5.0, -6.0))  # left as it was
    given[0][0] = 9.0  # what it was made of changes: the new batch does not
    given.append([0.0])
    assert new.old_logp[0] == (-0.1,) and len(new) == 3
    with pytest.raises(ValueError, match="row counts"):
        batch.with_old_logp(given)  # four rows for three actions


@pytest.mark.parametrize("short", sorted(FIELDS))
def test_fields_of_different_row_counts_are_refused(short):
    """Any one field a row short (the rows would pair the wrong prompt, reply, log-probs and
    advantage): a ValueError naming the counts, from the batch and from its mapping."""
    fields = {k: v[:-1] if k == short else v for k, v in FIELDS.items()}
    with pytest.raises(ValueError, match=r"row counts: \{2, 3\}|row counts: \{3, 2\}"):
        UpdateBatch(**fields)
    with pytest.raises(ValueError, match="row counts"):
        UpdateBatch.of(fields)


def test_a_mapping_without_a_field_is_refused_by_name():
    for missing in FIELDS:
        with pytest.raises(KeyError, match=missing):
            UpdateBatch.of({k: v for k, v in FIELDS.items() if k != missing})


def test_an_update_refuses_old_log_probs_that_do_not_match_their_replies():
    model, tok = load_model("tiny")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    batch = {"prompt": [[5, 6, 7], [8, 9]], "reply": [[10, 11, 12], [13, 14]],
             "old_logp": [[-1.0, -1.0], [-1.0, -1.0]], "adv": [1.0, -1.0]}  # row 0 one short
    with pytest.raises(ValueError, match="old_logp"):
        update(model, None, torch.optim.SGD(model.parameters(), lr=0.1), batch,
               TrainConfig(kl_coef=0.0), compute=Compute.local(tok.pad_token_id),
               epoch_seed=0)
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())
