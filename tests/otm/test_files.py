"""otm.files.load_numpy: the file's kind is checked before numpy guesses it."""
import numpy as np
import pytest

from otm.files import load_numpy


def test_loads_each_kind(tmp_path):
    np.save(tmp_path / "a.npy", np.array([0.25, 0.75]))
    np.savez(tmp_path / "b.npz", x=np.arange(3))
    assert load_numpy(tmp_path / "a.npy", "npy").tolist() == [0.25, 0.75]
    with load_numpy(tmp_path / "b.npz", "npz") as data:
        assert data["x"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_a_text_file_is_named_as_such_not_as_pickled_data(tmp_path, kind):
    path = tmp_path / f"text.{kind}"
    path.write_text("0.5, 0.5\n")
    with pytest.raises(ValueError, match=r"not a NumPy file: .* starts with b'0.5, 0'") as caught:
        load_numpy(path, kind)
    assert "pickle" not in str(caught.value)


def test_the_other_kind_is_named(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(2))
    np.savez(tmp_path / "b.npz", x=np.zeros(2))
    with pytest.raises(ValueError, match="a .npy array, expected an .npz archive"):
        load_numpy(tmp_path / "a.npy", "npz")
    with pytest.raises(ValueError, match="an .npz archive, expected a .npy array"):
        load_numpy(tmp_path / "b.npz", "npy")
    with pytest.raises(ValueError, match="kind must be"):
        load_numpy(tmp_path / "a.npy", "csv")


def test_object_arrays_stay_refused(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle"):
        load_numpy(tmp_path / "o.npy", "npy")
