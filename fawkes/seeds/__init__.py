"""The seed papers' experiments (docs/reproduction.md): BIG-C (:mod:`fawkes.seeds.bigc`) and CERES
(:mod:`fawkes.seeds.ceres`) run on the simulator (:mod:`fawkes.sim`); the YARN placement project
(:mod:`fawkes.seeds.racks`) and UBIS (:mod:`fawkes.seeds.slack`) are small models of their own that
call the mechanism directly.  :mod:`fawkes.seeds.seed_checks` names them as ``fawkes simulate``
experiments (SIM-P, SIM-U, SIM-B, SIM-C).  They may import the simulator; it never imports them.
"""
