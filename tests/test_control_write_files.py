"""The script that writes a node's config files: a file appears whole or not at all, and two writers of
the same file at once both succeed (the clean-clone CI of adfa942: a drift check and a grow wrote one
node's files together; both used ``<file>.fawkes-tmp``, and one's rename found its temp file already
moved by the other: ``mv: cannot stat``).  The rendered script runs here under ``/bin/sh``."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

from fawkes.frameworks.control import ControlScriptDriver


def test_concurrent_writers_of_one_file_all_succeed_and_leave_no_temp_file(tmp_path):
    target = tmp_path / "conf" / "fawkes-daemon.sh"
    texts = [f"writer {i}\n" + "x" * 20_000 + "\n'$(true)\"\n" for i in range(16)]
    scripts = [str(ControlScriptDriver._write_script([(str(target), t)])) for t in texts]

    def run(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)

    for _ in range(5):
        with ThreadPoolExecutor(len(scripts)) as pool:
            results = list(pool.map(run, scripts))
        assert [r.returncode for r in results] == [0] * len(scripts), [r.stderr for r in results if r.returncode]
        assert target.read_text() in texts  # one writer's whole text, quotes and $(...) as written
        assert sorted(p.name for p in target.parent.iterdir()) == ["fawkes-daemon.sh"]
