import numpy as np
import pytest

from helpers.arguments import require_int


def test_python_and_numpy_ints_pass_and_come_back_as_int():
    assert require_int("n", 3, minimum=1) == 3
    value = require_int("n", np.int64(4), minimum=1)
    assert value == 4 and type(value) is int
    assert require_int("n", None, allow_none=True) is None


@pytest.mark.parametrize("bad", [2.0, True, "3", None])
def test_non_ints_are_a_type_error_naming_the_argument(bad):
    with pytest.raises(TypeError, match="^batch_size must be an int"):
        require_int("batch_size", bad, minimum=1)


def test_below_minimum_is_a_value_error_naming_the_argument_and_bound():
    with pytest.raises(ValueError, match=r"^steps must be >= 1, got 0$"):
        require_int("steps", 0, minimum=1)
