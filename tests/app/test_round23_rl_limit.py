"""EP09 step 2 (issue 36, round 23): the lab times slime's scripts with the reference model's
forward (round-22 R #1); its limit says which two things slime does that the lab leaves out and
which way each makes it err: the actor's weights copied to host after every step (fast), and the
newest slime skipping the log-probability forward when a rollout trains one step (slow)."""

from tests.app.test_round22_prose import _step


def test_ep09_step_2s_limit_says_what_the_lab_leaves_out_of_slime_and_which_way(client):
    limit = _step(client, "/episodes/rl-placement", 2).split("Limit.")[1]
    assert (
        "copies the actor's new weights to host memory over PCIe: there the lab errs fast" in limit
    )
    assert "skip the forward that recomputes the log-probabilities" in limit
    assert "errs slow by one forward" in limit
