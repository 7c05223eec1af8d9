"""B-6 (issue 11): a default shrink mode per framework kind, declared by its driver; the coordinator
config's ``shrink_mode`` wins when it sets one; bad values refused in one line."""

from __future__ import annotations

import pytest

from fawkes.errors import FawkesError
from fawkes.frameworks.base import SHRINK_MODES, FrameworkDriver, driver_class, kinds, shrink_mode_for


def test_every_shipped_kind_declares_a_known_default_and_spark_hdfs_is_fp():
    assert "spark-hdfs" in kinds()
    for kind in kinds():
        assert driver_class(kind).default_shrink_mode in SHRINK_MODES
    assert "default_shrink_mode" in vars(driver_class("spark-hdfs"))  # declared by the driver itself
    assert shrink_mode_for("spark-hdfs") == "fp"


@pytest.mark.parametrize("mode", SHRINK_MODES)
def test_the_config_wins_over_the_kinds_default(mode):
    assert shrink_mode_for("spark-hdfs", mode) == mode


@pytest.mark.parametrize("bad", ["kill", "", "FP", " fp", 1, True, 0.5, ["fp"]])
def test_a_bad_configured_mode_is_one_line_naming_shrink_mode(bad):
    with pytest.raises(FawkesError) as e:
        shrink_mode_for("spark-hdfs", bad)
    msg = str(e.value)
    assert msg.startswith("shrink_mode: ") and "\n" not in msg and "fp, graceful, suspend" in msg


def test_an_unknown_kind_is_refused():
    with pytest.raises(FawkesError, match="unknown framework kind"):
        shrink_mode_for("yarn-mr")


def test_a_driver_declaring_an_unknown_default_is_refused_when_defined():
    with pytest.raises(TypeError, match="default_shrink_mode: 'kill' is not one of fp, graceful, suspend"):
        type("BadDriver", (FrameworkDriver,), {"kind": "bad", "default_shrink_mode": "kill"})
    ok = type("GoodDriver", (FrameworkDriver,), {"kind": "good", "default_shrink_mode": "graceful"})
    assert ok.default_shrink_mode == "graceful"
    inherited = type("PlainDriver", (FrameworkDriver,), {"kind": "plain"})
    assert inherited.default_shrink_mode == "fp"
