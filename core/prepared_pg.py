"""The cursor of core.prepared on PostgreSQL, in a module of its own: imported by core.prepared.cursor only where the
database is PostgreSQL, so that a process on SQLite never imports psycopg (see there)."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]  # psycopg 3 only
from psycopg import errors, pq

from core import prepared


class Preparing(ServerBindingCursor):
    """Values sent apart from the statement (server-side binding), which is prepared on its first run."""

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if prepared._refused:
            return super().execute(query, params, prepare=False)
        try:
            return super().execute(query, params, prepare=True)
        except (errors.InvalidSqlStatementName, errors.DuplicatePreparedStatement) as exc:
            prepared._refused = True
            prepared.log.warning("PostgreSQL lost or refused a prepared statement (%s): this process prepares none "
                                 "any more. Behind a pooler that cannot keep them, set DATABASE_PREPARED_STATEMENTS=0.",
                                 exc)
            if self.connection.info.transaction_status != pq.TransactionStatus.IDLE:
                raise  # inside a transaction, which the error ended: the caller's to handle
            return super().execute(query, params, prepare=False)
        except errors.FeatureNotSupported:
            # "cached plan must not change result type": a column the statement reads changed its type
            # since this connection prepared it (a migration run while the site serves), and PostgreSQL
            # refuses the kept statement on every run until it is deallocated. (Any other unsupported
            # feature fails the run below again and is the caller's.)
            if self.connection.info.transaction_status != pq.TransactionStatus.IDLE:
                raise  # the transaction's rollback deallocates them all (psycopg sends DEALLOCATE ALL then)
            prepared.log.info("A prepared statement's result type changed (a migration?): this connection's "
                              "prepared statements are deallocated and prepared again.")
            # psycopg forgets its own prepared statements when it sees DEALLOCATE ALL run.
            self.connection.execute("DEALLOCATE ALL")
            return super().execute(query, params, prepare=True)
