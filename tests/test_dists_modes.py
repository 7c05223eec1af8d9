"""A distribution fawkes unpacks is readable by every user (the daemons may run as a hosts' service user
other than the one that unpacked it; tests/test_service_user_lab.py): unpacked now, 0755; unpacked by an
earlier fawkes into mkdtemp's 0700, opened when it is next found ready."""

from __future__ import annotations

from fawkes.frameworks.dists import _readable, _staged


def test_a_staged_distribution_lands_readable_by_every_user(tmp_path):
    home = tmp_path / "dist-1.0"
    with _staged(home) as tmp:
        assert tmp.stat().st_mode & 0o777 == 0o700  # mkdtemp's, while it is filled
        (tmp / "lib").mkdir()
    assert home.is_dir() and home.stat().st_mode & 0o777 == 0o755


def test_one_unpacked_by_an_earlier_fawkes_is_opened(tmp_path):
    home = tmp_path / "dist-0.9"
    home.mkdir(mode=0o700)
    home.chmod(0o700)
    _readable(home)
    assert home.stat().st_mode & 0o777 == 0o755
    home.chmod(0o750)
    _readable(home)
    assert home.stat().st_mode & 0o777 == 0o755
