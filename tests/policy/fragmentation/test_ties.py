import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from policy.fragmentation.ties import tie

RESOLUTION = 2.0 ** -20
node = st.tuples(st.integers(-4 * 2**20, 4 * 2**20).map(lambda k: k * RESOLUTION),  # a growth, rounded
                 st.integers(0, 16_000).map(lambda k: k / 16_000),  # GPU fullness: 16 GPUs of 1,000 milli
                 st.integers(0, 1000).map(lambda k: k / 1000))  # CPU and memory fullness, to 0.1 %


@given(node, node)
def test_growth_orders_first_then_gpu_fullness_then_the_host(a, b):
    raw_a, raw_b = (-g + tie(np.array(u), np.array(h)) for g, u, h in (a, b))
    key_a, key_b = (-a[0], a[1], a[2]), (-b[0], b[1], b[2])
    assert (raw_a > raw_b) == (key_a > key_b)
    assert (raw_a == raw_b) == (key_a == key_b)


def test_below_the_growths_resolution():
    assert tie(np.array(1.0), np.array(1.0)) < RESOLUTION / 2
    assert tie(np.array(0.0), np.array(0.0)) == 0
    assert tie(np.array(5.0), np.array(1e9)) == tie(np.array(1.0), np.array(1.0))  # over-committed: full


def test_float_noise_in_the_gpu_fullness_leaves_the_host_to_decide():
    milli = np.array([992, 432, 743, 29, 540, 227, 782, 255])  # 4,000 of 8,000: half full
    noisy = (milli / 1000).sum() / 8
    assert noisy != 0.5  # 0.49999999999999994
    assert tie(np.array(noisy), np.array(0.6)) > tie(np.array(0.5), np.array(0.4))
