"""The fsck reading that decides whether a DP may stop its DataNodes (issue 29; the lab test is
tests/test_dp_safety_lab.py)."""

from __future__ import annotations

from fawkes.frameworks.hdfs import unsafe_blocks

FSCK_LOCATIONS = """\
/a.txt 12 bytes, 1 block(s):  OK
0. BP-1:blk_1073741825_1001 len=12 repl=1 [DatanodeInfoWithStorage[10.230.0.12:50010,DS-e6,DISK]]

/b.txt 300 bytes, 2 block(s):  OK
0. BP-1:blk_1073741826_1002 len=200 repl=2 [DatanodeInfoWithStorage[10.230.0.12:50010,DS-e6,DISK], \
DatanodeInfoWithStorage[10.230.0.11:50010,DS-a1,DISK]]
1. BP-1:blk_1073741827_1003 len=100 repl=2 [DatanodeInfoWithStorage[10.230.0.13:50010,DS-b2,DISK], \
DatanodeInfoWithStorage[10.230.0.12:50010,DS-e6,DISK]]

/open.txt._COPYING_ 0 bytes, 1 block(s), OPENFORWRITE:  MISSING 1 blocks of total size 0 B
0. BP-1:blk_1073741828_1004{UCState=UNDER_CONSTRUCTION, truncateBlock=null, primaryNodeIndex=-1, \
replicas=[ReplicaUC[[DISK]DS-e6:NORMAL:10.230.0.12:50010|RBW]]} len=0 MISSING!
/c.txt 5 bytes, 1 block(s):  MISSING 1 blocks of total size 5 B
0. BP-1:blk_1073741829_1005 len=5 MISSING!

Status: CORRUPT
"""


def test_unsafe_blocks_are_closed_blocks_held_only_by_leaving_nodes():
    assert unsafe_blocks(FSCK_LOCATIONS, {"10.230.0.12"}) == ["/a.txt blk_1073741825_1001"]
    assert unsafe_blocks(FSCK_LOCATIONS, {"10.230.0.12", "10.230.0.13"}) == [
        "/a.txt blk_1073741825_1001", "/b.txt blk_1073741827_1003"]
    assert unsafe_blocks(FSCK_LOCATIONS, {"10.230.0.99"}) == []  # a missing block is no leaving node's
    assert unsafe_blocks("", {"10.230.0.12"}) == []
