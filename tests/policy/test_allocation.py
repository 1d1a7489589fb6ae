"""Where a share goes when its GPUs are not recorded (policy.allocation.guess)."""

import numpy as np

from policy.allocation import guess


def test_a_share_whose_gpus_are_unknown_is_guessed_fullest_first_and_never_beyond_what_is_free():
    free, core_free = np.array([5, 10, 15, 2]), np.array([100, 100, 100, 100])
    full = np.array([0.67, 0.33, 0.0, 0.87])
    assert guess(free, core_free, full, 4, 0) == ({0: 4}, {})  # the fullest GPU with room for it all
    assert guess(free, core_free, full, 20, 50) == ({3: 2, 0: 5, 1: 10, 2: 3}, {3: 50})
    assert guess(free, core_free, full, 99, 0)[0] == {3: 2, 0: 5, 1: 10, 2: 15}
