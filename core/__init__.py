"""Plumbing every app shares and that knows no app: refusals, rate limits, HTTP retries."""
