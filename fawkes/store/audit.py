"""The audit trail (schema v11): every mutating API request and command, who made it, what, when and
with which result.  Pruned with the events (``retention.events_s``)."""

from __future__ import annotations

from sqlmodel import col, select

from fawkes.store import validate
from fawkes.store.base import StoreBase
from fawkes.store.schema import AuditRecord

#: what an audit row's ``result`` says
RESULTS = ("ok", "refused", "invalid", "error")


def _clip(text: str | None, n: int) -> str | None:
    """One printable line of at most ``n`` characters (a hostile value is recorded, never replayed)."""
    if text is None:
        return None
    flat = "".join(c if c.isprintable() else "?" for c in str(text))
    return flat if len(flat) <= n else flat[: n - 3] + "..."


class AuditMixin(StoreBase):
    """The audit trail."""

    def record_audit(self, *, actor: str, via: str, action: str, result: str, target: str | None = None,
                     status: int | None = None, detail: str = "") -> AuditRecord:
        if result not in RESULTS:
            raise ValueError(f"audit result {result!r}")
        with self.session(write=True) as s:
            r = AuditRecord(time=self.clock(), actor=_clip(actor, 300), via=_clip(via, 16), action=_clip(action, 64),
                            target=_clip(target, 300), result=result, status=status, detail=_clip(detail, 1000) or "")
            s.add(r)
            s.flush()
            return r

    def audit(self, *, since: float | None = None, limit: int = 100) -> list[AuditRecord]:
        """The newest ``limit`` audit rows (at or after ``since``), oldest first."""
        validate.positive_int("limit", limit)
        validate.optional_number("since", since, minimum=float("-inf"))
        with self.session() as s:
            q = select(AuditRecord)
            if since is not None:
                q = q.where(AuditRecord.time >= since)
            return list(reversed(s.exec(q.order_by(col(AuditRecord.id).desc()).limit(limit)).all()))

    def prune_audit(self, before: float, *, dry_run: bool = False, batch: int = 5000) -> int:
        """Delete audit rows with ``time < before``; return how many (``dry_run``: only count)."""
        return self._prune(AuditRecord, AuditRecord.time, before, dry_run=dry_run, batch=batch)
