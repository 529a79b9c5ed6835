"""Podium's own reference benchmarks: small, real training runs that log like MLPerf Training results,
so that reproduction on a runner is real on any machine (see `podium_reference.digits`).

Nothing is imported here: a server that only validates configs needs neither torch nor scikit-learn
(the optional dependency group `reference` brings them)."""
